"""engine.session.heartbeat: the runner's heartbeat and runner_status (alive / stopped / finished)."""
from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from engine.session.heartbeat import Heartbeat, pid_alive, runner_status
from engine.session.schema import MIGRATIONS
from engine.session.store import SessionNotFound, SessionStore


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "befair.db")
    yield s
    s.close()


def _session(store: SessionStore, sid: str = "s1") -> str:
    store.create_session({"level": "base", "steps": 3}, instruction="x", coder={"name": "offline"},
                         data={}, session_id=sid)
    return sid


def _set(store: SessionStore, sid: str, **values) -> None:
    sets = ", ".join(f"{k} = ?" for k in values)
    store.db.conn.execute(f"update sessions set {sets} where id = ?", [*values.values(), sid])


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_migration_adds_heartbeat_column_after_the_first(store):
    names = [name for name, _ in MIGRATIONS]
    assert names[:2] == ["001_initial", "002_heartbeat"]
    assert "heartbeat_at" in store.db["sessions"].columns_dict
    assert {r["name"] for r in store.db["migrations"].rows} >= {"001_initial", "002_heartbeat"}


def test_migration_upgrades_a_database_from_before_the_heartbeat(tmp_path):
    from engine.session import schema

    path = tmp_path / "old.db"
    db = __import__("sqlite_utils").Database(sqlite3.connect(path, isolation_level=None))
    old = schema.MIGRATIONS
    try:
        schema.MIGRATIONS = old[:1]
        schema.migrate(db)
    finally:
        schema.MIGRATIONS = old
    db.conn.execute("insert into sessions (id, created_at, status, pid) values ('old', 1.0, 'running', ?)",
                    [_dead_pid()])
    db.conn.close()
    store = SessionStore(path)  # migrates to 002
    try:
        row = store.session("old")
        assert row["heartbeat_at"] is None
        assert runner_status(row, "old") == "stopped"  # no heartbeat: the (dead) pid decides
    finally:
        store.close()


def test_heartbeat_writes_every_interval_on_its_own_connection_and_stops(store):
    sid = _session(store)
    with Heartbeat(store.path, sid, interval=0.05) as hb:
        first = store.session(sid)["heartbeat_at"]
        assert first is not None and abs(first - time.time()) < 2  # the first beat lands on start
        time.sleep(0.3)
        later = store.session(sid)["heartbeat_at"]
        assert later > first
        assert hb.running and hb.beats >= 3 and hb.failures == 0
    assert not hb.running
    stopped_at = store.session(sid)["heartbeat_at"]
    time.sleep(0.2)
    assert store.session(sid)["heartbeat_at"] == stopped_at
    assert not [t for t in threading.enumerate() if t.name.startswith("heartbeat-")]


def test_heartbeat_never_raises_and_recovers(tmp_path):
    # no such table yet: every beat fails quietly, then succeeds once the table exists
    path = tmp_path / "later.db"
    with Heartbeat(path, "s1", interval=0.05) as hb:
        time.sleep(0.15)
        assert hb.failures >= 1 and hb.last_error and hb.running
        store = SessionStore(path)
        _session(store)
        deadline = time.time() + 3
        while store.session("s1")["heartbeat_at"] is None and time.time() < deadline:
            time.sleep(0.05)
        assert store.session("s1")["heartbeat_at"] is not None
        assert hb.last_error is None
        store.close()


def test_heartbeat_waits_for_a_busy_database(store):
    sid = _session(store)
    with Heartbeat(store.path, sid, interval=0.05) as hb:
        other = sqlite3.connect(store.path, isolation_level=None, timeout=5)
        other.execute("BEGIN IMMEDIATE")  # a writer holds the lock for a while
        time.sleep(0.3)
        other.execute("COMMIT")
        other.close()
        time.sleep(0.2)
        assert hb.running
        assert time.time() - store.session(sid)["heartbeat_at"] < 1.0


