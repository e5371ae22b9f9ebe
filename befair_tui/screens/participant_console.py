"""A participant's console: their own live session with steering only.

The controller is composed with `Following` (the session's event log) and a `Participant` at the
keys (befair_tui.console.modes): the keys a study allows, each command through
engine.study.people.steer, which refuses (and records) one for any session but this participant's
own. Its bindings are its own (no sessions screen, stop, added steps, runner resume, quit). A
runner that stopped (the server or the machine was killed) is resumed here without asking; when
the session ends (its budget, its time limit, a failure or a researcher's stop) the app moves on
to the questions.
"""
from __future__ import annotations

import time
from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult

from engine.agent.commands import guidance_budget
from engine.session import events as ev
from engine.session import views
from engine.session.active_time import ActiveClock, clock_runs_when_paused
from engine.session.store import SessionStore
from engine.study import people
from engine.study.people import Position
from engine.study.pool import log_dir
from engine.study.spec import StudySpec

from befair_tui.bindings import CHOOSE_CRITERION, EXPAND, GUIDE, PAUSE, PRUNE, RESUME, TOGGLE_SPLIT, detail_tab_bindings
from befair_tui.console.controller import ConsoleController
from befair_tui.console.modes import Following, Participant
from befair_tui.messages import ResumeChecked
from befair_tui.navigation import participant_flow
from befair_tui.screens.console_follow import FollowedSession
from befair_tui.screens.console_steering import SteeringKeys
from befair_tui.widgets.guidance_input import GuidanceInput
from befair_tui.widgets.participant_bar import ParticipantBar
from befair_tui.widgets.status_bar import StatusBar

RESPAWN_AFTER = 8.0  # seconds between two attempts to resume an interrupted session
MAX_ATTEMPTS = 5


