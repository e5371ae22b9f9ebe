"""UI responsiveness (headless, App.run_test): folding and re-rendering a 1,000-node tree, and how
far the console lags behind output streamed at 1,000 lines/s through the real event log."""
from __future__ import annotations

import asyncio
import statistics
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from engine.session.store import SessionStore
from engine.session.event_types import parse
from tests.redraws import count_redraws
from tests.settle import reads_done

N_NODES = 1_000
BIG_TREE = 5_000  # "a 5,000-node session stays usable"
STREAM_SECONDS = 3.0
LINES_PER_S = 1_000
CHUNK_LINES = 20  # lines per output event (the runner sends chunks, not single lines)

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}


def _node_events(nid: int, parent: int | None, seq: int, ts: float, sid: str) -> list[ev.Event]:
    payloads = [
        (ev.NODE_CREATED, {"node_id": nid, "parent_id": parent, "step": nid, "stage": "draft" if parent is None
                           else "improve", "plan": f"plan {nid}", "guidance_ids": [], "origin": "agent"}),
        (ev.CODE, {"node_id": nid, "code": "import numpy as np\n" * 20}),
        (ev.EXEC_STARTED, {"node_id": nid, "workdir": "w"}),
        (ev.EXEC_FINISHED, {"node_id": nid, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                            "output_head": "ok\n", "output_tail": "", "truncated": False}),
        (ev.EVALUATED, {"node_id": nid, "split": "validation", "ok": True, "verdict": "ok", "reason": None,
                        "summary": {"auc": 0.6 + (nid % 97) / 1000, "auc_gap": 0.05 + (nid % 13) / 100,
                                    "worst_auc": 0.55, "group_auc": {}, "n": 90}, "medfair": {}, "blinded": False}),
        (ev.AUDITED, {"node_id": nid, "flags": {"reads_skin_tone": nid % 2 == 0}, "evidence": {}, "claim": None}),
    ]
    return [ev.Event(seq=seq + i, kind=k, payload=p, ts=ts, session_id=sid) for i, (k, p) in enumerate(payloads)]


def _tree_events(sid: str, n: int) -> list[ev.Event]:
    config = SessionConfig(level="base", steps=n).to_dict()
    out = [ev.Event(seq=1, kind=ev.SESSION_STARTED, payload={"config": config, "instruction": "x", "coder": CODER,
                                                             "data": {}}, ts=0.0, session_id=sid)]
    for nid in range(1, n + 1):
        parent = None if nid <= 5 else (nid - 1) // 3 + 1
        out += _node_events(nid, parent, len(out) + 1, float(nid), sid)
    return out


def _feed(replay: Any, events: list[ev.Event]) -> None:
    """Events into a replay screen as its timeline would move them: folded by its controller, drawn."""
    replay.apply(replay.ctl.ingest(events))


