"""Trust markers on screen: UNSANDBOXED (agent code ran without the sandbox) in the console
header, on the scoreboard's title and in the sessions list; and RUNNER STOPPED (a session whose
process was killed with SIGKILL) instead of a ticking clock, with `u` to resume it."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from tests.demo_session import DEMO_CODER
from engine.task import instruction_text

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.sessions import SessionsScreen
from befair_tui.widgets.scoreboard import Scoreboard

from .conftest import screen_text, wait_for
from tests.settle import reads_done


def _record(store, sid: str, sandbox: str) -> str:
    """A session recorded with config sandbox `sandbox` (bwrap | none), as a runner starts one."""
    config = SessionConfig(level="fairness-metric", steps=3, sandbox=sandbox, best="validation").to_dict()
    store.create_session(config, instruction=instruction_text("fairness-metric"), coder=dict(DEMO_CODER),
                         data={"kind": "synth", "path": "synthderm/seed-0"}, session_id=sid)
    return sid


def _status(app) -> str:
    return str(app.screen.query_one("#status").render())


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _set(store, sid: str, **values) -> None:
    sets = ", ".join(f"{k} = ?" for k in values)
    store.db.conn.execute(f"update sessions set {sets} where id = ?", [*values.values(), sid])


def _palette_titles(app) -> list[str]:
    return [str(command.title) for command in app.get_system_commands(app.screen)]


@pytest.mark.parametrize("width", [130, 80])
async def test_unsandboxed_session_is_marked_in_header_and_scoreboard(db, store, width):
    _record(store, "open-air", "none")
    _record(store, "boxed", "bwrap")
    for sid, marked in (("open-air", True), ("boxed", False)):
        app = create_app(db, start="console", session_id=sid, poll_interval=0.02)
        async with app.run_test(size=(width, 30)) as pilot:
            console = app.screen
            assert isinstance(console, ConsoleScreen)
            await wait_for(pilot, lambda c=console: c.state.status == "running", what="session folded")
            await pilot.pause(0.1)
            assert ("UNSANDBOXED" in _status(app)) is marked, _status(app)
            title = str(console.query_one(Scoreboard).border_title)
            assert ("UNSANDBOXED" in title) is marked, title
            text = screen_text(app)
            assert ("UNSANDBOXED" in text) is marked  # drawn, not just stored: even at 80 columns
            assert "RUNNER STOPPED" not in text  # this test process recorded it and still lives


async def test_unsandboxed_and_dead_runners_in_the_sessions_list(db, store):
    _record(store, "open-air", "none")
    _record(store, "boxed", "bwrap")
    _record(store, "crashed", "bwrap")
    _set(store, "crashed", pid=_dead_pid(), heartbeat_at=time.time() - 60)
    app = create_app(db, start="sessions")
    async with app.run_test(size=(140, 20)) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        await reads_done(app, pilot)   # the sessions table, read off the UI thread
        table = screen.query_one("DataTable")
        rows = {str(key.value): [str(c) for c in table.get_row(key)] for key in table.rows}
        assert any("UNSANDBOXED" in c for c in rows["open-air"])
        assert not any("UNSANDBOXED" in c for c in rows["boxed"])
        assert any("runner stopped" in c for c in rows["crashed"])
        assert not any("runner stopped" in c for c in rows["open-air"])
        assert "UNSANDBOXED" in screen_text(app)
        await pilot.press("slash", *"unsandboxed", "enter")  # the marker is filterable
        await pilot.pause()
        assert table.row_count == 1


async def test_stale_heartbeat_and_dead_pid_read_runner_stopped_without_a_ticking_clock(db, store):
    sid = _record(store, "crashed", "none")
    _set(store, sid, pid=_dead_pid(), heartbeat_at=time.time() - 30)
    now = [time.time()]
    app = create_app(db, start="console", session_id=sid, poll_interval=0.02, clock=lambda: now[0])
    async with app.run_test(size=(130, 30)) as pilot:
        console = app.screen
        await wait_for(pilot, lambda: "RUNNER STOPPED" in _status(app), timeout=5, what="runner stopped")
        first = _status(app)
        now[0] += 125  # two minutes later the clock has not moved
        await pilot.pause(1.2)
        assert _status(app) == first
        assert "u: resume" in first and "UNSANDBOXED" in first
        assert "Resume run" in _palette_titles(app)
        assert console.check_action("resume_runner", ()) is True
        assert console.check_action("pause", ()) is False  # not offered: nothing would carry it out
        assert "press u to resume it" in console.why_not("pause")  # the key says why instead


def _cli_ready() -> bool:
    try:
        from befair_tui.cli import build_parser

        build_parser()
    except Exception:  # noqa: BLE001
        return False
    return True


def _sandbox_flag() -> list[str]:
    """`--sandbox none` once `befair run` accepts it (a sandbox may be unavailable here)."""
    from befair_tui.cli import build_parser

    parser = build_parser()
    run = parser._subparsers._group_actions[0].choices["run"]  # noqa: SLF001
    return ["--sandbox", "none"] if "--sandbox" in run._option_string_actions else []  # noqa: SLF001


@pytest.mark.skipif(not _cli_ready(), reason="`befair run` is not available")
async def test_sigkilled_runner_reads_stopped_within_5s_and_resumes(db, store, tmp_path):
    """A real `befair run --headless` started detached as the console does, killed with SIGKILL."""
    from befair_tui import launch

    sid = "killme"
    argv = [sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--quiet", "--steps", "30",
            "--db", str(db), "--session-id", sid, "--synth-n-train", "240", "--synth-n-test", "80",
            "--synth-size", "24", "--step-timeout", "120", *_sandbox_flag()]
    proc = launch.spawn(argv, db, sid)
    procs = [proc]
    app = create_app(db, start="console", session_id=sid, proc=proc, poll_interval=0.1)
    try:
        async with app.run_test(size=(130, 34)) as pilot:
            console = app.screen
            assert isinstance(console, ConsoleScreen)

            def beating() -> bool:
                try:
                    return store.session(sid).get("heartbeat_at") is not None
                except Exception:  # noqa: BLE001 - not created yet
                    return False

            await wait_for(pilot, lambda: beating() or proc.poll() is not None, timeout=240, what="runner")
            assert proc.poll() is None, launch.log_tail(db, sid, 20)
            await wait_for(pilot, lambda: "RUNNING" in _status(app), timeout=30, what="RUNNING")
            if "--sandbox" in argv:  # a real session run with --sandbox none says so
                assert "UNSANDBOXED" in _status(app)
            assert "Resume run" not in _palette_titles(app)

            os.kill(proc.pid, signal.SIGKILL)
            killed = time.monotonic()
            await wait_for(pilot, lambda: "RUNNER STOPPED" in _status(app), timeout=5, what="RUNNER STOPPED")
            assert time.monotonic() - killed < 5
            assert console.runner == "stopped"
            assert "Resume run" in _palette_titles(app)

            seq = store.last_seq(sid)
            await pilot.press("u")  # resume: a detached `befair resume SID --headless`
            await wait_for(pilot, lambda: app.procs.get(sid) not in (None, proc), timeout=10, what="resume spawned")
            procs.append(app.procs[sid])
            await wait_for(pilot, lambda: ev.SESSION_RESUMED in [e.kind for e in store.events(sid, seq)],
                           timeout=120, what="session_resumed")
            await wait_for(pilot, lambda: isinstance(app.screen, ConsoleScreen) and app.screen.runner == "alive"
                           and "RUNNING" in _status(app), timeout=60, what="alive again")
            assert "RUNNER STOPPED" not in _status(app)

            store.issue_command(sid, "stop", {"interrupt": True}, by="test")
            await wait_for(pilot, lambda: store.session(sid)["status"] in ("stopped", "finished", "failed"),
                           timeout=120, what="stopped")
    finally:
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except OSError:
                    pass
            p.wait(timeout=30)
