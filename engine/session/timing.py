"""A session's active time: how long runners worked on it, not counting the gaps when none did.

A session's events fall into runner lifetimes: the first starts at session_started, each later
one at a session_resumed (a resume after a crash, a kill or a stop). A lifetime lasts from its
first event to its last; the time between a dead runner's last event and the next resume is
nobody's. A study's time limit per session (SessionConfig.time_limit_s) counts this active time,
so a participant whose server was killed loses no time to it.
"""
from __future__ import annotations

from collections.abc import Iterable

from engine.session import events as ev


def lifetimes(events: Iterable[ev.Event]) -> list[tuple[float, float]]:
    """(first ts, last ts) of each runner lifetime, in order."""
    out: list[tuple[float, float]] = []
    for event in events:
        if event.kind == ev.SESSION_RESUMED or not out:
            out.append((event.ts, event.ts))
        else:
            out[-1] = (out[-1][0], event.ts)
    return out


def active_seconds(events: Iterable[ev.Event], *, now: float | None = None) -> float:
    """Seconds of active time; with `now`, the last lifetime is taken to be still running until then."""
    spans = lifetimes(events)
    total = sum(last - first for first, last in spans[:-1])
    if spans:
        first, last = spans[-1]
        total += max(last, now if now is not None else last) - first
    return max(0.0, total)


def time_left(events: Iterable[ev.Event], limit_s: float | None, *, now: float) -> float | None:
    """Seconds left of a time limit (never below 0), or None without a limit."""
    if not limit_s:
        return None
    return max(0.0, float(limit_s) - active_seconds(events, now=now))


class ActiveClock:
    """`active_seconds` kept up to date event by event (a console following a live session)."""

    def __init__(self) -> None:
        self.closed = 0.0
        self.first: float | None = None
        self.last: float | None = None

    def add(self, event: ev.Event) -> None:
        if event.kind == ev.SESSION_RESUMED and self.first is not None and self.last is not None:
            self.closed += self.last - self.first
            self.first = None
        if self.first is None:
            self.first = event.ts
        self.last = event.ts

    def seconds(self, *, now: float | None = None) -> float:
        """Active time; with `now` (the runner is alive), its lifetime runs on until now."""
        if self.first is None or self.last is None:
            return self.closed
        return self.closed + max(self.last, now if now is not None else self.last) - self.first