async def _new_node_ms(db: Path, session_id: str, tree: str, n_nodes: int = N_NODES,
                       ) -> tuple[dict[str, list[float]], list[dict]]:
    """Per new node on an n-node tree: the wall time from its events to the frame drawn, the CPU
    time the app spends on it, and the wall time including Textual's test pause (see _frame_cost);
    the same loop with no event gives the harness's own share. `tree`: "new" (the product's
    SearchTree), "previous" (the tree before it drew its own lines: reference_search_tree.py) or
    "textual" (that one with its caches off: Textual's Tree as it is), put in the console's place."""
    from befair_tui.app import create_app
    from befair_tui.screens import console_view as console   # where the consoles compose their tree
    from befair_tui.widgets.search_tree import SearchTree
    from tests.bench import reference_search_tree

    product = console.SearchTree
    if tree != "new":
        reference_search_tree.SearchTree.caching = tree == "previous"
        console.SearchTree = reference_search_tree.SearchTree  # type: ignore[misc]
    else:
        console.SearchTree = SearchTree
    events = _tree_events(session_id, n_nodes)
    app = create_app(db, start="replay", session_id=session_id)  # read-only: no follower
    rows = []
    times: dict[str, list[float]] = {"frame": [], "cpu": [], "wall": [], "floor": [], "open": [], "render": []}
    try:
        async with app.run_test(size=(160, 50)) as pilot:
            await reads_done(app, pilot)
            screen = app.screen
            await pilot.pause()
            t0 = time.perf_counter()
            _feed(screen, events[1:])
            t1 = time.perf_counter()
            await pilot.pause()
            app.screen._compositor.render_update(full=True)
            t2 = time.perf_counter()
            times["open"].append((t1 - t0) * 1000)
            times["render"].append((t2 - t0) * 1000)
            rows.append({"name": f"apply {len(events) - 1} events ({n_nodes} nodes) + update widgets",
                         "value": (t1 - t0) * 1000, "unit": "ms"})
            rows.append({"name": f"... + first full re-render of the {n_nodes}-node screen",
                         "value": (t2 - t0) * 1000, "unit": "ms"})
            for k in range(25):  # one more node on top: the steady-state cost of a live update
                batch = _node_events(n_nodes + 1 + k, 7 + k, screen.state.last_seq + 1, 1e4 + k, session_id)
                frame, cpu, wall = await _frame_cost(app, pilot, batch)
                if k >= 5:  # the first few warm the caches of a tree just drawn
                    times["frame"].append(frame)
                    times["cpu"].append(cpu)
                    times["wall"].append(wall)
            for _ in range(10):
                times["floor"].append((await _frame_cost(app, pilot, []))[0])
    finally:
        console.SearchTree = product
    return times, rows


async def _frame_cost(app, pilot, batch: list[ev.Event]) -> tuple[float, float, float]:
    """(wall ms until the frame is drawn, CPU ms, wall ms including Textual's pause) to ingest a
    batch: the messages it posted are handled and the frame drawn, without the idle wait; then
    pilot.pause() (which sleeps >= 20 ms to see the app idle) lets anything later run, and
    whatever it redraws is drawn. CPU time covers all of it (the app's work, plus the pilot's
    small share: see the empty update)."""
    c0, t0 = time.process_time(), time.perf_counter()
    _feed(app.screen, batch)
    await pilot._wait_for_screen()
    app.screen._on_timer_update()
    frame = time.perf_counter()
    await pilot.pause()
    app.screen._on_timer_update()
    return (frame - t0) * 1000, (time.process_time() - c0) * 1000, (time.perf_counter() - t0) * 1000


async def _tree_bench(db: Path) -> list[dict]:
    store = SessionStore(db)
    for sid, n in (("bench-tree", N_NODES), ("bench-tree-previous", N_NODES), ("bench-tree-textual", N_NODES),
                   ("bench-tree-big", BIG_TREE)):
        store.create_session(SessionConfig(level="base", steps=n).to_dict(), instruction="x", coder=CODER,
                             data={}, session_id=sid)
    store.close()
    plain, _ = await _new_node_ms(db, "bench-tree-textual", "textual")
    ref, _ = await _new_node_ms(db, "bench-tree-previous", "previous")
    times, rows = await _new_node_ms(db, "bench-tree", "new")
    big, _ = await _new_node_ms(db, "bench-tree-big", "new", n_nodes=BIG_TREE)
    med = {k: statistics.median(v) for k, v in times.items()}
    ref_med = {k: statistics.median(v) for k, v in ref.items()}
    previous = "the tree before it drew its own lines (tests/bench/reference_search_tree.py), same run"
    rows[0].update(reference=previous, ratio=med["open"] / ref_med["open"])
    rows[1].update(reference=previous, ratio=med["render"] / ref_med["render"])
    plain_frame = statistics.median(plain["frame"])
    rows.append({"name": f"ui new node: one new node (6 events) on a {N_NODES}-node tree, apply + render",
                 "value": med["frame"], "unit": "ms", "reference": previous,
                 "ratio": med["frame"] / ref_med["frame"],
                 "note": f"median of 20: wall time from the events to the frame drawn; "
                         f"max {max(times['frame']):.1f} ms; the test harness's own share (an update with "
                         f"no event) {med['floor']:.1f} ms; CPU time per new node {med['cpu']:.1f} ms; "
                         f"reference median {ref_med['frame']:.1f} ms, max {max(ref['frame']):.1f} ms; "
                         f"Textual's Tree as it is {plain_frame:.1f} ms (x{med['frame'] / plain_frame:.2f})"})
    rows.append({"name": "... the same, wall time including Textual's test pause (sleeps >= 20 ms)",
                 "value": med["wall"], "unit": "ms", "reference": previous,
                 "ratio": med["wall"] / ref_med["wall"],
                 "note": "the measure used before (ingest + pilot.pause + render); the pause sleeps while idle"})
    big_frame = statistics.median(big["frame"])
    rows.append({"name": f"ui new node on a {BIG_TREE}-node tree, apply + render", "value": big_frame,
                 "unit": "ms", "reference": f"the {N_NODES}-node tree", "ratio": big_frame / med["frame"],
                 "note": f"median of 20; max {max(big['frame']):.1f} ms"})
    return rows


