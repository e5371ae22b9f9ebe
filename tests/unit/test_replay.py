"""Replay with scaled timing, and the Timeline the console's replay screen uses."""
from __future__ import annotations

import threading
import time

import pytest

from engine.session import events as ev
from tests.demo_session import write_demo_session
from engine.session.replay import MAX_GAP_S, Timeline, replay, scaled_gaps
from engine.session.state import fold
from engine.session.store import SessionStore, node_row


def _events(times):
    return [ev.Event(seq=i + 1, kind=ev.ERROR, payload={"message": str(i), "node_id": None, "where": None},
                     ts=t, session_id="s") for i, t in enumerate(times)]


class FakeClock:
    def __init__(self):
        self.now = 100.0
        self.sleeps = []

    def clock(self):
        return self.now

    def sleep(self, dt):
        self.sleeps.append(round(dt, 9))
        self.now += dt


def test_scaled_gaps():
    events = _events([0.0, 1.0, 1.5, 61.5, 61.0, 62.0])
    assert scaled_gaps(events, 1.0) == [0.0, 1.0, 0.5, MAX_GAP_S, 0.0, 1.0]
    assert scaled_gaps(events, 10.0) == pytest.approx([0.0, 0.1, 0.05, 2.0, 0.0, 0.1])
    assert scaled_gaps(events, 1.0, max_gap=None)[3] == 60.0
    assert scaled_gaps(events, None) == [0.0] * 6
    assert scaled_gaps(events, float("inf")) == [0.0] * 6
    assert scaled_gaps([], 1.0) == []


def test_replay_timing_with_a_fake_clock():
    events = _events([0.0, 1.0, 1.5, 3600.0])
    fc = FakeClock()
    got = []
    n = replay(events, 1.0, lambda e: got.append((e.seq, fc.now)), clock=fc.clock, sleep=fc.sleep)
    assert n == 4 and [s for s, _ in got] == [1, 2, 3, 4]
    assert [round(t - 100.0, 6) for _, t in got] == [0.0, 1.0, 1.5, 3.5]  # the hour-long gap capped at 2 s
    fc = FakeClock()
    got = []
    replay(events, 10.0, lambda e: got.append(fc.now), clock=fc.clock, sleep=fc.sleep)
    assert [round(t - 100.0, 6) for t in got] == [0.0, 0.1, 0.15, 2.15]


def test_replay_does_not_drift_with_a_slow_sink():
    events = _events([0.0, 1.0, 2.0, 3.0])
    fc = FakeClock()
    got = []

    def slow_sink(e):
        got.append(fc.now)
        fc.now += 0.4  # the sink takes 0.4 s

    replay(events, 1.0, slow_sink, clock=fc.clock, sleep=fc.sleep)
    assert [round(t - 100.0, 6) for t in got] == [0.0, 1.0, 2.0, 3.0]
    assert fc.sleeps == pytest.approx([0.6, 0.6, 0.6])


def test_replay_as_fast_as_possible_and_into_a_state():
    events = _events([float(i) for i in range(200)])
    received = []
    started = time.perf_counter()
    assert replay(events, None, received.append) == 200
    assert time.perf_counter() - started < 1.0
    assert received == events


def test_stop_ends_a_replay_promptly():
    events = _events([0.0, 100.0, 200.0])
    stop = threading.Event()
    got = []
    threading.Timer(0.05, stop.set).start()
    started = time.perf_counter()
    n = replay(events, 1.0, got.append, stop=stop)
    assert n == 1 and len(got) == 1
    assert time.perf_counter() - started < 1.5
    stop2 = threading.Event()
    stop2.set()
    assert replay(events, None, got.append, stop=stop2) == 0


def test_replay_with_fake_sleep_and_stop():
    events = _events([0.0, 1.0, 2.0, 3.0])
    fc = FakeClock()
    stop = threading.Event()
    got = []

    def sink(e):
        got.append(e.seq)
        if e.seq == 2:
            stop.set()

    assert replay(events, 1.0, sink, clock=fc.clock, sleep=fc.sleep, stop=stop) == 2
    assert got == [1, 2]


