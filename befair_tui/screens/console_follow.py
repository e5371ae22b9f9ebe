"""A console's part for a session as it runs (the researcher's live console, a participant's):
a thread worker follows the event log (befair_tui.polling.EventLogFollower), another reads the
session's row for its heartbeat every RUNNER_CHECK seconds; both only post messages, and this
screen folds them through the controller and draws what it decides. A clock ticks twice a second
for the running node's time."""
from __future__ import annotations

import subprocess

from textual import on, work
from textual.worker import get_current_worker

from engine.session import events as ev
from engine.session.store import SessionStore

from befair_tui.console.controller import ConsoleController
from befair_tui.messages import EventsArrived, FollowProblem, HeartbeatRead
from befair_tui.polling import ENDED_POLL, IDLE_POLL, EventLogFollower, refresh_every
from befair_tui.screens.console_view import ConsoleView
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.search_tree import SearchTree

RUNNER_CHECK = 0.9  # seconds between two reads of the session row's heartbeat (every other tick)
TICK = 0.5


class FollowedSession(ConsoleView):
    def __init__(self, store: SessionStore, session_id: str, ctl: ConsoleController, *, poll_interval: float,
                 proc: subprocess.Popen[bytes] | None = None) -> None:
        super().__init__(store, session_id, ctl)
        self._follower = EventLogFollower(store, session_id, self.post_message, proc=proc,
                                          poll_interval=poll_interval)

    def on_mount(self) -> None:
        self.follow()
        self.read_heartbeat()
        self.set_interval(TICK, self._tick)

    @work(thread=True, exclusive=True, group="follow", name="follow-session")
    def follow(self) -> None:
        """Poll the event log (polling.EventLogFollower); never touches widgets, only posts messages."""
        self._follower.run(get_current_worker(), self.ctl.state.last_seq)

    @work(thread=True, exclusive=True, group="heartbeat", name="read-heartbeat")
    def read_heartbeat(self) -> None:
        """Read the session's row (its heartbeat) every RUNNER_CHECK seconds; only posts messages.
        The first read is at once, so that a runner already gone is said without waiting."""
        sid, worker = self.session_id, get_current_worker()

        def read(store: SessionStore) -> HeartbeatRead:
            return HeartbeatRead(sid, store.session(sid))

        try:
            self.post_message(read(self.store))
        except Exception as exc:  # noqa: BLE001 - not created yet: the next read tells
            self.post_message(HeartbeatRead(sid, None, str(exc)))
        refresh_every(worker, RUNNER_CHECK, self.store, read, lambda error: HeartbeatRead(sid, None, error),
                      self.post_message, repeat_errors=False)

    @on(HeartbeatRead)
    def _on_heartbeat(self, message: HeartbeatRead) -> None:
        if message.session_id == self.session_id and message.row is not None and self.ctl.heartbeat(message.row):
            self.check_runner()

    def check_runner(self) -> str | None:
        """Judge the runner from the last heartbeat (each console says it its own way)."""
        raise NotImplementedError

    @on(FollowProblem)
    def _on_problem(self, message: FollowProblem) -> None:
        if message.reason and (message.session_id == self.session_id):
            self.notify(message.reason, title="Session", severity="error", timeout=15)

    @on(EventsArrived)
    def _on_events(self, message: EventsArrived) -> None:
        if message.session_id == self.session_id:
            self.ingest(message.events)

    def ingest(self, events: list[ev.Event]) -> None:
        """Fold a batch of events and update only what changed."""
        redraw = self.ctl.ingest(events)
        if redraw is None:
            return
        if redraw.check_runner:
            self.check_runner()   # the heartbeat came before the events: judge it now, not a tick later
        self.apply(redraw)
        self._follower.longest_wait = ENDED_POLL if redraw.ended else IDLE_POLL
        summary = self.key_for("summary")
        if redraw.just_ended and summary:
            self.notify(f"The session has ended: {summary} shows its summary (the final choice with its intervals, "
                        "what each guidance changed).", title="Session summary", timeout=12)

    def _tick(self) -> None:
        ctl, state = self.ctl, self.ctl.state
        self._frame = int(ctl.clock() * 2)
        if state.running_node is not None and ctl.runner != "stopped":
            now = ctl.now()
            self.query_one(SearchTree).spin(state, self._frame, now)
            self.query_one(NodeDetail).sync_running(state, now)
        if state.status in ("running", "paused"):
            self._sync_status()
        if state.live_reply is not None:   # the side channel moves between two llm_stream events
            self.query_one(NodeDetail).sync_live(state)

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "follow")
