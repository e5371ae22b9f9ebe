"""Smaller console fixes: the sessions list refreshes itself and keeps the cursor; `+` asks how many
steps; prune asks first; replay speeds follow the wall clock; an idle console polls less and less;
imported AIDE nodes say they were not measured here."""
from __future__ import annotations

import time

from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from tests.demo_session import write_demo_session

from befair_tui.app import create_app
from befair_tui.screens.add_steps import AddStepsModal
from befair_tui.screens.confirm import ConfirmModal
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.replay import ReplayScreen
from befair_tui.screens.sessions import SessionsScreen

from tests.redraws import count_calls, count_redraws

from .conftest import tree_text, wait_for
from .test_console_events import add_node, new_session
from engine.session.event_types import parse
from tests.settle import reads_done


async def test_sessions_screen_refreshes_and_keeps_the_cursor(db, store, monkeypatch):
    monkeypatch.setattr("befair_tui.screens.sessions.REFRESH", 0.3)
    for seed in (1, 2, 3):
        write_demo_session(store, n_nodes=3, seed=seed, ts0=1_700_000_000.0 + seed * 100)
    app = create_app(db, start="sessions")
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        table = screen.query_one("DataTable")
        await pilot.press("down")
        await pilot.pause()
        chosen = screen.selected_id()
        assert chosen == "demo-2-3"  # newest first: demo-3, demo-2, demo-1
        # another process starts a session: it appears on top, the cursor stays on demo-2
        write_demo_session(store, n_nodes=2, seed=9, ts0=1_700_009_000.0, finished=False)
        await wait_for(pilot, lambda: table.row_count == 4, timeout=10, what="the refreshed list")
        assert screen.selected_id() == chosen and table.cursor_row == 2
        reads = count_calls(screen.store, "sessions")
        await wait_for(pilot, lambda: len(reads) >= 2, timeout=10, what="more refreshes")
        assert screen.selected_id() == chosen  # an unchanged list is not redrawn under the cursor


async def test_plus_asks_how_many_steps(db, store):
    new_session(store, "s-plus")
    app = create_app(db, start="console", session_id="s-plus", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.status == "running")
        console = app.screen
        await pilot.press("plus")
        await pilot.pause()
        assert isinstance(app.screen, AddStepsModal)
        assert app.screen.query_one("#add-steps-count").value == "5"  # the default
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is console and store.pending_commands("s-plus") == []
        await pilot.press("plus")
        await pilot.pause()
        await pilot.press("0", "enter")  # typing replaces the default; 0 is refused with a reason
        await pilot.pause()
        assert isinstance(app.screen, AddStepsModal)
        assert "at least 1" in str(app.screen.query_one("#add-steps-problem").render())
        await pilot.press("backspace", "1", "2", "enter")
        await pilot.pause()
        assert app.screen is console
        (cmd,) = store.pending_commands("s-plus")
        assert cmd["kind"] == "set_budget" and cmd["payload"] == {"steps": 4 + 12}


async def test_prune_asks_first(db, store):
    w = new_session(store, "s-prune")
    add_node(w, 1)
    add_node(w, 2, parent=1, stage="improve")
    app = create_app(db, start="console", session_id="s-prune", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        console = app.screen
        await wait_for(pilot, lambda: 2 in console.state.nodes)
        console.ctl.auto_follow = False  # as after choosing a node by hand
        tree = console.query_one("SearchTree")
        for _ in range(20):
            tree.move_to(1)
            console._select(1)
            await pilot.pause(0.05)
            if console.selected_node == 1:
                break
        assert console.selected_node == 1
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmModal)
        assert "node 1 and the 1 node(s) below it" in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert store.pending_commands("s-prune") == []
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert [(c["kind"], c["payload"]) for c in store.pending_commands("s-prune")] == [("prune", {"node_id": 1})]


