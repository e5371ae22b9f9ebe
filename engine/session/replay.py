"""Replay: stream a session's events again, and step through them on a timeline.

`replay(events, speed, sink)` calls `sink(event)` for each event with the original gaps between
event timestamps divided by `speed` (1.0 = real time, 10.0 = ten times faster, None = as fast as
possible). Each *scaled* gap is capped at `max_gap` seconds (default 2 s, `MAX_GAP_S`), so an
hour-long session with long training runs stays watchable: quiet stretches shrink to a short
pause while bursts of events keep their rhythm. Waits are scheduled against a monotonic clock
from the start (no drift from slow sinks); `stop` (a threading.Event) ends a replay promptly.

`Timeline(events)` is the replay screen's model: a position (how many events have been
applied), stepping forward and back, jumping to a node's creation, and `state_at(position)`
via the reducer, incremental when moving forward and from the nearest checkpoint when moving
back.
"""
from __future__ import annotations

import copy
import threading
import time
from bisect import bisect_right
from itertools import pairwise
from collections.abc import Callable, Iterable, Sequence

from engine.session import events as ev
from engine.session.state import SessionState, apply, new_state

MAX_GAP_S = 2.0


def scaled_gaps(events: Sequence[ev.Event], speed: float | None, max_gap: float | None = MAX_GAP_S) -> list[float]:
    """The wait before each event: 0 for the first, then (ts_i - ts_{i-1}) / speed capped at
    max_gap (negative gaps from clock steps count as 0)."""
    if not events:
        return []
    gaps = [0.0]
    for prev, cur in pairwise(events):
        if not speed or speed <= 0 or speed == float("inf"):
            gaps.append(0.0)
            continue
        gap = max(0.0, cur.ts - prev.ts) / speed
        if max_gap is not None:
            gap = min(gap, max_gap)
        gaps.append(gap)
    return gaps


def replay(
    events: Iterable[ev.Event],
    speed: float | None,
    sink: Callable[[ev.Event], object],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], object] = time.sleep,
    stop: threading.Event | None = None,
    max_gap: float | None = MAX_GAP_S,
) -> int:
    """Deliver events to `sink` with their original timing scaled by `speed`; returns how many
    were delivered (fewer than given when `stop` was set)."""
    events = list(events)
    gaps = scaled_gaps(events, speed, max_gap)
    delivered = 0
    start = clock()
    due = 0.0

    def wait(delay: float) -> None:
        if delay <= 0:
            return
        if stop is not None and sleep is time.sleep:
            stop.wait(delay)
        else:
            sleep(delay)

    for event, gap in zip(events, gaps, strict=True):
        if stop is not None and stop.is_set():
            break
        due += gap
        wait(start + due - clock())
        if stop is not None and stop.is_set():
            break
        sink(event)
        delivered += 1
    return delivered


class Timeline:
    """A session's events with a cursor. `position` is the number of events applied
    (0 = before the first event, len(events) = the whole session).

    The state returned by `state` / `state_at` belongs to the timeline: treat it as read-only;
    it may change on the next move (moving forward applies events to it in place).
    """

    def __init__(self, events: Iterable[ev.Event], *, checkpoint_every: int = 500, session_id: str = ""):
        self.events: list[ev.Event] = list(events)
        self.session_id = session_id or (self.events[0].session_id if self.events else "")
        self.checkpoint_every = max(1, checkpoint_every)
        self.position = 0
        self._state = new_state(self.session_id)
        self._applied = 0  # events folded into self._state
        self._checkpoints: dict[int, SessionState] = {0: copy.deepcopy(self._state)}
        self._node_pos = {
            int(e.payload["node_id"]): i + 1 for i, e in enumerate(self.events) if e.kind == ev.NODE_CREATED
        }
        self._node_marks = sorted(self._node_pos.values())

    def __len__(self) -> int:
        return len(self.events)

    # -- state -----------------------------------------------------------------------------
    @property
    def state(self) -> SessionState:
        return self.state_at(self.position)

    def state_at(self, position: int) -> SessionState:
        position = self._clamp(position)
        if position < self._applied:
            base = max(p for p in self._checkpoints if p <= position)
            self._state = copy.deepcopy(self._checkpoints[base])
            self._applied = base
        while self._applied < position:
            apply(self._state, self.events[self._applied])
            self._applied += 1
            if self._applied % self.checkpoint_every == 0 and self._applied not in self._checkpoints:
                self._checkpoints[self._applied] = copy.deepcopy(self._state)
        return self._state

    # -- moving ----------------------------------------------------------------------------
    def seek(self, position: int) -> SessionState:
        self.position = self._clamp(position)
        return self.state_at(self.position)

    def step(self, n: int = 1) -> SessionState:
        """Move n events forward (negative: back)."""
        return self.seek(self.position + n)

    def to_start(self) -> SessionState:
        return self.seek(0)

    def to_end(self) -> SessionState:
        return self.seek(len(self.events))

    def jump_to_node(self, node_id: int) -> SessionState:
        """Move to just after the node's node_created event."""
        if node_id not in self._node_pos:
            raise KeyError(f"node {node_id} is not in this session")
        return self.seek(self._node_pos[node_id])

    def next_node(self) -> SessionState:
        """Move to the next node's creation (or the end)."""
        i = bisect_right(self._node_marks, self.position)
        return self.seek(self._node_marks[i] if i < len(self._node_marks) else len(self.events))

    def prev_node(self) -> SessionState:
        """Move to the previous node's creation (or the start)."""
        i = bisect_right(self._node_marks, self.position - 1) - 1
        return self.seek(self._node_marks[i] if i >= 0 else 0)

    # -- info ------------------------------------------------------------------------------
    @property
    def current_event(self) -> ev.Event | None:
        """The last event applied (None at the start)."""
        return self.events[self.position - 1] if self.position else None

    @property
    def at_end(self) -> bool:
        return self.position >= len(self.events)

    def elapsed(self, position: int | None = None) -> float:
        """Session seconds from the first event to the event at `position`."""
        position = self.position if position is None else self._clamp(position)
        if not self.events or position == 0:
            return 0.0
        return self.events[position - 1].ts - self.events[0].ts

    def position_at_time(self, seconds: float) -> int:
        """The position after every event within `seconds` of the first one."""
        if not self.events:
            return 0
        t0 = self.events[0].ts
        return bisect_right([e.ts - t0 for e in self.events], seconds)

    def _clamp(self, position: int) -> int:
        return max(0, min(int(position), len(self.events)))
