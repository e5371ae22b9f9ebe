"""Session store benchmarks: event ingest, reducer fold, cross-process steering latency.

- ingest: events appended one by one through SessionWriter.emit (one durable transaction per
  event, with the node-row and session-summary upserts), against the floor of raw sqlite3
  `executemany` of the same event rows in one transaction, as a ratio.
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

from engine.session.fixtures import demo_events
from engine.session.state import fold
from engine.session.store import SessionStore

ROOT = Path(__file__).resolve().parents[2]


def _ingest(tmp: Path) -> list[dict]:
    events = demo_events(n_nodes=60, seed=1)  # ~900 events, the realistic mix
    store = SessionStore(tmp / "ingest.db")
    first = events[0].payload
    writer = store.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                                  data=first["data"], session_id="ingest", ts=events[0].ts)
    body = events[1:]
    started = time.perf_counter()
    for e in body:
        writer.emit(e.kind, e.payload, ts=e.ts)
    emit_s = time.perf_counter() - started
    store.close()

    raw_path = tmp / "raw.db"
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
    raw_s = time.perf_counter() - started
    conn.close()
    rate, raw_rate = len(body) / emit_s, len(body) / raw_s
    return [
        {"name": "event ingest via SessionWriter.emit (1 txn/event)", "value": rate, "unit": "events/s",
         "reference": "raw executemany, 1 txn", "ratio": rate / raw_rate,
         "note": f"{len(body)} events; raw floor {raw_rate:,.0f} events/s"},
        {"name": "emit latency per event", "value": emit_s / len(body) * 1000, "unit": "ms"},
    ]


def _fold(tmp: Path) -> list[dict]:
    events = demo_events(n_nodes=1000, seed=2)
    times = []
    for _ in range(5):
        started = time.perf_counter()
        state = fold(events)
        times.append(time.perf_counter() - started)
    assert len(state.nodes) == 1000
    store = SessionStore(tmp / "fold.db")
    first = events[0].payload
    store.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                         data=first["data"], session_id=events[0].session_id, ts=events[0].ts)
    with store._write():
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
