"""Headless sessions in a real subprocess (`python -m befair_tui.cli run --headless`):
kill -9 in the middle and resume, and steering from another process with measured latency."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from pathlib import Path

from engine.session import events as ev
from engine.session.state import fold
from engine.session.store import SessionStore, node_row

ROOT = Path(__file__).resolve().parents[2]
FAST = "use logistic regression on 32 px images"


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.pop("BEFAIR_DB", None)
    return env


def _run_argv(db, workspace, sid, steps, *extra):
    return [sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--quiet", "--level", "fairness-methods",
            "--steps", str(steps), "--coder", "offline", "--data", str(workspace.root), "--db", str(db),
            "--session-id", sid, "--guidance", FAST, "--num-drafts", "2", "--seed", "3", "--step-timeout", "120",
            *extra]


def _wait_for(store, sid, pred, timeout=120.0, proc=None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            events = store.events(sid)
        except Exception:
            events = []
        hit = next((e for e in events if pred(e)), None)
        if hit is not None:
            return hit
        if proc is not None and proc.poll() is not None:
            out = proc.stdout.read() if proc.stdout else ""
            raise AssertionError(f"the session process ended early ({proc.returncode}): {out[-3000:]}")
        time.sleep(0.05)
    raise AssertionError("timed out waiting for an event")


def _check_consistent(db: Path, sid: str):
    conn = sqlite3.connect(db)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()
    store = SessionStore(db)
    events = store.events(sid)
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    state = fold(events, sid)
    rows = {r["node_id"]: r for r in store.nodes(sid)}
    assert rows == {nid: node_row(sid, n) for nid, n in state.nodes.items()}
    return store, state


def _alive(pid: int) -> bool:
    try:
        st = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return st not in ("Z", "X")


def test_kill_9_mid_session_then_resume(tmp_path, workspace):
    db, sid = tmp_path / "kill.db", "kill-test"
    proc = subprocess.Popen(_run_argv(db, workspace, sid, 4, "--failure-rate", "0"), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        store = SessionStore(db) if db.exists() else None
        deadline = time.monotonic() + 60
        while store is None and time.monotonic() < deadline:
            time.sleep(0.1)
            store = SessionStore(db) if db.exists() else None
        started = _wait_for(store, sid, lambda e: e.kind == ev.EXEC_STARTED and e.payload["node_id"] == 2, proc=proc)
        from engine.execution.run_dirs import pgid_file as noted_pgid

        pgid_file = noted_pgid(Path(started.payload["workdir"]))
        assert not (Path(started.payload["workdir"]) / ".befair_pgid").exists()  # never inside the node's reach
        deadline = time.monotonic() + 10
        while not pgid_file.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        child = int(pgid_file.read_text())
        before = store.last_seq(sid)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
    store.close()

    store, state = _check_consistent(db, sid)
    assert store.last_seq(sid) >= before            # everything committed before the kill is there
    assert state.nodes[2].status == "running" and state.nodes[1].status in ("ok", "buggy")
    assert state.status == "running"
    time.sleep(0.5)
    assert not _alive(child)                         # the pipeline died with its engine (PDEATHSIG)

    res = subprocess.run([sys.executable, "-m", "befair_tui.cli", "resume", sid, "--db", str(db), "--quiet"],
                         cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stdout + res.stderr
    store, state = _check_consistent(db, sid)
    assert state.status == "finished" and state.agent_steps == 4
    assert state.nodes[2].status == "interrupted"
    assert state.nodes[2].interrupted_reason == "process ended while running"
    resumed = [e for e in store.events(sid) if e.kind == ev.SESSION_RESUMED]
    assert len(resumed) == 1 and resumed[0].payload["interrupted"] == [2]
    for node in state.nodes.values():
        if node.status == "ok":
            assert node.val_auc is not None and node.audit_flags
    kinds = [e.kind for e in store.events(sid)]
    assert kinds[-1] == ev.SESSION_FINISHED and kinds.count(ev.SESSION_STARTED) == 1


def test_steering_from_another_process(tmp_path, workspace):
    db, sid = tmp_path / "steer.db", "steer-test"
    proc = subprocess.Popen(_run_argv(db, workspace, sid, 8, "--failure-rate", "0"), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    latencies = []

    def command(kind, payload=None):
        cid = store.issue_command(sid, kind, payload or {}, by="test")
        row = store.wait_command(cid, timeout=60)
        assert row is not None, f"{kind} not consumed"
        latencies.append((kind, (row["consumed_at"] - row["issued_at"]) * 1000))
        return row

    try:
        deadline = time.monotonic() + 60
        while not db.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        store = SessionStore(db)
        _wait_for(store, sid, lambda e: e.kind == ev.EXEC_STARTED and e.payload["node_id"] == 1, proc=proc)
        paused = command("pause")
        assert paused["result"] == "applied"
        _wait_for(store, sid, lambda e: e.kind == ev.AUDITED and e.payload["node_id"] == 1, proc=proc)
        time.sleep(1.5)
        state = store.state(sid)
        assert state.status == "paused" and set(state.nodes) == {1}   # nothing new while paused
        guide = command("guide", {"text": "reweight the skin-tone groups", "scope": "global"})
        command("resume")
        created = _wait_for(store, sid, lambda e: e.kind == ev.NODE_CREATED and e.payload["node_id"] == 2, proc=proc)
        gid = next(e.payload["guidance_id"] for e in store.events(sid)
                   if e.kind == ev.GUIDANCE and e.payload.get("command_id") == guide["id"])
        assert gid in created.payload["guidance_ids"]
        assert created.payload["components"]["fairness"] == "reweight"
        assert "reweight" in created.payload["plan"]
        _wait_for(store, sid, lambda e: e.kind == ev.EXEC_STARTED and e.payload["node_id"] == 2, proc=proc)
        command("stop", {"interrupt": True})
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    state = store.state(sid)
    assert state.status == "stopped"
    assert state.nodes[2].status in ("interrupted", "ok")
    assert state.agent_steps == 2
    ms = [v for _, v in latencies]
    print("\ncommand latency (ms):", json.dumps({k: round(v, 1) for k, v in latencies}),
          "median", round(statistics.median(ms), 1))
    assert max(ms) < 5000


def test_a_run_request_file_starts_the_session_it_describes(tmp_path, workspace):
    """The console's detached run: `run --headless --request FILE` runs the validated settings and
    opening guidance written by write_run_request, whatever flags the child itself was given."""
    from befair_tui.cli import build_parser
    from befair_tui.cli.run import write_run_request

    db, sid = tmp_path / "befair.db", "req-1"
    args = build_parser().parse_args(_run_argv(db, workspace, sid, 1, "--failure-rate", "0")[3:])
    request = tmp_path / "req-1.request.json"
    config = write_run_request(request, args)
    proc = subprocess.run([sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--quiet", "--steps", "9",
                           "--request", str(request), "--session-id", sid, "--db", str(db)],
                          cwd=ROOT, env=_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    state = SessionStore(db).state(sid)
    assert state.config == config.to_dict() and state.budget == 1  # the request's 1 step, not the flag's 9
    assert [g.text for g in state.guidance.values()] == [FAST]
    _check_consistent(db, sid)


def test_a_request_file_that_is_not_one_is_refused(tmp_path):
    bad = tmp_path / "bad.request.json"
    bad.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--request", str(bad),
                           "--db", str(tmp_path / "b.db")], cwd=ROOT, env=_env(), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 3 and "not a run request" in proc.stderr


def test_sigterm_interrupts_the_node_stops_the_session_and_exits_130(tmp_path, workspace):
    db, sid = tmp_path / "befair.db", "term-1"
    proc = subprocess.Popen(_run_argv(db, workspace, sid, 6, "--failure-rate", "0"), cwd=ROOT, env=_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        store = SessionStore(db) if db.exists() else None
        deadline = time.monotonic() + 120
        while store is None and time.monotonic() < deadline:
            time.sleep(0.05)
            store = SessionStore(db) if db.exists() else None
        assert store is not None, "the run never created its database"
        _wait_for(store, sid, lambda e: e.kind == ev.EXEC_STARTED, proc=proc)
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 130
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    state = SessionStore(db).state(sid)
    assert state.status == "stopped" and state.finish_reason == "interrupted (Ctrl-C or SIGTERM)"
    _check_consistent(db, sid)
