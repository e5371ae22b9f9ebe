"""Session store benchmarks: event ingest, reducer fold, cross-process steering latency.

- ingest: events appended through SessionWriter.batch (64 events per transaction, the node rows
  and session summary written once per batch), against emit with one durable transaction per
  event, both against the floor of raw sqlite3 `executemany` of the same rows in one transaction.
- fold: the reducer over a recorded 1,000-node session (in memory), and load + fold from SQLite.
- steering: a command issued in this process, seen and consumed by another process polling the
  commands table every 10 ms (what a headless `befair run` does between steps).
"""
from __future__ import annotations

import os
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.session.event_types import parse
from tests.demo_session import demo_events
from engine.session.state import fold
from engine.session.store import SessionStore

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
                writer.emit(e.kind, e.payload, ts=e.ts)
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
    events = demo_events(n_nodes=1000, seed=2, intervals=False)  # bench_uncertainty measures the new fields
    times, typed = [], []
    for _ in range(5):
        started = time.perf_counter()
        state = fold(events)
        times.append(time.perf_counter() - started)
        started = time.perf_counter()
        parsed = [parse(e.kind, e.payload) for e in events]  # what a reducer reading typed events adds
        fold(events)
        typed.append(time.perf_counter() - started)
    assert len(state.nodes) == 1000 and len(parsed) == len(events)
    store = SessionStore(tmp / "fold.db")
    first = events[0].payload
    store.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                         data=first["data"], session_id=events[0].session_id, ts=events[0].ts)
    with store.transaction():
        store.db.conn.executemany(
            "insert into events (session_id, seq, ts, kind, payload) values (?, ?, ?, ?, ?)",
            [(e.session_id, e.seq, e.ts, e.kind, e.to_row()["payload"]) for e in events[1:]],
        )
    load = []
    for _ in range(3):
        started = time.perf_counter()
        store.state(events[0].session_id)
        load.append(time.perf_counter() - started)
    store.close()
    return [
        {"name": "reducer fold, 1,000-node session", "value": statistics.median(times) * 1000, "unit": "ms",
         "note": f"{len(events):,} events, median of 5"},
        {"name": "typed events parsed + reducer fold, 1,000-node session", "value": statistics.median(typed) * 1000,
         "unit": "ms", "note": f"{statistics.median(typed) / statistics.median(times):.2f}x the fold of dicts "
                               "(same run): the cost of a reducer reading typed events"},
        {"name": "load events from SQLite + fold, 1,000 nodes", "value": statistics.median(load) * 1000,
         "unit": "ms", "note": "median of 3"},
    ]


CONSUMER = r"""
import sys, time
from engine.session.store import SessionStore
s = SessionStore(sys.argv[1])
w = s.writer("steer")
n = int(sys.argv[2])
print("ready", flush=True)
done = 0
while done < n:
    for cmd in s.pending_commands("steer"):
        w.emit("paused" if cmd["kind"] == "pause" else "resumed", {"by": "bench", "command_id": cmd["id"]},
               consumes=cmd)
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
