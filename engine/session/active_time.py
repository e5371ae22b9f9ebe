"""A session's active time: how long runners worked on it, not counting the gaps when none did.

A session's events fall into runner lifetimes: the first starts at session_started, each later
one at a session_resumed (a resume after a crash, a kill or a stop). A lifetime lasts from its
first event to its last; the time between a dead runner's last event and the next resume is
nobody's. A study's time limit per session (SessionConfig.time_limit_s) counts this active time,
so a participant whose server was killed loses no time to it.

A study may also stop the clock while its participant has the session paused (`[people]
clock_runs_when_paused = false`, recorded in the session's config as
extra.study.clock_runs_when_paused): then a pause, from its `paused` event to the `resumed` (or the
next runner's session_resumed, or the end) is not active time either. The runner enforces the time
limit and the participant's console shows the time left from the same ActiveClock.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from engine.session import events as ev

_PAUSE_ENDS = (ev.RESUMED, ev.SESSION_FINISHED)


def clock_runs_when_paused(config: Mapping[str, Any] | None) -> bool:
    """A session's setting (its recorded config): True unless its study stops the clock when paused."""
    extra = (config or {}).get("extra")
    study = extra.get("study") if isinstance(extra, Mapping) else None
    return not (isinstance(study, Mapping) and study.get("clock_runs_when_paused") is False)


def lifetimes(events: Iterable[ev.Event]) -> list[tuple[float, float]]:
    """(first ts, last ts) of each runner lifetime, in order."""
    out: list[tuple[float, float]] = []
    for event in events:
        if event.kind == ev.SESSION_RESUMED or not out:
            out.append((event.ts, event.ts))
        else:
            out[-1] = (out[-1][0], event.ts)
    return out


def active_seconds(events: Iterable[ev.Event], *, now: float | None = None, count_paused: bool = True) -> float:
    """Seconds of active time; with `now`, the last lifetime is taken to be still running until then;
    `count_paused=False`: time paused is not active either."""
    clock = ActiveClock(count_paused=count_paused)
    for event in events:
        clock.add(event)
    return clock.seconds(now=now)


def time_left(events: Iterable[ev.Event], limit_s: float | None, *, now: float,
              count_paused: bool = True) -> float | None:
    """Seconds left of a time limit (never below 0), or None without a limit."""
    if not limit_s:
        return None
    return max(0.0, float(limit_s) - active_seconds(events, now=now, count_paused=count_paused))


class ActiveClock:
    """Active time kept up to date event by event (the runner's time limit, a console following a
    live session). `count_paused`: whether time paused counts (see the module docstring)."""

    def __init__(self, *, count_paused: bool = True) -> None:
        self.count_paused = count_paused
        self.closed = 0.0                   # lifetimes before the current one
        self.first: float | None = None     # the current lifetime's first and last event
        self.last: float | None = None
        self.paused_total = 0.0             # time paused in the current lifetime, pauses that ended
        self.paused_since: float | None = None

    def add(self, event: ev.Event) -> None:
        if event.kind == ev.SESSION_RESUMED and self.first is not None and self.last is not None:
            self._end_pause(self.last)      # a pause ends with its runner: the gap after is nobody's anyway
            self.closed += self.last - self.first - self._uncounted()
            self.first, self.paused_total = None, 0.0
        if self.first is None:
            self.first = event.ts
        self.last = event.ts
        if event.kind == ev.PAUSED and self.paused_since is None:
            self.paused_since = event.ts
        elif event.kind in _PAUSE_ENDS:
            self._end_pause(event.ts)

    def _end_pause(self, ts: float) -> None:
        if self.paused_since is not None:
            self.paused_total += max(0.0, ts - self.paused_since)
            self.paused_since = None

    def _uncounted(self, until: float | None = None) -> float:
        """Paused time of the current lifetime that does not count (none when pauses count)."""
        if self.count_paused:
            return 0.0
        open_pause = max(0.0, until - self.paused_since) if self.paused_since is not None and until else 0.0
        return self.paused_total + open_pause

    @property
    def paused(self) -> bool:
        return self.paused_since is not None

    def seconds(self, *, now: float | None = None) -> float:
        """Active time; with `now` (the runner is alive), its lifetime runs on until now."""
        if self.first is None or self.last is None:
            return self.closed
        end = max(self.last, now if now is not None else self.last)
        return max(0.0, self.closed + end - self.first - self._uncounted(end))
