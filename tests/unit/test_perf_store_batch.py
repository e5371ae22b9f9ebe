"""Batched event ingest: one transaction per batch, the nodes table still equal to fold(events),
nothing of a failed batch written or kept in memory, and a kill -9 mid-batch losing the whole batch."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.session import events as ev
from tests.demo_session import demo_events
from engine.session.state import fold
from engine.session.store import SessionStore, node_row, session_summary
from engine.session.event_types import parse

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(tmp_path) -> SessionStore:
    s = SessionStore(tmp_path / "s.db")
    yield s
    s.close()


def _start(store: SessionStore, events: list[ev.Event], sid: str):
    first = events[0].payload
    return store.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                                data=first["data"], session_id=sid, ts=events[0].ts)


def _assert_rows_are_fold(store: SessionStore, sid: str) -> None:
    state = fold(store.events(sid), sid)
    assert store.nodes(sid) == [node_row(sid, state.nodes[n]) for n in sorted(state.nodes)]
    summary = session_summary(state)
    summary.pop("updated_at")  # not touched by output / policy_decision / error events
    row = store.session(sid)
    assert {k: row[k] for k in summary} == summary


def test_batched_ingest_writes_the_same_rows_as_one_event_per_transaction(store):
    events = demo_events(n_nodes=25, seed=4)
    one, batched = _start(store, events, "one"), _start(store, events, "batched")
    for e in events[1:]:
        one.emit(parse(e.kind, e.payload), ts=e.ts)
    body = events[1:]
    for i in range(0, len(body), 37):  # batches that cut nodes in the middle
        with batched.batch():
            for e in body[i:i + 37]:
                batched.emit(parse(e.kind, e.payload), ts=e.ts)
    assert [(e.seq, e.kind, e.payload) for e in store.events("one")] == \
        [(e.seq, e.kind, e.payload) for e in store.events("batched")]
    _assert_rows_are_fold(store, "batched")
    assert store.nodes("batched") == [{**r, "session_id": "batched"} for r in store.nodes("one")]
    assert batched.state == store.state("batched")


def test_emit_many_is_one_transaction_and_nested_batches_join_it(store):
    events = demo_events(n_nodes=3, seed=1)
    w = _start(store, events, "s")
    before = store.db.conn.total_changes
    with w.batch():
        w.emit_many([parse(e.kind, e.payload) for e in events[1:5]])
        reader = sqlite3.connect(store.path)
        assert reader.execute("select count(*) from events where session_id = 's'").fetchone()[0] == 1
        w.emit(parse(events[5].kind, events[5].payload))
    assert reader.execute("select count(*) from events where session_id = 's'").fetchone()[0] == 6
    reader.close()
    assert store.db.conn.total_changes > before
    _assert_rows_are_fold(store, "s")


def test_a_failed_batch_writes_nothing_and_the_writer_forgets_it(store):
    events = demo_events(n_nodes=3, seed=1)
    w = _start(store, events, "s")
    cid = store.issue_command("s", "pause", by="t")
    with pytest.raises(RuntimeError):
        with w.batch():
            w.emit(parse(events[1].kind, events[1].payload))
            w.emit(parse(ev.PAUSED, {"by": "t", "command_id": cid, "reason": None}), consumes={"id": cid})
            raise RuntimeError("the runner died mid-batch")
    assert [e.kind for e in store.events("s")] == [ev.SESSION_STARTED]
    assert w.state == store.state("s") and w.state.last_seq == 1
    assert [c["id"] for c in store.pending_commands("s")] == [cid]
    w.emit(parse(events[1].kind, events[1].payload))  # the writer goes on from the committed log
    assert store.last_seq("s") == 2
    _assert_rows_are_fold(store, "s")


KILLED_MID_BATCH = r"""
import sys, time
from tests.demo_session import demo_events
from engine.session.event_types import parse
from engine.session.store import SessionStore
s = SessionStore(sys.argv[1])
events = demo_events(n_nodes=4, seed=2)
first = events[0].payload
w = s.create_session(first["config"], instruction=first["instruction"], coder=first["coder"],
                     data=first["data"], session_id="k", ts=events[0].ts)
w.emit_many([parse(e.kind, e.payload) for e in events[1:11]])
with w.batch():
    for e in events[11:21]:
        w.emit(parse(e.kind, e.payload))
    print("ready", flush=True)
    time.sleep(60)
"""


def test_kill_9_mid_batch_keeps_committed_batches_and_loses_the_open_one(tmp_path):
    path = tmp_path / "k.db"
    proc = subprocess.Popen([sys.executable, "-c", KILLED_MID_BATCH, str(path)], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    store = SessionStore(path)
    assert store.db.execute("pragma integrity_check").fetchone()[0] == "ok"
    assert store.last_seq("k") == 11
    _assert_rows_are_fold(store, "k")
    w = store.writer("k")  # a resumed writer appends after the last committed batch
    w.emit(parse(ev.ERROR, {"message": "resumed", "node_id": None, "where": "test"}))
    assert store.last_seq("k") == 12
    assert json.loads(json.dumps(store.events("k")[-1].payload))["message"] == "resumed"
    store.close()
