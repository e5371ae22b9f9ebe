"""The console's controller without Textual (befair_tui.console): the fold of a generated session
and what it says to redraw, auto-follow, a runner that stopped, a replay's seeks, and why a steering
key cannot act for each reader (the researcher, a replay's viewer, a participant)."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest

from engine.session import events as ev
from engine.session import views
from engine.session.state import fold
from engine.session.store import SessionStore
from engine.study.spec import StudySpec
from tests.demo_session import demo_events

from befair_tui.console.controller import FREEZE_AFTER, ConsoleController
from befair_tui.console.modes import Following, Participant, Replaying, Researcher, Viewer

NOW = 1_800_000_000.0
CONSOLE_KEYS = {"resume_runner": "u", "sessions": "l", "pause": "p"}
PARTICIPANT_KEYS = {"pause": "p", "guide": "g"}


class _Commands:
    """A store that only records the commands written to it."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, dict[str, Any], str]] = []

    def issue_command(self, session_id: str, kind: str, payload: dict[str, Any], *, by: str) -> None:
        self.sent.append((session_id, kind, payload, by))


def _running() -> list[ev.Event]:
    """A running session: three nodes, the third one executing."""
    return demo_events(n_nodes=3, finished=False, intervals=False)


def _live(commands: _Commands | None = None) -> ConsoleController:
    store = cast(SessionStore, commands or _Commands())
    return ConsoleController("s", Following(Path("/nonexistent/db"), "s", clock=lambda: NOW), Researcher(store))


def _event(seq: int, kind: str, ts: float, **payload: Any) -> ev.Event:
    return ev.Event(seq=seq, kind=kind, payload=dict(payload), ts=ts, session_id="s")


