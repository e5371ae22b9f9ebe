"""How the three consoles differ, as small objects the controller is composed with (no flags):

- where the events come from: `Following` (a live session's event log, read by a worker; the wall
  clock runs, the runner's heartbeat is read) or `Replaying` (a recorded session's events, moved
  through at a speed; its own time stands still between events);
- who is at the console: `Researcher` (steers; commands go to the store), `Viewer` (a replay:
  reads only) or `Participant` (steers their own session only, through engine.study.people.steer,
  with the keys a study allows; is shown the published rows only where the study says so).
"""
from __future__ import annotations

import subprocess
import time
from bisect import bisect_right
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.session import events as ev
from engine.session import live_reply
from engine.session.replay import Timeline
from engine.session.state import SessionState
from engine.session.store import SessionStore

from befair_tui.console.steering import steering_refusal
from befair_tui.launch import runner_state

if TYPE_CHECKING:
    from engine.study.spec import StudySpec

Clock = Callable[[], float]


# -- where the events come from -------------------------------------------------------------------
class Source(Protocol):
    clock: Clock
    ticks: bool           # a timer moves the running node's clock (else each redraw places its spinner)
    announces_end: bool   # a session seen running that ends is announced (its summary's key)

    def now(self, state: SessionState, runner: str | None) -> float | None: ...
    def runner_status(self, row: Mapping[str, Any] | None) -> str | None: ...
    def live_reply(self, state: SessionState) -> dict[str, Any] | None: ...


class Following:
    """A session's event log as it grows (a worker polls it): the wall clock runs while something
    runs the session; `proc`, the child this console started for it, if any."""

    ticks = True
    announces_end = True

    def __init__(self, store_path: Path, session_id: str, *, clock: Clock | None = None,
                 proc: subprocess.Popen[bytes] | None = None) -> None:
        self.store_path, self.session_id = store_path, session_id
        self.clock = clock or time.time
        self.proc = proc

    def now(self, state: SessionState, runner: str | None) -> float | None:
        """The wall clock, unless the runner is gone: then the time of the last event."""
        return state.last_ts if runner == "stopped" else self.clock()

    def runner_status(self, row: Mapping[str, Any] | None) -> str | None:
        """alive | stopped | finished, from the session row's heartbeat (None: not read yet)."""
        if self.proc is not None and self.proc.poll() is None:
            return "alive"  # our own child (the runner, or one about to become it) still runs
        if row is None:
            return None
        return runner_state(row, self.proc)

    def live_reply(self, state: SessionState) -> dict[str, Any] | None:
        """The reply being written: its progress from the events, its text (and the latest
        tokens/s) from the live side channel, which is never stored (engine.session.live_reply)."""
        current = state.live_reply
        if current is None:
            return None
        side = live_reply.read(live_reply.live_path(self.store_path, self.session_id))
        merged = dict(current)
        if side and side.get("role") == current.get("role") and side.get("step") == current.get("step"):
            merged.update(side)
        return merged


SPEEDS = {"1x": 1.0, "10x": 10.0, "100x": 100.0, "max": None}
MAX_PER_TICK = 2_000


class Replaying:
    """A recorded session's events on a timeline, played at a speed. Speeds are honest: at 10x,
    ten seconds of the session's own time pass per second of wall time, quiet stretches included.
    Playing follows `mono` (a wall clock), not a count of timer ticks, so a slow frame delays
    nothing that follows it."""

    ticks = False
    announces_end = False

    def __init__(self, session_id: str, *, clock: Clock | None = None, speed: str = "10x", playing: bool = False,
                 mono: Clock = time.monotonic) -> None:
        self.clock = clock or time.time
        self.timeline = Timeline([], session_id=session_id)   # its events come with load()
        self.loaded = False
        self.speed = speed if speed in SPEEDS else "10x"
        self.playing = playing
        self.mono = mono
        self._times: list[float] = []
        self._anchor: tuple[float, float] | None = None  # (wall clock, session time) play is measured from

    def load(self, events: list[ev.Event]) -> None:
        self.timeline = Timeline(events, session_id=self.timeline.session_id)
        self._times = session_times(self.timeline.events)
        self.loaded = True

    def now(self, state: SessionState, runner: str | None) -> float | None:
        return state.last_ts  # no clock runs in a replay: its time is the last event's

    def runner_status(self, row: Mapping[str, Any] | None) -> str | None:
        return None  # nothing runs a replay

    def live_reply(self, state: SessionState) -> dict[str, Any] | None:
        """The reply written again from the stored offsets: the first `chars` characters of the
        llm_call that ends the stream (engine.session.live_reply.replay_text)."""
        current = state.live_reply
        if current is None:
            return None
        return {**current, "text": live_reply.replay_text(self.timeline.events, self.timeline.position, current)}

    def label(self) -> str:
        """The header's first word: whether the replay plays, and how fast."""
        return f"▶ REPLAY {self.speed}" if self.playing else "⏸ REPLAY PAUSED"

    def session_time(self, position: int | None = None) -> float:
        """Seconds of session time at a timeline position (0 before the first event)."""
        position = self.timeline.position if position is None else position
        return self._times[position - 1] if position > 0 and self._times else 0.0

    def due_position(self) -> int:
        """How many events should be applied now, at this speed, since play started."""
        tl = self.timeline
        speed = SPEEDS[self.speed]
        if speed is None:
            return min(len(tl), tl.position + MAX_PER_TICK)
        now = self.mono()
        if self._anchor is None:
            self._anchor = (now, self.session_time())
        wall0, session0 = self._anchor
        due = session0 + (now - wall0) * speed
        return max(tl.position, min(bisect_right(self._times, due), tl.position + MAX_PER_TICK))

    def restart_clock(self) -> None:
        """Measure play from now, at the current position (on play, and on a change of speed)."""
        self._anchor = (self.mono(), self.session_time()) if self.playing else None

    def next_speed(self) -> None:
        names = list(SPEEDS)
        self.speed = names[(names.index(self.speed) + 1) % len(names)]
        self.restart_clock()


