"""A streaming reply, carried from the coder's thread to the live side channel and the runner's thread.

    relay = StreamRelay(live_reply.live_path(db, session_id))
    coder.on_stream, coder.on_progress = relay, relay.progress     # the coder's thread
    for role, stats in relay.take(): ...                            # the runner's: llm_stream events
"""
from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from engine.coders.llm.attempts import StreamStats
from engine.session import live_reply


STREAM_EVENT_INTERVAL = 2.0  # seconds between two stored llm_stream events of one call, at least
STREAM_EVENT_GROWTH = 0.2    # and at least this share of the time the call has streamed so far:
                             # a slow call of T seconds stores about 10 + 5.5 ln(T / 10) events, not T / 2


class StreamRelay:
    """Carries a streaming reply from the coder's thread: its text to the live side channel
    (engine.session.live_reply, never stored), its progress (characters, tokens, times) to the
    runner's thread, which owns the database connection and stores it as llm_stream events,
    at most one every STREAM_EVENT_INTERVAL seconds or STREAM_EVENT_GROWTH of the time streamed so
    far, whichever is longer, and the last one of each call."""

    def __init__(self, path: Path | None = None, interval: float = STREAM_EVENT_INTERVAL,
                 growth: float = STREAM_EVENT_GROWTH, clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self.path = path
        self.interval = interval
        self.growth = growth
        self.clock = clock
        self._began: dict[str, float] = {}             # role -> when its progress first came
        self.step = 0
        self._latest: dict[str, dict[str, Any]] = {}   # role -> progress not yet stored
        self._stored_at: dict[str, float] = {}
        self._stats: dict[str, dict[str, Any]] = {}    # role -> the latest progress (for the side channel)

    def __call__(self, role: str, text_so_far: str) -> None:  # the coder's thread
        if self.path is not None:
            with self._lock:
                stats = dict(self._stats.get(role) or {})
            live_reply.write(self.path, {"role": role, "step": self.step, "text": text_so_far, **stats})

    def progress(self, role: str, stats: StreamStats | Mapping[str, Any]) -> None:  # the coder's thread
        payload = stats.payload() if isinstance(stats, StreamStats) else dict(stats)
        with self._lock:
            self._latest[role] = self._stats[role] = payload
            self._began.setdefault(role, self.clock())

    def take(self) -> list[tuple[str, dict[str, Any]]]:  # the runner's thread
        now = self.clock()
        out = []
        with self._lock:
            for role, stats in list(self._latest.items()):
                wait = max(self.interval, self.growth * (now - self._began.get(role, now)))
                if now - self._stored_at.get(role, float("-inf")) >= wait:
                    out.append((role, stats))
                    self._stored_at[role] = now
                    del self._latest[role]
        return out

    def finish(self) -> list[tuple[str, dict[str, Any]]]:
        """The call ended: its last progress (if not stored yet); the side channel is cleared."""
        with self._lock:
            out = list(self._latest.items())
            self._latest, self._stored_at, self._stats, self._began = {}, {}, {}, {}
        if self.path is not None:
            live_reply.clear(self.path)
        return out


__all__ = ["STREAM_EVENT_GROWTH", "STREAM_EVENT_INTERVAL", "StreamRelay"]
