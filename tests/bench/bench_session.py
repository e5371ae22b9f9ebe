"""Session store benchmarks: event ingest, reducer fold, cross-process steering latency.

- ingest: events appended through SessionWriter.batch (64 events per transaction, the node rows
  and session summary written once per batch), against emit with one durable transaction per
  event, both against the floor of raw sqlite3 `executemany` of the same rows in one transaction.
- fold: the typed reducer over a recorded 1,000-node session against today's fold of payload dicts
  (tests/bench/reference_dict_fold.py), in memory and with the load from SQLite.
- steering: a command issued in this process, seen and consumed by another process polling the
  commands table every 10 ms (what a headless `befair run` does between steps).
"""
from __future__ import annotations

import dataclasses
import gc
import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.demo_session import demo_events
from engine.session.state import fold
from engine.session.store import SessionStore
from tests.bench import reference_dict_fold
from engine.session.event_types import parse

ROOT = Path(__file__).resolve().parents[2]


def _start(store: SessionStore, events, sid: str):
    first = events[0].payload
    return store.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                                data=first["data"], session_id=sid, ts=events[0].ts)


def _emit_rate(tmp: Path, events, batch: int, name: str) -> float:
    """Events/s through SessionWriter.emit, `batch` events per transaction (1: one per event)."""
    store = SessionStore(tmp / f"{name}.db")
    writer = _start(store, events, name)
    body = events[1:]
    started = time.perf_counter()
    for i in range(0, len(body), batch):
        with writer.batch():
            for e in body[i:i + batch]:
                writer.emit(parse(e.kind, e.payload), ts=e.ts)
    elapsed = time.perf_counter() - started
    store.close()
    return len(body) / elapsed


