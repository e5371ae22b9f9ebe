"""The session store: schema, WAL, cross-process reads, durability, commands, fold == nodes table."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.errors import BefairError
from engine.session import events as ev
from tests.demo_session import all_event_kinds_session, write_demo_session
from engine.session.schema import MIGRATIONS, migrate
from engine.session.state import fold
from engine.session.store import SessionNotFound, SessionStore, node_row, session_summary
from engine.session.event_types import parse

ROOT = Path(__file__).resolve().parents[2]
CONFIG = {"level": "base", "steps": 5, "best": "validation"}
CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}


@pytest.fixture
def store(tmp_path) -> SessionStore:
    s = SessionStore(tmp_path / "s.db")
    yield s
    s.close()


def _new(store, sid=None, ts=None):
    return store.create_session(dict(CONFIG), instruction="x", coder=dict(CODER), data={"kind": "synth"},
                                session_id=sid, ts=ts)


def _node(w, nid, parent=None, stage="draft"):
    return w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": parent, "step": nid, "stage": stage,
                                    "plan": f"plan {nid}", "guidance_ids": [], "components": None,
                                    "origin": "agent"}))


def _python(code: str, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT,
                          timeout=60, **kw)


# -- schema -------------------------------------------------------------------------------------
def test_migrations_are_versioned_and_idempotent(tmp_path):
    path = tmp_path / "m.db"
    s = SessionStore(path)
    names = [r["name"] for r in s.db["migrations"].rows]
    assert names == [name for name, _ in MIGRATIONS]
    assert migrate(s.db) == []  # nothing pending
    s.close()
    s2 = SessionStore(path)  # reopening applies nothing again
    assert [r["name"] for r in s2.db["migrations"].rows] == names
    assert {"sessions", "events", "nodes", "commands", "baselines", "reference_rows"} <= set(s2.db.table_names())


def test_wal_and_foreign_keys_are_on(store):
    assert store.db.execute("pragma journal_mode").fetchone()[0] == "wal"
    assert store.db.execute("pragma foreign_keys").fetchone()[0] == 1
    with pytest.raises(sqlite3.IntegrityError):
        store.db.execute("insert into events (session_id, seq, ts, kind, payload) values ('nope', 1, 0, 'error', '{}')")


def test_unique_session_seq(store):
    w = _new(store, "a")
    row = store.events("a")[0].to_row()
    with pytest.raises(sqlite3.IntegrityError):
        store.db.execute("insert into events (session_id, seq, ts, kind, payload) values (?, ?, ?, ?, ?)",
                         [row["session_id"], row["seq"], row["ts"], row["kind"], row["payload"]])
    stale = store.writer("a")  # a second writer with the same view: its next seq collides
    _node(w, 1)
    with pytest.raises(sqlite3.IntegrityError):
        _node(stale, 2)
    assert [e.seq for e in store.events("a")] == [1, 2]


def test_create_session_row_and_started_event(store):
    w = _new(store, "s1", ts=123.5)
    row = store.session("s1")
    assert row["created_at"] == 123.5 and row["status"] == "running" and row["simulated"] == 1
    (e,) = store.events("s1")
    assert e.kind == ev.SESSION_STARTED and e.ts == 123.5 and e.payload["coder"] == CODER
    assert w.state.budget == 5


def test_unknown_event_kind_is_rejected(store):
    w = _new(store, "s")
    with pytest.raises(ValueError):
        w.emit(parse("no_such_kind", {}))
    assert store.last_seq("s") == 1


# -- fold == nodes table -----------------------------------------------------------------------
def _assert_nodes_table_is_fold(store, sid):
    state = fold(store.events(sid), sid)
    expected = [node_row(sid, state.nodes[n]) for n in sorted(state.nodes)]
    assert store.nodes(sid) == expected
    assert store.state(sid) == state
    row = store.session(sid)
    summary = session_summary(state)
    summary.pop("updated_at")  # not touched by output / policy_decision / error events
    assert {k: row[k] for k in summary} == summary


def test_fold_reproduces_nodes_table_for_every_event_kind(store):
    sid = all_event_kinds_session(store)
    kinds = {e.kind for e in store.events(sid)}
    assert kinds == set(ev.KINDS)
    _assert_nodes_table_is_fold(store, sid)
    row = store.session(sid)
    state = store.state(sid)
    assert row["status"] == state.status == "finished"
    assert row["n_nodes"] == len(state.nodes) and row["tokens_in"] == state.tokens_in


def test_fold_reproduces_nodes_table_for_demo_sessions(store):
    for seed, finished in ((0, True), (3, False)):
        sid = write_demo_session(store, n_nodes=14, seed=seed, finished=finished)
        _assert_nodes_table_is_fold(store, sid)


def test_demo_session_is_deterministic(tmp_path):
    dumps = []
    for name in ("a.db", "b.db"):
        s = SessionStore(tmp_path / name)
        sid = write_demo_session(s)
        dumps.append(([e.to_row() for e in s.events(sid)], s.nodes(sid)))
        s.close()
    assert dumps[0] == dumps[1]
    events, nodes = dumps[0]
    stages = {n["stage"] for n in nodes}
    statuses = {n["status"] for n in nodes}
    assert {"draft", "improve", "debug"} <= stages and {"ok", "buggy", "timeout"} <= statuses


# -- cross-process access -----------------------------------------------------------------------
READER = r"""
import sys
from engine.session.store import SessionStore
s = SessionStore(sys.argv[1])
for line in sys.stdin:
    if line.strip() == "q":
        break
    n = s.db.execute("select count(*) from events where session_id = ?", [sys.argv[2]]).fetchone()[0]
    print(n, flush=True)