def session_times(events: Sequence[ev.Event]) -> list[float]:
    """Each event's session time in seconds from the first event (clock steps back count as 0)."""
    out: list[float] = []
    total = 0.0
    for prev, cur in zip([None, *events[:-1]], events, strict=True):
        if prev is not None:
            total += max(0.0, cur.ts - prev.ts)
        out.append(total)
    return out


# -- who is at the console --------------------------------------------------------------------------
class Reader(Protocol):
    steers: bool  # whether this reader's commands can reach the session at all

    def offers(self, action: str) -> bool: ...
    def refusal(self, action: str, state: SessionState, runner: str | None, keys: Mapping[str, str]) -> str | None: ...
    def send(self, session_id: str, kind: str, payload: dict[str, Any]) -> str | None: ...
    def sent(self, note: str, runner: str | None) -> str: ...
    def shown_published(self, published: list[dict[str, Any]]) -> list[dict[str, Any]]: ...


class Researcher:
    """The researcher's console: every key; each command is written to the store (by "console")."""

    steers = True

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def offers(self, action: str) -> bool:
        return True

    def refusal(self, action: str, state: SessionState, runner: str | None, keys: Mapping[str, str]) -> str | None:
        return steering_refusal(action, state, read_only=False, runner=runner, keys=keys)

    def send(self, session_id: str, kind: str, payload: dict[str, Any]) -> str | None:
        """Write the command (None), or say why it could not be."""
        try:
            self.store.issue_command(session_id, kind, payload, by="console")
        except Exception as exc:  # noqa: BLE001 - every failure reaches the user as a notification
            return f"could not send {kind}: {exc}"
        return None

    def sent(self, note: str, runner: str | None) -> str:
        if runner == "stopped":
            return note + " (Queued: the runner is stopped; it applies when you resume with u.)"
        return note

    def shown_published(self, published: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return published


class Viewer:
    """A replay's reader: it shows what happened and sends nothing."""

    steers = False

    def offers(self, action: str) -> bool:
        return True  # a key that cannot act says why (the replay's refusal)

    def refusal(self, action: str, state: SessionState, runner: str | None, keys: Mapping[str, str]) -> str | None:
        return steering_refusal(action, state, read_only=True, runner=runner, keys=keys)

    def send(self, session_id: str, kind: str, payload: dict[str, Any]) -> str | None:
        return f"could not send {kind}: this is a replay"

    def sent(self, note: str, runner: str | None) -> str:
        return note

    def shown_published(self, published: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return published


PARTICIPANT_ACTIONS = {"pause", "resume", "guide", "expand", "prune", "toggle_split", "detail_tab",
                       "choose_criterion"}


class Participant:
    """A study participant on their own session: steering only (PARTICIPANT_ACTIONS), each
    command through engine.study.people.steer, which refuses (and records) one for any session
    but this participant's own."""

    steers = True

    def __init__(self, store: SessionStore, spec: StudySpec, participant: str) -> None:
        self.store, self.spec, self.participant = store, spec, participant

    def offers(self, action: str) -> bool:
        return action in PARTICIPANT_ACTIONS

    def refusal(self, action: str, state: SessionState, runner: str | None, keys: Mapping[str, str]) -> str | None:
        return steering_refusal(action, state, read_only=False, runner=runner, keys=keys)

    def send(self, session_id: str, kind: str, payload: dict[str, Any]) -> str | None:
        from engine.errors import BefairError
        from engine.session.participants import CommandRefused
        from engine.study import people

        try:
            people.steer(self.store, self.spec, self.participant, session_id, kind, payload)
        except CommandRefused as exc:
            return str(exc)
        except (BefairError, OSError) as exc:
            return f"could not send {kind}: {exc}"
        return None

    def sent(self, note: str, runner: str | None) -> str:
        return note  # a stopped runner is resumed by itself: nothing to say

    def shown_published(self, published: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The published reference rows only where the study shows them to everyone ([people]
        references): a published figure can anchor a participant's answers."""
        from engine.study import people

        return published if people.people_of(self.spec).participants_see_references else []
