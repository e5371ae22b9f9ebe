"""A paused session's clock, on a real short session (issue 33): a study says whether its time limit
runs on while the participant has the session paused ([people] clock_runs_when_paused). Stopped,
a pause longer than the whole limit ends nothing, and the session ends at its limit once resumed;
running (the default), the limit ends the session while it is still paused.

Real sessions: detached study workers with the fast hash coder (tests/unit/test_study_pool), steered
through engine.study.people.steer as the participant's console does."""
from __future__ import annotations

import time

import pytest

from engine.session import events as ev
from engine.session.store import SessionStore
from engine.session.active_time import active_seconds, clock_runs_when_paused
from engine.study import grid, people
from engine.study.spec import load_spec
from tests.unit.test_study_pool import SLEEP_ENV, study_env

__all__ = ["study_env"]

LIMIT = 8  # seconds of time limit
PAUSE = LIMIT + 4  # seconds paused: longer than the whole limit


def _spec(path, name: str, runs: bool):
    path.write_text(f'''
name = "{name}"
levels = ["base"]
participants = ["p01"]
steps = 50
seed = 1
step_timeout = 120
time_limit = {LIMIT}

[people]
consent = "I agree."
clock_runs_when_paused = {str(runs).lower()}

[search]
num_drafts = 2

[coder]
factory = "tests.unit.test_study_pool:fast_coder"
label = "fast"

[data]
synth = {{ n_train = 60, n_test = 40, size = 16 }}
''')
    return load_spec(path)


def _until(predicate, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def _start_and_pause(tmp_path, name: str, runs: bool):
    spec = _spec(tmp_path / f"{name}.toml", name, runs)
    store = SessionStore(tmp_path / "db" / "befair.db")
    grid.ensure_study(store, spec)
    people.consent(store, spec, "p01")
    people.give_profile(store, spec, "p01", {"role": "dermatologist", "years_dermatology": 3, "years_ml": 0})
    position = people.where(store, spec, "p01")
    proc = people.start_cell(store, spec, "p01", position)
    assert proc is not None
    sid = position.cell.session_id
    _until(lambda: store.last_seq(sid) > 0 and store.state(sid).status == "running", 120, "the session running")
    people.steer(store, spec, "p01", sid, "pause", {})
    _until(lambda: store.state(sid).status == "paused", 60, "the pause")
    return spec, store, sid, proc


def _paused_span(events) -> float:
    paused = next(e.ts for e in events if e.kind == ev.PAUSED)
    ended = next((e.ts for e in events if e.kind in (ev.RESUMED, ev.SESSION_FINISHED) and e.ts >= paused), None)
    assert ended is not None
    return ended - paused


@pytest.mark.slow
def test_a_stopped_clock_leaves_the_pause_out_of_the_time_limit(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "1")
    spec, store, sid, proc = _start_and_pause(tmp_path, "stopped", runs=False)
    assert clock_runs_when_paused(store.state(sid).config) is False   # recorded with the session
    time.sleep(PAUSE)
    assert store.state(sid).status == "paused"                        # the limit passed while paused: no end
    people.steer(store, spec, "p01", sid, "resume", {})
    assert proc.wait(timeout=180) == 0
    state, events = store.state(sid), store.events(sid)
    assert state.status == "finished" and state.finish_reason == f"time limit of {LIMIT} s reached"
    assert _paused_span(events) >= PAUSE
    assert LIMIT <= active_seconds(events, count_paused=False) < LIMIT + 30   # the limit counted without the pause
    assert active_seconds(events) >= LIMIT + PAUSE
    store.close()


@pytest.mark.slow
def test_a_running_clock_ends_the_session_while_it_is_paused(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "1")
    spec, store, sid, proc = _start_and_pause(tmp_path, "running", runs=True)
    assert clock_runs_when_paused(store.state(sid).config) is True
    assert proc.wait(timeout=60 + LIMIT) == 0                         # nobody resumed it
    state, events = store.state(sid), store.events(sid)
    assert state.status == "finished" and state.finish_reason == f"time limit of {LIMIT} s reached"
    assert not [e for e in events if e.kind == ev.RESUMED]
    assert LIMIT <= active_seconds(events) < LIMIT + 30
    store.close()


def _event(kind: str, ts: float) -> ev.Event:
    return ev.Event(seq=0, kind=kind, ts=ts)


def test_time_paused_counts_only_where_the_clock_runs_when_paused():
    """Started at 100, paused 130-190, a restart at 500 while paused again from 520, alive at 600."""
    events = [_event(ev.SESSION_STARTED, 100), _event(ev.PAUSED, 130), _event(ev.RESUMED, 190),
              _event(ev.NODE_CREATED, 200), _event(ev.PAUSED, 210), _event(ev.SESSION_RESUMED, 500),
              _event(ev.NODE_CREATED, 510), _event(ev.PAUSED, 520)]
    assert active_seconds(events, now=600) == 110 + 100             # the runners' lifetimes, pauses included
    # without the pauses: 100-130 and 190-210 in the first lifetime (its last pause ends with it), 500-520
    assert active_seconds(events, now=600, count_paused=False) == 30 + 20 + 20
    assert active_seconds(events, count_paused=False) == 30 + 20 + 20   # still paused: the clock stands
    events.append(_event(ev.RESUMED, 700))
    assert active_seconds(events, now=760, count_paused=False) == 30 + 20 + 20 + 60


def test_a_session_records_whether_its_clock_runs_when_paused():
    assert clock_runs_when_paused({}) and clock_runs_when_paused({"extra": {"study": {"cell": 1}}})
    assert not clock_runs_when_paused({"extra": {"study": {"clock_runs_when_paused": False}}})