class ParticipantConsoleScreen(FollowedSession, SteeringKeys, inherit_bindings=False):
    BINDINGS = [PAUSE, RESUME, GUIDE, EXPAND, PRUNE, TOGGLE_SPLIT, CHOOSE_CRITERION, *detail_tab_bindings()]

    def __init__(self, store: SessionStore, session_id: str, *, position: Position, spec: StudySpec,
                 participant: str, poll_interval: float = 0.15, clock: Callable[[], float] | None = None) -> None:
        ctl = ConsoleController(session_id, Following(store.path, session_id, clock=clock),
                                Participant(store, spec, participant))
        super().__init__(store, session_id, ctl, poll_interval=poll_interval)
        self.position, self.spec, self.participant = position, spec, participant
        self.active = ActiveClock()
        self.ended = False
        self._respawned = float("-inf")
        self._attempts = 0
        self._note = ""

    def compose_bottom(self) -> ComposeResult:
        yield GuidanceInput(id="guidance")
        yield ParticipantBar(id="participant-bar")

    # -- following ------------------------------------------------------------------------------
    def ingest(self, events: list[ev.Event]) -> None:
        for event in events:
            self.active.add(event)
        super().ingest(events)
        # the time limit as the runner counts it: paused time too, unless the session's study says not
        self.active.count_paused = clock_runs_when_paused(self.ctl.state.config)
        self._check_end()

    def _check_end(self) -> None:
        state = self.ctl.state
        over = state.status in people.OVER or (state.status == "stopped" and state.stop_requested)
        if over and not self.ended:
            self.ended = True
            self.notify("This session has ended; the questions follow.", title="Session", timeout=4)
            self.set_timer(1.5, participant_flow(self.app).advance)

    def _tick(self) -> None:
        super()._tick()
        state = self.ctl.state
        interrupted = state.status == "stopped" and not state.stop_requested
        if interrupted or state.status == "new":
            self._resume_if_needed()
        self._sync_bar()

    def check_runner(self) -> str | None:
        """The heartbeat as the heartbeat worker last read it; a stopped runner is resumed here
        (the participant has no key for it)."""
        change = self.ctl.check_runner()
        if change is None:
            return self.ctl.runner  # not read yet, or not created yet: the worker is setting up
        if change.stopped:
            self._resume_if_needed()
        self._sync_status()
        self._sync_bar()   # the bar says the runner's state too (a restart's note)
        return change.status

    def _resume_if_needed(self) -> None:
        mono = time.monotonic()
        if mono - self._respawned < RESPAWN_AFTER:
            return
        self._respawned = mono
        self.resume_in_background()

    @work(thread=True, exclusive=True, group="resume", name="resume-session")
    def resume_in_background(self) -> None:
        """The study's waiting line and, when a place is free, a runner for this session: database
        reads and a process start, off the UI thread; only posts ResumeChecked."""
        error: str | None = None
        started = False
        try:
            waiting = people.waiting_line(self.store, self.spec, self.position.cell)
            if waiting is None:
                started, error = participant_flow(self.app).start_runner_if_needed()
        except Exception as exc:  # noqa: BLE001 - said on screen; tried again after RESPAWN_AFTER
            waiting, error = None, str(exc)
        finally:
            self.store.close()   # this thread's connection
        self.post_message(ResumeChecked(waiting, started, error))

    @on(ResumeChecked)
    def _on_resume_checked(self, message: ResumeChecked) -> None:
        if message.error:
            self.notify(f"Cannot resume the session: {message.error}", severity="error", timeout=15)
        waiting = message.waiting
        if waiting is not None:  # the study's cap on sessions at once: it starts here once a place is free
            if not self._note.startswith("waiting"):
                self.notify(waiting[0].upper() + waiting[1:] + ".", title="Session", timeout=15)
            self._note, self._attempts = waiting, 0
            return
        self._attempts += 1
        if self._attempts > MAX_ATTEMPTS:
            if self._attempts == MAX_ATTEMPTS + 1:
                self._note = "the session cannot start: please tell the researcher"
                self.notify(f"The session could not be started {MAX_ATTEMPTS} times; please tell the researcher "
                            f"(its log: {log_dir(self.store.path, self.spec.name)}).", severity="error", timeout=30)
            return
        if message.started and self.ctl.state.status != "new":
            self._note = "the session was interrupted; it is resuming…"
            self.notify("The agent was interrupted (the server or the machine restarted); it is resuming where "
                        "it was. Nothing recorded is lost.", title="Session", timeout=8)
        elif self.ctl.state.status == "new":
            self._note = "the session is starting…"

    def _sync_status(self) -> None:
        ctl, state = self.ctl, self.ctl.state
        self._sync_guidance_input()
        runner = None if ctl.runner == "stopped" else ctl.runner  # no "u: resume": it resumes by itself
        self.query_one(StatusBar).sync(state, read_only=False, now=ctl.clock(), replay=None, runner=runner,
                                       steps=False, paused_clock=(paused := self.paused_clock()),
                                       elapsed_clock=paused is None)   # a time limit: the bar's time left
        self.scoreboard.set_unsandboxed(state.unsandboxed)
        self.refresh_bindings_on((state.status, ctl.runner, state.stop_requested))

    def _sync_guidance_input(self) -> None:
        box, state = self._guidance, self.ctl.state
        if box is None:
            return
        budget = guidance_budget(state)
        spent = budget is not None and len(state.guidance) >= budget
        closed = views.ended(state) or spent
        if closed != box.disabled:
            box.disabled = closed
            box.placeholder = ("your guidance budget for this session is spent" if spent and not self.ended else
                               "this session has ended" if closed else GuidanceInput.PLACEHOLDER)

    def _sync_bar(self) -> None:
        state, runner = self.ctl.state, self.ctl.runner
        alive = runner == "alive" and state.status in ("running", "paused")
        left = None
        if self.spec.time_limit:
            left = max(0.0, self.spec.time_limit - self.active.seconds(now=self.ctl.clock() if alive else None))
        budget = guidance_budget(state)
        if runner == "alive" and self._note.startswith("the session was"):
            self._note = ""
            self._attempts = 0
        if state.status in ("running", "paused") and self._note == "the session is starting…":
            self._note = ""
        cell = self.position.cell
        self.query_one(ParticipantBar).sync(
            number=self.position.number, total=self.position.total, level=cell.level.label if cell else "",
            time_left=left, guidance_left=None if budget is None else max(0, budget - len(state.guidance)),
            note=self._note, steps=views.step_count(state))

    def paused_clock(self) -> bool | None:
        """Whether this session's time limit runs on while it is paused (None: it has no time limit)."""
        if not (self.ctl.state.config.get("time_limit_s") or self.spec.time_limit):
            return None
        return clock_runs_when_paused(self.ctl.state.config)
