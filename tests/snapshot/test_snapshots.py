"""Snapshots of the main screens from deterministic content (the recorded demo session, fixed
timestamps, a frozen clock, no spinners moving). Update with `make snapshots`."""
from __future__ import annotations

import time

import pytest

from tests.settle import reads_done
from tests.demo_session import write_demo_session
from engine.session.store import SessionStore

from befair_tui.app import create_app, frozen_clock
from engine.session.event_types import parse

TS0 = 1_700_000_000.0
NOW = TS0 + 400.0


@pytest.fixture(autouse=True)
def _deterministic(tmp_path, monkeypatch):
    monkeypatch.setenv("BEFAIR_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_CONFIG", "BEFAIR_LLM_MODEL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _store(tmp_path, *, finished: bool = True, n_nodes: int = 12):
    db = tmp_path / "befair.db"
    store = SessionStore(db)
    sid = write_demo_session(store, n_nodes=n_nodes, ts0=TS0, finished=finished)
    return db, store, sid


async def _settle(pilot, predicate, rounds: int = 200):
    for _ in range(rounds):
        await pilot.pause(0.02)
        if predicate():
            break
    await reads_done(pilot.app, pilot)
    await pilot.pause(0.1)


# The console, the sessions screen, setup and help at the smallest supported terminal (80x24) and
# at 120x40.
def test_setup_at_80x24(snap_compare, tmp_path):
    app = create_app(tmp_path / "befair.db", settings_file=tmp_path / "none.json")
    assert snap_compare(app, terminal_size=(80, 24))


def test_setup_at_120x40(snap_compare, tmp_path):
    app = create_app(tmp_path / "befair.db", settings_file=tmp_path / "none.json")
    assert snap_compare(app, terminal_size=(120, 40))


def test_console_mid_session_at_120x40(snap_compare, tmp_path):
    db, store, sid = _store(tmp_path, finished=False)
    last = store.last_seq(sid)
    app = create_app(db, start="console", session_id=sid, clock=frozen_clock(NOW), poll_interval=0.02)

    async def run_before(pilot):
        await _settle(pilot, lambda: app.screen.state.last_seq == last)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_console_at_80x24(snap_compare, tmp_path):
    db, store, sid = _store(tmp_path, finished=True, n_nodes=8)
    last = store.last_seq(sid)
    app = create_app(db, start="console", session_id=sid, clock=frozen_clock(NOW), poll_interval=0.02)

    async def run_before(pilot):
        await _settle(pilot, lambda: app.screen.state.last_seq == last)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def _sessions_app(tmp_path):
    db, store, _ = _store(tmp_path)
    write_demo_session(store, n_nodes=5, seed=3, ts0=TS0 + 3600, finished=False)
    return create_app(db, start="sessions")


def test_sessions_at_80x24(snap_compare, tmp_path):
    assert snap_compare(_sessions_app(tmp_path), terminal_size=(80, 24))


def test_sessions_at_120x40(snap_compare, tmp_path):
    assert snap_compare(_sessions_app(tmp_path), terminal_size=(120, 40))


def test_replay_screen(snap_compare, tmp_path):
    db, store, sid = _store(tmp_path, n_nodes=10)
    app = create_app(db, start="replay", session_id=sid, clock=frozen_clock(NOW))

    async def run_before(pilot):
        screen = app.screen
        await reads_done(app, pilot)
        screen._move_to(screen.timeline._node_pos[7])
        await _settle(pilot, lambda: 7 in screen.state.nodes)

    assert snap_compare(app, terminal_size=(130, 40), run_before=run_before)


def test_console_unsandboxed_runner_stopped(snap_compare, tmp_path):
    """Both trust markers: a session run without the sandbox whose runner was killed (its
    heartbeat stale, its process gone): RUNNER STOPPED and UNSANDBOXED, no ticking clock."""
    import subprocess
    import sys

    from engine.agent.session_config import SessionConfig
    from engine.session import events as ev
    from tests.demo_session import DEMO_CODER
    from engine.task import instruction_text

    db = tmp_path / "befair.db"
    store = SessionStore(db)
    config = SessionConfig(level="fairness-hint", steps=6, sandbox="none").to_dict()
    writer = store.create_session(config, instruction=instruction_text("fairness-hint"), coder=dict(DEMO_CODER),
                                  data={"kind": "synth", "path": "synthderm/seed-0"}, session_id="killed",
                                  ts=TS0)
    writer.emit(parse(ev.POLICY_DECISION, {"action": "draft", "forced": False, "node_id": None,
                                     "reason": "initial drafting"}), ts=TS0 + 1)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.db.conn.execute("update sessions set pid = ?, heartbeat_at = ? where id = 'killed'", [dead.pid, TS0 + 2])
    app = create_app(db, start="console", session_id="killed", clock=frozen_clock(NOW), poll_interval=0.02)

    async def run_before(pilot):
        await _settle(pilot, lambda: app.screen.runner == "stopped")

    assert snap_compare(app, terminal_size=(120, 30), run_before=run_before)


def test_help_at_80x24(snap_compare, tmp_path):
    """The help screen (F1 or ?) at the smallest supported terminal: keys first, scrollable."""
    app = create_app(tmp_path / "befair.db", settings_file=tmp_path / "none.json")

    async def run_before(pilot):
        await pilot.press("f1")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_help_at_120x40(snap_compare, tmp_path):
    app = create_app(tmp_path / "befair.db", settings_file=tmp_path / "none.json")

    async def run_before(pilot):
        await pilot.press("f1")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(120, 40), run_before=run_before)


def test_help_badges_and_words_at_80x24(snap_compare, tmp_path):
    """Further down the help: the badges, the plot's markers and the words in plain language."""
    app = create_app(tmp_path / "befair.db", settings_file=tmp_path / "none.json")

    async def run_before(pilot):
        await pilot.press("f1")
        await pilot.pause(0.2)
        await pilot.press("pagedown", "pagedown", "pagedown")
        await pilot.pause(0.2)

    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)
