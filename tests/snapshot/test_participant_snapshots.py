"""Snapshots of a participant's console (issue 33): a recorded running session at the smallest
supported terminal (80x24) and at 140x42, as the participant's own app shows it (no published
reference rows, the steps taken in the participant's bar, no key they lack). Update with
`make snapshots`, then look at the SVGs."""
from __future__ import annotations

import time

import pytest

from tests.settle import reads_done
from tests.snapshot.participant_demo import participant_console


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


def _participant_app(tmp_path):
    app, _spec, store, sid = participant_console(tmp_path, n_nodes=3)
    last = store.last_seq(sid)

    async def run_before(pilot):
        for _ in range(200):
            await pilot.pause(0.02)
            if getattr(app.screen, "state", None) is not None and app.screen.state.last_seq == last \
                    and app.screen.runner is not None:   # the heartbeat read: the clock depends on it
                break
        await reads_done(app, pilot)
        await pilot.pause(0.3)

    return app, run_before


def test_participant_console_at_80x24(snap_compare, tmp_path):
    app, run_before = _participant_app(tmp_path)
    assert snap_compare(app, terminal_size=(80, 24), run_before=run_before)


def test_participant_console_at_140x42(snap_compare, tmp_path):
    app, run_before = _participant_app(tmp_path)
    assert snap_compare(app, terminal_size=(140, 42), run_before=run_before)
