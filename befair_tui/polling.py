"""Thread workers that poll the database for the screens: the console's event-log follower and the
periodic refresher of the sessions, study and study-people screens.

They run on Textual thread workers, read on the worker's own connection, never touch widgets and
only post messages: the screen that receives them is the one owner of its state (Harlequin's way).
"""
from __future__ import annotations

import subprocess
import time
from collections.abc import Callable

from textual.message import Message
from textual.worker import Worker

from engine.session.store import SessionStore

from befair_tui.launch import log_tail
from befair_tui.messages import EventsArrived, FollowProblem

# Polling the event log: every poll_interval while events arrive, then slower and slower while
# nothing happens, up to IDLE_POLL (a live session) or ENDED_POLL (a finished one, which only a
# resume elsewhere can wake): an idle console costs next to nothing.
IDLE_POLL = 0.6
ENDED_POLL = 2.0
BATCH = 5_000  # events read at once

Post = Callable[[Message], object]


def pause(worker: Worker[None], seconds: float, *, step: float) -> bool:
    """Sleep `seconds` in slices of `step`, so that leaving the screen stops the worker promptly.
    False when the worker was cancelled meanwhile."""
    deadline = time.monotonic() + seconds
    while not worker.is_cancelled:
        left = deadline - time.monotonic()
        if left <= 0:
            return True
        time.sleep(min(left, step))
    return False


def refresh_every(worker: Worker[None], seconds: float, store: SessionStore, read: Callable[[SessionStore], Message],
                  failed: Callable[[str], Message], post: Post, *, repeat_errors: bool = True) -> None:
    """Every `seconds` until the worker is cancelled: `read` on `store` (this thread's connection)
    and post its message; a read that raises posts `failed(error)` instead and is tried again next
    time (`repeat_errors=False`: the same error is said once). Closes the store's connection last."""
    last_error: str | None = None
    try:
        while pause(worker, seconds, step=0.1):
            try:
                message = read(store)
            except Exception as exc:  # noqa: BLE001 - said on screen, tried again
                if repeat_errors or str(exc) != last_error:
                    post(failed(str(exc)))
                last_error = str(exc)
                continue
            last_error = None
            post(message)
    finally:
        store.close()


class EventLogFollower:
    """Reads one session's event log from a thread worker and posts the new events in batches
    (EventsArrived), or what went wrong (FollowProblem)."""

    def __init__(self, store: SessionStore, session_id: str, post: Post, *,
                 proc: subprocess.Popen[bytes] | None, poll_interval: float) -> None:
        self.store = store
        self.session_id = session_id
        self.post = post
        self.proc = proc  # the session's process when this console started it
        self.poll_interval = poll_interval
        self.longest_wait = IDLE_POLL  # the screen raises it to ENDED_POLL once the session has ended
        self._warned_exit = False

    def run(self, worker: Worker[None], after: int) -> None:
        """Poll from event `after` until the worker is cancelled."""
        self._warned_exit = False
        wait = self.poll_interval
        while not worker.is_cancelled:
            try:
                batch = self.store.events(self.session_id, after, limit=BATCH)
            except Exception as exc:  # noqa: BLE001 - report, keep polling
                self.post(FollowProblem(self.session_id, f"cannot read the session: {exc}"))
                time.sleep(1.0)
                continue
            if batch:
                after = batch[-1].seq
                self.post(EventsArrived(self.session_id, batch))
                wait = self.poll_interval
                if len(batch) == BATCH:
                    continue
            else:
                wait = self._idle(after, wait)
            pause(worker, wait, step=0.25)
        self.store.close()

    def _idle(self, after: int, wait: float) -> float:
        """Nothing new: say once why our own child exited without a word, and wait longer next
        time (a child still starting keeps the fast pace)."""
        proc = self.proc
        if proc is not None and not self._warned_exit:
            code = proc.poll()
            if code is not None:
                self._warned_exit = True
                time.sleep(self.poll_interval)
                if not self.store.events(self.session_id, after, limit=1):
                    self.post(self._exit_problem(code, after))
        if proc is None or proc.poll() is not None or after:
            return min(max(self.longest_wait, self.poll_interval), wait * 1.5)
        return wait

    def _exit_problem(self, code: int, after: int) -> FollowProblem:
        tail = log_tail(self.store.path, self.session_id)
        if after == 0:
            reason = f"the session process exited (code {code}) before it started"
        elif code != 0:
            reason = f"the session process exited with code {code}"
        else:
            return FollowProblem(self.session_id, "", fatal=False)
        return FollowProblem(self.session_id, reason + (f":\n{tail}" if tail else ""), fatal=True)