async def _stream_bench(db: Path) -> list[dict]:
    from befair_tui.app import create_app

    store = SessionStore(db)
    w = store.create_session(SessionConfig(level="base", steps=3).to_dict(), instruction="x", coder=CODER,
                             data={}, session_id="bench-stream")
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "p",
                             "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_STARTED, {"node_id": 1, "workdir": "w"}))
    emitted: dict[int, float] = {}
    seen: dict[int, float] = {}
    app = create_app(db, start="console", session_id="bench-stream", poll_interval=0.1)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = app.screen
        redraws = count_redraws(screen)
        original = screen.ingest

        def ingest(events):
            original(events)
            now = time.perf_counter()
            for e in events:
                seen.setdefault(e.seq, now)

        screen.ingest = ingest
        while screen.state.last_seq < 3:
            await pilot.pause(0.05)

        def writer():
            wstore = SessionStore(db)
            ww = wstore.writer("bench-stream")
            interval = CHUNK_LINES / LINES_PER_S
            start = time.perf_counter()
            line = 0
            k = 0
            while time.perf_counter() - start < STREAM_SECONDS:
                text = "".join(f"epoch {line + i}: loss 0.{line + i:05d} auc 0.7\n" for i in range(CHUNK_LINES))
                line += CHUNK_LINES
                e = ww.emit(parse(ev.OUTPUT, {"node_id": 1, "text": text, "stream": "stdout"}))
                emitted[e.seq] = time.perf_counter()
                k += 1
                delay = start + k * interval - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
            wstore.close()

        thread = threading.Thread(target=writer)
        thread.start()
        while thread.is_alive():
            await pilot.pause(0.05)
        deadline = time.perf_counter() + 10
        while max(emitted) not in seen and time.perf_counter() < deadline:
            await pilot.pause(0.05)
        lags = sorted((seen[s] - t) * 1000 for s, t in emitted.items() if s in seen)
        lines = len(emitted) * CHUNK_LINES
        rate = lines / STREAM_SECONDS
    store.close()
    p95 = lags[int(0.95 * (len(lags) - 1))]
    return [
        {"name": f"output at {rate:.0f} lines/s for {STREAM_SECONDS:.0f} s: mean UI lag",
         "value": statistics.mean(lags),
         "unit": "ms", "note": f"poll interval 100 ms; {len(lags)}/{len(emitted)} chunks seen"},
        {"name": "... p95 UI lag", "value": p95, "unit": "ms"},
        {"name": "... max UI lag", "value": lags[-1], "unit": "ms"},
        {"name": "... UI re-renders during the stream (coalesced batches)", "value": len(redraws), "unit": "renders",
         "note": f"{len(emitted)} output events"},
    ]


IDLE_SECONDS = 10.0


async def _cpu_while_open(app, ready, seconds: float = IDLE_SECONDS) -> tuple[float, object, int]:
    """This process's CPU time (all threads) over `seconds` with `app` open and idle, in %; the screen;
    how many times a console screen redrew meanwhile."""
    async with app.run_test(size=(120, 36)) as pilot:
        while not ready(app):
            await pilot.pause(0.05)
        await pilot.pause(1.0)
        redraws = count_redraws(app.screen) if hasattr(app.screen, "_redraw") else []
        cpu0, wall0 = time.process_time(), time.perf_counter()
        await pilot.pause(seconds)
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        return 100 * cpu / wall, app.screen, len(redraws)