"""


def test_reader_in_another_process_reads_while_writer_appends(store):
    w = _new(store, "rw")
    proc = subprocess.Popen([sys.executable, "-c", READER, str(store.path), "rw"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        def ask() -> int:
            proc.stdin.write("?\n")
            proc.stdin.flush()
            return int(proc.stdout.readline())

        assert ask() == 1
        store.db.execute("BEGIN IMMEDIATE")  # a writer mid-transaction (holds the write lock)
        store.db.conn.execute("insert into events (session_id, seq, ts, kind, payload) "
                              "values ('rw', 2, 0, 'error', '{}')")
        t = time.perf_counter()
        assert ask() == 1  # not blocked, sees the last committed state
        assert time.perf_counter() - t < 5
        store.db.execute("COMMIT")
        assert ask() == 2
        for i in range(3, 23):
            w.state.last_seq = store.last_seq("rw")
            w.emit(parse(ev.ERROR, {"message": f"e{i}", "node_id": None, "where": None}))
            assert ask() == i
    finally:
        proc.stdin.write("q\n")
        proc.stdin.close()
        proc.wait(timeout=30)


WRITER = r"""
import sys, time
from engine.session import event_types as et
from engine.session.store import SessionStore
s = SessionStore(sys.argv[1])
w = s.create_session({"level": "base", "steps": 3, "best": "validation"}, instruction="x",
                     coder={"name": "offline"}, data={}, session_id="crash")
for i in range(1, int(sys.argv[2]) + 1):
    w.emit(et.NodeCreated(node_id=i, parent_id=None, step=i, stage="draft", plan="p", guidance_ids=[],
                          components=None, origin="agent"))
    w.emit(et.ExecStarted(node_id=i, workdir="w"))
