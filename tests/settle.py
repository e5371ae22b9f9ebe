"""Waiting, in a Pilot test, for a screen's one-off reads in thread workers (the reference rows,
the sessions table, a replay's events) to finish and their messages to be handled, through
Textual's public worker API."""
from __future__ import annotations

from typing import Any

from textual.worker import WorkerState

# worker groups that read once and end (not the followers)
ONE_OFF_READS = ("references", "sessions-read", "replay-read")
_UNDER_WAY = (WorkerState.PENDING, WorkerState.RUNNING)


async def reads_done(app: Any, pilot: Any, *, rounds: int = 400) -> None:
    """Wait until no one-off read worker is pending or running (a read cancelled by a newer one
    still ends), then let the messages they posted be handled."""
    for _ in range(rounds):
        if not any(w.group in ONE_OFF_READS and w.state in _UNDER_WAY for w in app.workers):
            break
        await pilot.pause(0.02)
    await pilot.pause(0.1)
    await pilot.pause()