@contextmanager
def _event_log_reads(session_id: str) -> Iterator[list[int]]:
    """Count the reads of one session's event log, in any SessionStore, while the block runs."""
    reads: list[int] = []
    real = SessionStore.events

    def counted(self: SessionStore, sid: str, *args: Any, **kwargs: Any) -> list[ev.Event]:
        if sid == session_id:
            reads.append(1)
        return real(self, sid, *args, **kwargs)

    SessionStore.events = counted  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        del SessionStore.events   # SessionRows' own again


async def _idle_bench(db: Path) -> list[dict]:
    """An open console that nothing happens to: a finished session, and a paused live one (its runner's
    heartbeat kept fresh by this process). Reference: the setup screen, idle, in the same run."""
    import os

    from tests.demo_session import write_demo_session
    from engine.session.heartbeat import Heartbeat

    from befair_tui.app import create_app

    store = SessionStore(db)
    done = write_demo_session(store, n_nodes=12)
    live = write_demo_session(store, n_nodes=6, seed=1, finished=False, session_id="paused")
    w = store.writer(live)
    w.emit(parse(ev.PAUSED, {"by": "bench"}))
    store.db.conn.execute("update sessions set pid = ? where id = ?", [os.getpid(), live])
    setup_pct, _, _ = await _cpu_while_open(create_app(db, settings_file=db.parent / "s.json"),
                                         lambda a: a.screen.__class__.__name__ == "SetupScreen")
    rows = [{"name": f"idle setup screen, CPU over {IDLE_SECONDS:.0f} s", "value": setup_pct, "unit": "%"}]
    for label, sid in (("finished session", done), ("paused live session (runner alive)", live)):
        with Heartbeat(db, sid), _event_log_reads(sid) as reads:
            app = create_app(db, start="console", session_id=sid, poll_interval=0.15)
            last = store.last_seq(sid)
            def caught_up(a, last=last):
                return getattr(a.screen, "state", None) is not None and a.screen.state.last_seq == last
            pct, screen, redrawn = await _cpu_while_open(app, caught_up)
        rows.append({"name": f"idle console, {label}", "value": pct, "unit": "%",
                     "reference": "idle setup screen", "ratio": pct / setup_pct if setup_pct else None,
                     "note": f"{len(reads)} event-log reads, {redrawn} renders while idle; "
                             "includes this process's heartbeat thread"})
    store.close()
    return rows


async def _replay_bench(db: Path) -> list[dict]:
    """Replay at 10x: session seconds shown per wall-clock second (nominal 10)."""
    from tests.demo_session import write_demo_session

    from befair_tui.app import create_app

    store = SessionStore(db)
    sid = write_demo_session(store, n_nodes=12)
    events = store.events(sid)
    span = events[-1].ts - events[0].ts
    app = create_app(db, start="replay", session_id=sid, replay_speed="10x")
    async with app.run_test(size=(160, 50)) as pilot:
        await reads_done(app, pilot)
        screen = app.screen
        await pilot.pause(0.3)
        t0 = time.perf_counter()
        screen.action_play()
        while not screen.timeline.at_end:
            await pilot.pause(0.01)
        wall = time.perf_counter() - t0
    store.close()
    return [{"name": f"replay at 10x of a {span:.0f} s session: session s per wall s", "value": span / wall,
             "unit": "x", "reference": "nominal 10x", "ratio": span / wall / 10, "note": f"{wall:.2f} s wall"}]


def run() -> list[dict]:
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(_tree_bench(Path(tmp) / "tree.db"))
        rows += asyncio.run(_stream_bench(Path(tmp) / "stream.db"))
        rows += asyncio.run(_idle_bench(Path(tmp) / "idle.db"))
        rows += asyncio.run(_replay_bench(Path(tmp) / "replay.db"))
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