def test_the_controller_imports_no_textual() -> None:
    code = ("import sys, befair_tui.console.controller, befair_tui.console.modes, befair_tui.console.steering; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'textual'))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


def test_ingest_of_a_generated_session_says_what_to_redraw() -> None:
    events = _running()
    ctl = _live()
    assert ctl.ingest([]) is None
    redraw = ctl.ingest(events)
    assert redraw is not None
    state = fold(events)
    assert ctl.state.last_seq == state.last_seq and set(ctl.state.nodes) == {1, 2, 3}
    assert redraw.nodes == {1, 2, 3} and redraw.scores and redraw.live
    assert redraw.references and not redraw.freeze and not redraw.rebuild   # the first batch: read the rows
    assert redraw.best == ctl.best == views.best_id(state) and redraw.best is not None
    assert ctl.state.running_node == 3 and redraw.select == ctl.selected == 3   # auto-follow: the running node
    assert not redraw.ended and not redraw.just_ended and not redraw.spin      # a clock ticks: no spin here
    assert redraw.derived   # what the plan derived (the best nodes) is handed to the widgets' pass

    seq, ts = ctl.state.last_seq, ctl.state.last_ts or 0.0
    more = ctl.ingest([_event(seq + 1, ev.OUTPUT, ts + 1, node_id=3, text="epoch 4\n", stream="stdout")])
    assert more is not None and more.output == {3: ["epoch 4\n"]} and not more.nodes
    assert more.select is None and not more.references and not more.scores   # nothing else moved


def test_a_large_batch_is_frozen() -> None:
    ctl = _live()
    start = _running()[:1]
    ticks = [_event(i + 2, ev.POLICY_DECISION, float(i), action="draft", forced=False, node_id=None, reason="")
             for i in range(FREEZE_AFTER)]
    redraw = ctl.ingest(start + ticks)
    assert redraw is not None and redraw.freeze


def test_auto_follow_until_a_node_is_chosen_by_hand() -> None:
    events = _running()
    ctl = _live()
    ctl.ingest(events[:-10])
    followed = ctl.selected
    assert followed is not None and ctl.auto_follow
    other = next(n for n in ctl.state.nodes if n != followed)
    assert not ctl.highlighted(other, by_hand=False)         # our own cursor move while following: not shown
    assert not ctl.highlighted(followed, by_hand=False) and ctl.auto_follow   # shown already
    ctl.ingest(events[-10:])
    assert ctl.selected == 3                                  # the newest running node, followed
    assert ctl.highlighted(1, by_hand=True)                  # by hand: shown, and following stops
    ctl.selected = 1
    assert not ctl.auto_follow
    seq, ts = ctl.state.last_seq, ctl.state.last_ts or 0.0
    redraw = ctl.ingest([_event(seq + 1, ev.NODE_CREATED, ts + 1, node_id=4, parent_id=1, step=4, stage="improve",
                                plan="p", guidance_ids=[], origin="agent")])
    assert redraw is not None and redraw.select is None and ctl.selected == 1 and 4 in redraw.nodes
    assert ctl.chosen(2) and not ctl.chosen(None)
    assert ctl.descendants(1) == 1 and ctl.descendants(4) == 0 and ctl.descendants(99) == 0


def test_a_runner_that_stopped_is_told_once_and_stops_the_clock() -> None:
    ctl = _live()
    assert ctl.check_runner() is None and ctl.runner is None   # no heartbeat read yet
    ctl.ingest(_running())
    assert ctl.heartbeat({"status": "running", "heartbeat_at": time.time(), "pid": None})
    change = ctl.check_runner()
    assert change is not None and change.status == "alive" and change.changed and not change.stopped
    assert ctl.now() == NOW                                     # a runner runs: the wall clock
    ctl.heartbeat({"status": "running", "heartbeat_at": time.time() - 3600, "pid": None})
    change = ctl.check_runner()
    assert change is not None and change.stopped and change.changed and change.previous == "alive"
    assert ctl.runner == "stopped" and ctl.now() == ctl.state.last_ts   # nothing runs: the last event's time
    again = ctl.check_runner()
    assert again is not None and again.stopped and not again.changed   # said once
    ctl.heartbeat({"status": "running", "heartbeat_at": time.time(), "pid": None})
    back = ctl.check_runner()
    assert back is not None and back.back and back.changed


def test_the_first_batch_after_a_heartbeat_judges_the_runner_at_once() -> None:
    ctl = _live()
    assert not ctl.heartbeat({"status": "running", "heartbeat_at": time.time(), "pid": None})  # no events yet
    redraw = ctl.ingest(_running())
    assert redraw is not None and redraw.check_runner


def test_a_followed_session_that_ends_is_announced_once_a_replay_never() -> None:
    events = demo_events(n_nodes=3, finished=True, intervals=False)
    end = next(i for i, e in enumerate(events) if e.kind == ev.SESSION_FINISHED)
    ctl = _live()
    first = ctl.ingest(events[:end])
    assert first is not None and not first.ended
    last = ctl.ingest(events[end:])
    assert last is not None and last.ended and last.just_ended
    seq = ctl.state.last_seq
    later = ctl.ingest([_event(seq + 1, ev.POLICY_DECISION, 1.0, action="draft", forced=False, node_id=None,
                               reason="")])
    assert later is not None and later.ended and not later.just_ended

    replay = ConsoleController("s", Replaying("s"), Viewer())
    replay.ingest(events[:end])
    ended = replay.ingest(events[end:])
    assert ended is not None and ended.ended and not ended.just_ended


def test_replay_seeks_forward_fold_and_back_rebuild_from_the_timeline() -> None:
    events = _running()
    replaying = Replaying("s", clock=lambda: NOW)
    replaying.load(events)
    ctl = ConsoleController("s", replaying, Viewer())
    tl = replaying.timeline
    assert ctl.seek(tl, 0) is None                             # already there
    forward = ctl.seek(tl, len(tl))
    assert forward is not None and not forward.rebuild and tl.position == len(tl)
    assert ctl.state.last_seq == events[-1].seq and ctl.selected == 3
    assert forward.spin                                         # no clock ticks in a replay: each redraw spins
    assert ctl.now() == ctl.state.last_ts                       # its time is the last event's
    node2 = tl._node_pos[2]
    back = ctl.seek(tl, node2)
    assert back is not None and back.rebuild and back.nodes == set(ctl.state.nodes) == {1, 2}
    assert ctl.selected == 2                                    # node 3 is gone: auto-follow takes the newest
    assert ctl.state is not tl.state_at(node2)                  # a copy: the timeline keeps its own
    ctl.auto_follow = False
    ctl.selected = 2
    assert ctl.seek(tl, 1) is not None and ctl.selected is None   # the selected node is gone: nothing selected
    assert ctl.seek(tl, -5) is not None and tl.position == 0 and ctl.state.last_seq == 0


def test_replay_plays_at_its_speed_by_the_wall_clock() -> None:
    t0 = 1_700_000_000.0
    events = [_event(1, ev.SESSION_STARTED, t0, config={"steps": 3}, instruction="", coder={}, data={})]
    events += [_event(i + 1, ev.POLICY_DECISION, t0 + i, action="draft", forced=False, node_id=None, reason="")
               for i in range(1, 61)]
    now = [100.0]
    replaying = Replaying("s", speed="10x", mono=lambda: now[0])
    replaying.load(events)
    replaying.timeline.position = 1
    replaying.playing = True
    replaying.restart_clock()
    now[0] += 1.0
    assert replaying.session_time(replaying.due_position()) == 10.0
    assert replaying.label() == "▶ REPLAY 10x"
    replaying.next_speed()
    assert replaying.speed == "100x"


@pytest.mark.parametrize("status", ["running", "paused"])
def test_why_a_steering_key_cannot_act_for_each_reader(status: str) -> None:
    events = _running()
    if status == "paused":
        seq, ts = events[-1].seq, events[-1].ts
        events = [*events, _event(seq + 1, ev.PAUSED, ts + 1)]
    stopped = {"status": status, "heartbeat_at": time.time() - 3600, "pid": None}

    researcher = _live()
    researcher.ingest(events)
    assert researcher.state.status == status and researcher.live
    assert researcher.steering_refusal("pause", CONSOLE_KEYS) is None
    assert researcher.steering_refusal("resume_runner", CONSOLE_KEYS) is not None   # nothing to resume
    researcher.heartbeat(stopped)
    researcher.check_runner()
    assert "press u to resume it" in (researcher.steering_refusal("pause", CONSOLE_KEYS) or "")
    assert researcher.steering_refusal("resume_runner", CONSOLE_KEYS) is None
    assert researcher.steering_refusal("guide", CONSOLE_KEYS) is None   # queued until the runner is back
    assert not researcher.steers_criterion()                             # a stopped runner: view only

    viewer = ConsoleController("s", Replaying("s"), Viewer())
    viewer.ingest(events)
    assert not viewer.live and not viewer.steers_criterion()
    assert viewer.steering_refusal("pause", CONSOLE_KEYS) == (
        "This is a replay of what happened: it cannot pause it. Open the session from Sessions (l) to steer it.")
    assert "cannot be resumed from here" in (viewer.steering_refusal("resume_runner", CONSOLE_KEYS) or "")
    assert viewer.reader.send("s", "pause", {}) is not None      # a replay sends nothing

    spec = cast(StudySpec, None)   # steering refusals ask nothing of the study
    participant = ConsoleController("s", Following(Path("/nonexistent/db"), "s", clock=lambda: NOW),
                                    Participant(cast(SessionStore, _Commands()), spec, "p01"))
    participant.ingest(events)
    assert participant.reader.offers("pause") and not participant.reader.offers("stop")
    assert not participant.reader.offers("resume_runner") and not participant.reader.offers("train_baselines")
    participant.heartbeat(stopped)
    participant.check_runner()
    why = participant.steering_refusal("pause", PARTICIPANT_KEYS) or ""
    assert "it is being resumed" in why and "press" not in why and "(u)" not in why   # no key they lack


def test_the_researcher_sends_commands_and_says_a_stopped_runner_queues_them() -> None:
    commands = _Commands()
    ctl = _live(commands)
    ctl.ingest(_running())
    assert ctl.reader.send("s", "pause", {}) is None
    assert commands.sent == [("s", "pause", {}, "console")]
    assert ctl.reader.sent("Paused.", "alive") == "Paused."
    assert "Queued" in ctl.reader.sent("Paused.", "stopped")


def test_after_the_end_nothing_steers_and_the_criterion_is_the_readers_own() -> None:
    events = demo_events(n_nodes=3, finished=True, intervals=False)
    ctl = _live()
    ctl.ingest(events)
    assert not ctl.live and not ctl.steers_criterion()
    assert "has finished" in (ctl.steering_refusal("guide", CONSOLE_KEYS) or "")
    own = views.session_criterion(ctl.state)
    other = next(c for c in views.CRITERIA if c != own)
    ctl.view_by(other)
    assert ctl.view_criterion == other
    redraw = ctl.everything()
    assert redraw.rebuild and redraw.best == views.best_id(ctl.state, other)
    ctl.view_by(own)
    assert ctl.view_criterion is None
    assert ctl.toggle_split() == "validation" and ctl.toggle_split() == "test"