def test_status_finished_for_ended_sessions(store):
    sid = _session(store)
    for status in ("finished", "stopped", "failed"):
        _set(store, sid, status=status, heartbeat_at=None, pid=_dead_pid())
        assert runner_status(store, sid) == "finished"


def test_status_from_heartbeat_age(store):
    sid = _session(store)
    now = 1_000_000.0
    _set(store, sid, heartbeat_at=now - 1.0, pid=_dead_pid(), updated_at=now - 1.0)
    assert runner_status(store, sid, now=now) == "alive"  # a fresh beat wins (another machine)
    assert runner_status(store, sid, now=now + 10) == "stopped"
    _set(store, sid, status="paused")
    assert runner_status(store, sid, now=now) == "alive"
    assert runner_status(store, sid, now=now + 2.5, stale_after=1.0) == "stopped"


def test_status_stale_heartbeat_with_live_pid(store):
    sid = _session(store)  # pid: this process
    now = time.time()
    _set(store, sid, heartbeat_at=now - 30, updated_at=now - 30)
    assert runner_status(store, sid, now=now) == "stopped"  # alive but silent: frozen or a recycled pid
    _set(store, sid, updated_at=now - 5)  # a process took the session over after the last beat
    assert runner_status(store, sid, now=now) == "alive"


def test_status_without_heartbeat_falls_back_to_the_pid(store):
    sid = _session(store)
    _set(store, sid, heartbeat_at=None)
    assert runner_status(store, sid) == "alive"  # the pid is this test process
    _set(store, sid, pid=_dead_pid())
    assert runner_status(store, sid) == "stopped"
    _set(store, sid, pid=None)
    assert runner_status(store, sid) == "stopped"


def test_status_takes_a_row_or_a_store(store):
    sid = _session(store)
    assert runner_status(store.session(sid)) == runner_status(store, sid) == "alive"
    with pytest.raises(SessionNotFound):
        runner_status(store, "nope")


def test_pid_alive_sees_zombies_as_dead():
    assert pid_alive(os.getpid()) is True
    assert pid_alive(None) is None and pid_alive("x") is None
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        assert pid_alive(proc.pid) is True
        os.kill(proc.pid, signal.SIGKILL)
        deadline = time.time() + 5
        while pid_alive(proc.pid) and time.time() < deadline:  # a zombie until waited for
            time.sleep(0.02)
        assert pid_alive(proc.pid) is False
    finally:
        proc.kill()
        proc.wait()


def test_recover_does_not_count_its_own_process():
    """One check for both readers: the status line counts this process alive; recover, asking
    whether another process holds the session, does not."""
    assert pid_alive(os.getpid()) is True and pid_alive(os.getpid(), own_counts=False) is False
    assert pid_alive(os.getppid(), own_counts=False) is True


def test_a_killed_runner_process_reads_stopped_within_seconds(store):
    """A real process holding a Heartbeat, killed with SIGKILL: alive, then stopped."""
    sid = _session(store)
    code = ("import sys, time\n"
            "from engine.session.heartbeat import Heartbeat\n"
            "with Heartbeat(sys.argv[1], sys.argv[2], interval=0.2):\n"
            "    print('beating', flush=True)\n"
            "    time.sleep(120)\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(store.path), sid], stdout=subprocess.PIPE,
                            cwd=os.getcwd(), env={**os.environ, "PYTHONPATH": os.getcwd()})
    try:
        assert proc.stdout.readline().strip() == b"beating"
        _set(store, sid, pid=proc.pid)
        assert runner_status(store, sid) == "alive"
        os.kill(proc.pid, signal.SIGKILL)
        killed = time.time()
        while runner_status(store, sid, stale_after=1.0) != "stopped" and time.time() - killed < 5:
            time.sleep(0.05)
        assert runner_status(store, sid, stale_after=1.0) == "stopped"
        proc.wait()
        # another machine cannot see the pid; the heartbeat's age alone says it too
        row = dict(store.session(sid), pid=None)
        assert runner_status(row, now=time.time() + 3.5) == "stopped"
    finally:
        proc.kill()
        proc.wait()
