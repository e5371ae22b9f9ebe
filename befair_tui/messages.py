"""Messages the follow worker posts to the console screen (the one owner of widget state)."""
from __future__ import annotations

from typing import Any

from textual.message import Message

from engine.session.events import Event


class EventsArrived(Message):
    """A batch of new events for one session, in seq order.

    Bursts coalesce: when several batches wait in the queue, the earlier ones are merged into
    the latest (nothing is dropped), so the owner folds and re-renders once per burst.
    """

    def __init__(self, session_id: str, events: list[Event]) -> None:
        super().__init__()
        self.session_id = session_id
        self.events = events

    def can_replace(self, message: Message) -> bool:
        # Called on the earlier message with the next pending one; returning True drops
        # `self` and keeps `message`, so carry our events into it first.
        if isinstance(message, EventsArrived) and message.session_id == self.session_id:
            message.events = self.events + message.events
            return True
        return False


class FollowProblem(Message):
    """The follower could not read the session (missing, database error, runner died)."""

    def __init__(self, session_id: str, reason: str, fatal: bool = False) -> None:
        super().__init__()
        self.session_id = session_id
        self.reason = reason
        self.fatal = fatal


class SessionsRead(Message):
    """The sessions screen's refresher read the sessions table (rows annotated with trust markers)."""

    def __init__(self, rows: list[dict[str, Any]], error: str | None = None) -> None:
        super().__init__()
        self.rows = rows
        self.error = error


class BaselinesTraining(Message):
    """The background baseline training's progress, read from its log (`done`: it ended; `error`:
    why it failed)."""

    def __init__(self, text: str, *, finished: int = 0, done: bool = False, error: str | None = None) -> None:
        super().__init__()
        self.text = text
        self.finished = finished  # runs recorded in the database so far
        self.done = done
        self.error = error


class HeartbeatRead(Message):
    """The heartbeat worker read the session's row (`row`: None when it could not, `error` why)."""

    def __init__(self, session_id: str, row: dict[str, Any] | None, error: str | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.row = row
        self.error = error

    def can_replace(self, message: Message) -> bool:
        return isinstance(message, HeartbeatRead) and message.session_id == self.session_id


class ReferencesRead(Message):
    """The reference rows read for the console: baselines trained here, the published rows, and
    the session's level from its row (`error`: why they could not be read)."""

    def __init__(self, trained: list[dict[str, Any]], rows: list[dict[str, Any]], level: str,
                 error: str | None = None) -> None:
        super().__init__()
        self.trained, self.rows, self.level = trained, rows, level
        self.error = error


class FinishReasonRead(Message):
    """Why a participant's session ended, read from its events for the questions page."""

    def __init__(self, reason: str) -> None:
        super().__init__()
        self.reason = reason


class ReplayRead(Message):
    """A replayed session's events, read whole (`error`: why they could not be)."""

    def __init__(self, session_id: str, events: list[Event], error: str | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.events = events
        self.error = error


class ResumeChecked(Message):
    """A participant's session, checked off the UI thread: its place in the study's waiting line
    (`waiting`: why it waits, or None), whether a runner was started for it, and why not."""

    def __init__(self, waiting: str | None, started: bool, error: str | None) -> None:
        super().__init__()
        self.waiting, self.started, self.error = waiting, started, error


class ReportWritten(Message):
    """The session's report page was written (`path`), or why not (`error`)."""

    def __init__(self, path: str | None, error: str | None) -> None:
        super().__init__()
        self.path, self.error = path, error