@pytest.fixture(scope="module")
def demo_events(tmp_path_factory):
    store = SessionStore(tmp_path_factory.mktemp("replay") / "r.db")
    sid = write_demo_session(store, n_nodes=10)
    events = store.events(sid)
    store.close()
    return events


def _rows(state):
    return [node_row(state.session_id, state.nodes[k]) for k in sorted(state.nodes)]


def test_timeline_matches_fold_at_every_position(demo_events):
    tl = Timeline(demo_events, checkpoint_every=37)
    assert len(tl) == len(demo_events) and tl.position == 0 and tl.current_event is None
    for pos in list(range(0, len(demo_events) + 1, 7)) + [len(demo_events)]:
        assert tl.seek(pos) == fold(demo_events[:pos], tl.session_id)
    # backwards, via checkpoints
    for pos in (len(demo_events) - 1, 150, 36, 37, 38, 1, 0):
        assert tl.seek(pos) == fold(demo_events[:pos], tl.session_id), pos
    assert tl.to_end() == fold(demo_events)
    assert tl.at_end and tl.current_event == demo_events[-1]


def test_timeline_forward_is_incremental(demo_events, monkeypatch):
    import engine.session.replay as replay_mod

    calls = []
    real_apply = replay_mod.apply
    monkeypatch.setattr(replay_mod, "apply", lambda s, e: (calls.append(e.seq), real_apply(s, e))[1])
    tl = Timeline(demo_events)
    tl.seek(50)
    tl.step()
    tl.step(5)
    assert calls == list(range(1, 57))  # each event applied once
    tl.step(-1)  # backward: refold from the nearest checkpoint (position 0 here)
    assert tl.position == 55 and len(calls) == 56 + 55


def test_timeline_node_navigation(demo_events):
    tl = Timeline(demo_events)
    state = tl.jump_to_node(4)
    assert tl.current_event.kind == ev.NODE_CREATED and tl.current_event.payload["node_id"] == 4
    assert max(state.nodes) == 4 and state.nodes[4].status == "queued"
    tl.next_node()
    assert tl.current_event.payload["node_id"] == 5
    tl.prev_node()
    assert tl.current_event.payload["node_id"] == 4
    tl.to_start()
    tl.prev_node()
    assert tl.position == 0
    tl.to_end()
    tl.next_node()
    assert tl.at_end
    with pytest.raises(KeyError):
        tl.jump_to_node(999)
    tl.seek(-5)
    assert tl.position == 0
    tl.seek(10**9)
    assert tl.at_end


def test_timeline_time_helpers(demo_events):
    tl = Timeline(demo_events)
    assert tl.elapsed(0) == 0.0
    assert tl.elapsed(len(tl)) == pytest.approx(demo_events[-1].ts - demo_events[0].ts)
    pos = tl.position_at_time(60.0)
    assert all(e.ts - demo_events[0].ts <= 60.0 for e in demo_events[:pos])
    assert pos == len(demo_events) or demo_events[pos].ts - demo_events[0].ts > 60.0


def test_replay_into_a_live_state_equals_fold(demo_events):
    from engine.session.state import apply, new_state

    state = new_state()
    fc = FakeClock()
    replay(demo_events, 10.0, lambda e: apply(state, e), clock=fc.clock, sleep=fc.sleep)
    assert _rows(state) == _rows(fold(demo_events))
    assert sum(fc.sleeps) <= (demo_events[-1].ts - demo_events[0].ts) / 10.0 + 1e-6


def test_empty_timeline():
    tl = Timeline([])
    assert len(tl) == 0 and tl.state.nodes == {} and tl.elapsed() == 0.0 and tl.position_at_time(5) == 0
    assert replay([], 1.0, lambda e: None) == 0
