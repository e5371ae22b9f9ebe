"""Waiting, in a Pilot test, for a screen's one-off reads in thread workers (the reference rows)
to finish and their messages to be handled, through Textual's public worker API."""
from __future__ import annotations

from typing import Any

# worker groups that read once and end (not the followers)
ONE_OFF_READS = ("references", "sessions-read", "replay-read")


async def reads_done(app: Any, pilot: Any) -> None:
    """Wait until every one-off read worker has finished, then let its message be handled."""
    for _ in range(3):   # a handled message can start another read (the first events reload the rows)
        pending = [w for w in app.workers if w.group in ONE_OFF_READS]
        if pending:
            await app.workers.wait_for_complete(pending)
        await pilot.pause(0.05)