def _timed_session(store, sid: str, seconds: int) -> None:
    """A session with one event per second of session time (0..seconds)."""
    t0 = 1_700_000_000.0
    config = SessionConfig(level="base", steps=seconds, best="validation").to_dict()
    w = store.create_session(config, instruction="x", coder={"name": "offline", "simulated": True},
                             data={"kind": "synth", "path": "p"}, session_id=sid, ts=t0)
    for i in range(1, seconds + 1):
        w.emit(parse(ev.POLICY_DECISION, {"action": "draft", "forced": False, "node_id": None, "reason": f"tick {i}"}),
               ts=t0 + i)


async def test_replay_speeds_follow_the_wall_clock(db, store):
    _timed_session(store, "s-time", 60)
    app = create_app(db, start="replay", session_id="s-time", replay_speed="10x")
    async with app.run_test(size=(120, 34)) as pilot:
        await reads_done(app, pilot)
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        now = [100.0]
        screen.replaying.mono = lambda: now[0]
        await pilot.press("space")  # play from the session's start (position 1, session time 0)
        await pilot.pause()
        assert screen.playing and screen.session_time() == 0.0
        now[0] += 1.0  # one second of wall time at 10x: ten seconds of session time
        screen._play_tick()
        assert screen.session_time() == 10.0
        now[0] += 0.5
        screen._play_tick()
        assert screen.session_time() == 15.0
        now[0] += 2.0  # a slow frame: nothing is lost, the replay catches up
        await pilot.pause()
        screen._play_tick()
        assert screen.session_time() == 35.0
        await pilot.press("f")  # 100x, measured from the moment of the change
        await pilot.pause()
        assert screen.speed == "100x"
        now[0] += 0.2
        screen._play_tick()
        assert screen.session_time() == 55.0
        screen.action_speed()  # max (no tick in between: it would run to the end)
        screen.action_speed()  # 1x
        assert screen.speed == "1x"
        now[0] += 3.0
        screen._play_tick()
        assert screen.session_time() == 58.0


async def test_an_idle_console_polls_less_and_still_sees_new_events(db, store):
    w = new_session(store, "s-idle")
    add_node(w, 1)
    app = create_app(db, start="console", session_id="s-idle", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        console = app.screen
        assert isinstance(console, ConsoleScreen)
        await wait_for(pilot, lambda: 1 in console.state.nodes)
        await pilot.pause(1.0)
        reads = count_calls(console.store, "events")   # the follower reads the event log through it
        await pilot.pause(3.0)
        assert 1 <= len(reads) <= 8, len(reads)  # still polling, slowly: at 0.05 s it would be ~60
        redraws = count_redraws(console)
        await pilot.pause(1.0)
        assert not redraws  # nothing new: nothing re-rendered
        t0 = time.monotonic()
        add_node(w, 2, parent=1, stage="improve")
        await wait_for(pilot, lambda: 2 in console.state.nodes, what="a node after a quiet spell")
        assert time.monotonic() - t0 < 3.0


async def test_imported_aide_nodes_say_not_measured_here(db, store):
    config = SessionConfig(level="base", steps=2, best="claimed", coder="aide-import").to_dict()
    w = store.create_session(config, instruction="x", coder={"name": "aide-import", "label": "imported AIDE run"},
                             data={"kind": "aide-import", "path": "journal.json"}, session_id="s-aide",
                             origin="import")
    for nid, status in ((1, "ok"), (2, "buggy")):
        w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": None, "step": nid, "stage": "draft", "plan": "p",
                                 "guidance_ids": [], "origin": "import"}))
        w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": status, "exit_code": 0, "exec_time": 1.0,
                                  "exc_type": "KeyError" if status == "buggy" else None, "output_head": "",
                                  "output_tail": "", "truncated": False}))
        w.emit(parse(ev.REVIEW, {"node_id": nid, "is_bug": status != "ok", "summary": "", "claimed_metric": 0.81}))
    w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "imported"}))
    app = create_app(db, start="console", session_id="s-aide", poll_interval=0.05)
    async with app.run_test(size=(120, 34)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.status == "finished")
        await pilot.pause(0.1)
        text = tree_text(app)
        assert "1 draft imported (not measured here)" in text
        assert "measuring" not in text
        assert "2 draft (imported) bug: KeyError" in text