print("ready", flush=True)
time.sleep(60)
"""


def test_kill_9_keeps_every_committed_event_and_db_opens_cleanly(tmp_path):
    path = tmp_path / "crash.db"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path), "30"], stdout=subprocess.PIPE,
                            text=True, cwd=ROOT)
    try:
        assert proc.stdout.readline().strip() == "ready"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
    parent = SessionStore(path)  # this process adds a finished session next to the crashed one
    demo = write_demo_session(parent, n_nodes=6)
    parent.close()
    # a fresh process opens the database cleanly and finds everything committed
    out = _python(
        "import sys, json\n"
        "from engine.session.store import SessionStore, node_row\n"
        "s = SessionStore(sys.argv[1])\n"
        "st = s.state('crash')\n"
        "demo = s.state(sys.argv[2])\n"
        "print(json.dumps({'check': s.db.execute('pragma integrity_check').fetchone()[0],\n"
        "  'n': len(s.events('crash')), 'running': sorted(n for n, x in st.nodes.items() if x.status == 'running'),\n"
        "  'same': s.nodes('crash') == [node_row('crash', st.nodes[k]) for k in sorted(st.nodes)],\n"
        "  'demo': [demo.status, len(s.nodes(sys.argv[2]))]}))\n",
        str(path), demo,
    )
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result == {"check": "ok", "n": 61, "running": list(range(1, 31)), "same": True, "demo": ["finished", 6]}


# -- commands ---------------------------------------------------------------------------------
def test_commands_queue_and_consume_in_the_same_transaction(store):
    w = _new(store, "c")
    _node(w, 1)
    c1 = store.issue_command("c", "pause", by="alice")
    c2 = store.issue_command("c", "guide", {"text": "reweight", "scope": "global", "node_id": None})
    pending = store.pending_commands("c")
    assert [p["id"] for p in pending] == [c1, c2]
    assert pending[0]["issued_by"] == "alice" and pending[1]["payload"]["text"] == "reweight"
    e = w.emit(parse(ev.PAUSED, {"by": "alice", "command_id": c1, "reason": None}), consumes=pending[0])
    row = store.command(c1)
    assert row["consumed_seq"] == e.seq and row["result"] == "applied" and row["consumed_at"] >= row["issued_at"]
    assert [p["id"] for p in store.pending_commands("c")] == [c2]
    # an event that fails to append leaves its command pending (same transaction)
    w.state.last_seq -= 1  # force a seq collision
    with pytest.raises(sqlite3.IntegrityError):
        w.emit(parse(ev.GUIDANCE, {"guidance_id": 1, "text": "reweight", "scope": "global", "node_id": None,
                             "by": "cli", "command_id": c2}), consumes=pending[1])
    assert [p["id"] for p in store.pending_commands("c")] == [c2]
    w = store.writer("c")
    w.consume_command(pending[1], "rejected: test")
    assert store.pending_commands("c") == []
    assert store.command(c2)["result"] == "rejected: test" and store.command(c2)["consumed_seq"] is None
    assert [c["id"] for c in store.commands("c")] == [c1, c2]


def test_issue_command_errors(store):
    _new(store, "c")
    with pytest.raises(BefairError, match="unknown command"):
        store.issue_command("c", "explode")
    with pytest.raises(SessionNotFound):
        store.issue_command("nope", "pause")
    with pytest.raises(BefairError):
        store.command(999)


def test_wait_command(store):
    w = _new(store, "c")
    cid = store.issue_command("c", "resume")
    assert store.wait_command(cid, timeout=0.05) is None
    w.emit(parse(ev.RESUMED, {"by": "u", "command_id": cid}), consumes=store.command(cid))
    assert store.wait_command(cid, timeout=1)["consumed_seq"] == 2


# -- sessions ----------------------------------------------------------------------------------
def test_delete_session(store):
    for sid in ("keep", "drop"):
        w = _new(store, sid)
        _node(w, 1)
        store.issue_command(sid, "pause")
    store.delete_session("drop")
    for table in ("events", "nodes", "commands"):
        assert store.db.execute(f"select count(*) from {table} where session_id='drop'").fetchone()[0] == 0
        assert store.db.execute(f"select count(*) from {table} where session_id='keep'").fetchone()[0] > 0
    with pytest.raises(SessionNotFound):
        store.session("drop")
    with pytest.raises(SessionNotFound):
        store.delete_session("drop")


def test_resolve(store):
    _new(store, "20250101-100000-aaaa", ts=1.0)
    _new(store, "20250101-100000-aabb", ts=2.0)
    _new(store, "20250102-090000-cccc", ts=3.0)
    _new(store, "x_1", ts=0.5)
    assert store.resolve("20250101-100000-aaaa") == "20250101-100000-aaaa"
    assert store.resolve("20250102") == "20250102-090000-cccc"
    assert store.resolve("20250101-100000-aab") == "20250101-100000-aabb"
    assert store.resolve("last") == "20250102-090000-cccc"
    with pytest.raises(BefairError, match="several"):
        store.resolve("20250101-100000-aa")
    with pytest.raises(SessionNotFound):
        store.resolve("2026")
    with pytest.raises(SessionNotFound):
        store.resolve("x%")  # LIKE wildcards are literal
    assert store.resolve("x_") == "x_1"
    with pytest.raises(SessionNotFound):
        store.resolve("")


def test_resolve_last_on_empty_db(store):
    with pytest.raises(SessionNotFound):
        store.resolve("last")


def test_sessions_listing_and_summary(store):
    sid = write_demo_session(store, n_nodes=8)
    row = store.sessions()[0]
    state = store.state(sid)
    assert row["id"] == sid and row["steps"] == state.agent_steps == 8
    assert row["best_node"] is not None and row["best_auc"] == state.nodes[row["best_node"]].val_auc


def test_baselines_and_reference_rows(store):
    bid = store.add_baseline({"variant": "medfair", "seed": 0, "test_auc": 0.64, "val_metrics": {"auc": 0.7}})
    assert store.baselines()[0]["id"] == bid
    assert json.loads(store.baselines()[0]["val_metrics"]) == {"auc": 0.7}
    store.upsert_reference_rows([{"id": "medfair", "name": "MEDFAIR", "auc_mean": 0.641}])
    store.upsert_reference_rows([{"id": "medfair", "name": "MEDFAIR", "auc_mean": 0.642}])
    assert [r["auc_mean"] for r in store.reference_rows()] == [0.642]


def test_threads_get_their_own_connection(store):
    import threading

    _new(store, "t")
    seen = []
    th = threading.Thread(target=lambda: seen.append((id(store.db), store.last_seq("t"))))
    th.start()
    th.join()
    assert seen[0][1] == 1 and seen[0][0] != id(store.db)


def test_deleting_a_session_removes_its_kept_predictions(store):
    """Predictions refer to their files' list (prediction_files): the delete goes in key order."""
    sid = write_demo_session(store, n_nodes=3)
    assert store.predictions(sid, 1, "validation")
    assert store.db.execute("select count(*) from prediction_files").fetchone()[0] == 2   # one list per split
    kept = store.predictions(sid, 1, "test")
    assert len(kept) == 656 and all(0.0 <= p <= 1.0 for p in kept.values())
    store.delete_session(sid)
    for table in ("predictions", "prediction_files", "events"):
        assert store.db.execute(f"select count(*) from {table}").fetchone()[0] == 0