def _raw_rate(tmp: Path, body, name: str) -> float:
    raw_path = tmp / f"{name}.db"
    SessionStore(raw_path).close()  # same schema
    conn = sqlite3.connect(raw_path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("insert into sessions (id, created_at, status) values ('raw', 0, 'running')")
    rows = [(r["session_id"], r["seq"], r["ts"], r["kind"], r["payload"])
            for r in (e.to_row() | {"session_id": "raw"} for e in body)]
    started = time.perf_counter()
    conn.execute("BEGIN")
    conn.executemany("insert into events (session_id, seq, ts, kind, payload) values (?, ?, ?, ?, ?)", rows)
    conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return len(body) / elapsed


BATCH = 64  # events per transaction: a runner's batch of output lines is 1-200 lines


def _ingest(tmp: Path) -> list[dict]:
    events = demo_events(n_nodes=60, seed=1)  # ~900 events, the realistic mix
    single, batched, raw = [], [], []
    for i in range(3):
        single.append(_emit_rate(tmp, events, 1, f"single{i}"))
        batched.append(_emit_rate(tmp, events, BATCH, f"batched{i}"))
        raw.append(_raw_rate(tmp, events[1:], f"raw{i}"))
    rate, one, raw_rate = (statistics.median(x) for x in (batched, single, raw))
    n = len(events) - 1
    return [
        {"name": f"event ingest via SessionWriter.batch ({BATCH} events/txn)", "value": rate, "unit": "events/s",
         "reference": "emit, 1 txn/event", "ratio": rate / one,
         "note": f"{n} events, median of 3; raw executemany floor {raw_rate:,.0f} events/s (x{rate / raw_rate:.2f}); "
                 "durable per committed batch"},
        {"name": "event ingest via SessionWriter.emit (1 txn/event)", "value": one, "unit": "events/s",
         "reference": "raw executemany, 1 txn", "ratio": one / raw_rate, "note": "median of 3"},
        {"name": "emit latency per event (1 txn/event)", "value": 1000 / one, "unit": "ms"},
    ]


def _fold(tmp: Path) -> list[dict]:
    """Today's fold (the reducer of payload dicts, kept in tests/bench/reference_dict_fold.py) against
    the typed fold, on the same events in the same run: as the store loads them (typed as they are
    read), and from bare dicts (each parsed in the fold); then load + fold from SQLite, both ways.
    The ways take turns, each run after a full collection with the collector paused (as the store
    folds), and the fastest of the runs is kept: under load the slowest runs are noise."""
    sid = _stored_session(tmp)
    store = SessionStore(tmp / "fold.db")
    loaded = store.events(sid)  # typed as loaded
    bare = [dataclasses.replace(e, typed=None) for e in loaded]
    assert len(fold(loaded, sid).nodes) == 1000
    fastest = _fastest({
        "reference": lambda: reference_dict_fold.fold(loaded, sid), "typed": lambda: fold(loaded, sid),
        "from dicts": lambda: fold(bare, sid),
    }, 15)
    loads = _fastest({"reference": lambda: reference_dict_fold.load_and_fold(store, sid),
                      "typed": lambda: store.state(sid)}, 5)
    store.close()
    reference, typed, from_dicts = fastest["reference"], fastest["typed"], fastest["from dicts"]
    n = f"{len(loaded):,} events, fastest of 15 taking turns"
    return [
        {"name": "reducer fold, 1,000-node session (today's fold of dicts: the reference)", "value": reference,
         "unit": "ms", "note": n},
        {"name": "typed fold, 1,000-node session (events typed as the store loads them)", "value": typed,
         "unit": "ms", "reference": "today's fold of dicts", "ratio": typed / reference, "note": n},
        {"name": "typed fold from bare dicts (each payload parsed in the fold)", "value": from_dicts,
         "unit": "ms", "reference": "today's fold of dicts", "ratio": from_dicts / reference,
         "note": "the parse that a fold of events the store did not read pays"},
        {"name": "load events from SQLite + fold, 1,000 nodes (typed)", "value": loads["typed"], "unit": "ms",
         "reference": "today's load + fold of dicts", "ratio": loads["typed"] / loads["reference"],
         "note": f"today's: {loads['reference']:.1f} ms; fastest of 5 taking turns"},
    ]


def _fastest(ways: dict, repeats: int) -> dict[str, float]:
    """Milliseconds per way, the fastest of `repeats` rounds in which the ways take turns."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    for _ in range(repeats):
        for name, fn in ways.items():
            gc.collect()
            gc.disable()
            try:
                started = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - started)
            finally:
                gc.enable()
    return {name: min(t) * 1000 for name, t in times.items()}


def _stored_session(tmp: Path) -> str:
    events = demo_events(n_nodes=1000, seed=2, intervals=False)  # bench_uncertainty measures the new fields
    store = SessionStore(tmp / "fold.db")
    first = events[0].payload
    store.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                         data=first["data"], session_id=events[0].session_id, ts=events[0].ts)
    with store.transaction():
        store.db.conn.executemany(
            "insert into events (session_id, seq, ts, kind, payload) values (?, ?, ?, ?, ?)",
            [(e.session_id, e.seq, e.ts, e.kind, e.to_row()["payload"]) for e in events[1:]],
        )
    store.close()
    return events[0].session_id


CONSUMER = r"""
import sys, time
from engine.session import event_types as et
from engine.session.store import SessionStore
s = SessionStore(sys.argv[1])
w = s.writer("steer")
n = int(sys.argv[2])
print("ready", flush=True)
done = 0
while done < n:
    for cmd in s.pending_commands("steer"):
        typed = et.Paused if cmd["kind"] == "pause" else et.Resumed
        w.emit(typed(by="bench", command_id=cmd["id"]), consumes=cmd)
        done += 1
    time.sleep(0.010)
"""


def _steering(tmp: Path, n: int = 40) -> list[dict]:
    store = SessionStore(tmp / "steer.db")
    store.create_session({"level": "base", "steps": 1, "best": "validation"}, instruction="x",
                         coder={"name": "bench"}, data={}, session_id="steer")
    proc = subprocess.Popen([sys.executable, "-c", CONSUMER, str(store.path), str(n)], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    latencies = []
    try:
        assert proc.stdout.readline().strip() == "ready"
        for i in range(n):
            cid = store.issue_command("steer", "pause" if i % 2 == 0 else "resume", by="bench")
            row = store.wait_command(cid, timeout=10, poll=0.001)
            assert row is not None, "command not consumed"
            latencies.append((row["consumed_at"] - row["issued_at"]) * 1000)
            time.sleep(0.003 * (i % 5))  # spread issue times over the consumer's poll period
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    store.close()
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
    return [
        {"name": "steering command latency across processes (median)", "value": statistics.median(latencies),
         "unit": "ms", "note": f"issue -> consumed by a reader polling at 10 ms; n={n}"},
        {"name": "steering command latency across processes (p95)", "value": p95, "unit": "ms"},
    ]


def run() -> list[dict]:
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        return _ingest(tmp) + _fold(tmp) + _steering(tmp)


if __name__ == "__main__":
    for row in run():
        print(row)
