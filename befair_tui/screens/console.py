"""The console: the researcher's screen on a live, headless-elsewhere, resumed or imported session.

It only reads events and writes steering commands. What it decides is the controller's
(befair_tui.console.controller, composed with `Following` the session's event log and the
`Researcher` at the keys); this screen is ConsoleView (the widgets) with the parts it needs:
following the log (console_follow), the steering keys (console_steering), the expert baselines'
training (console_baselines); its own are the researcher's keys (stop, added steps, what the agent
is shown, resuming a stopped runner, the sessions screen) and how it says a runner stopped.
"""
from __future__ import annotations

import subprocess
from collections.abc import Callable

from textual.app import ComposeResult

from engine.session import feedback, views
from engine.session.store import SessionStore

from befair_tui.console.controller import ConsoleController
from befair_tui.console.modes import Following, Researcher
from befair_tui.navigation import navigator
from befair_tui.screens.console_baselines import ExpertBaselines
from befair_tui.screens.console_follow import FollowedSession
from befair_tui.screens.console_keys import CONSOLE_BINDINGS
from befair_tui.screens.console_steering import SteeringKeys
from befair_tui.widgets.guidance_input import GuidanceInput
from befair_tui.widgets.status_bar import StatusBar


class ConsoleScreen(FollowedSession, SteeringKeys, ExpertBaselines):
    BINDINGS = [*CONSOLE_BINDINGS]   # every key of the console (ConsoleView's): this one can steer with all

    def __init__(self, store: SessionStore, session_id: str, *, proc: subprocess.Popen[bytes] | None = None,
                 poll_interval: float = 0.15, clock: Callable[[], float] | None = None) -> None:
        ctl = ConsoleController(session_id, Following(store.path, session_id, clock=clock, proc=proc),
                                Researcher(store))
        super().__init__(store, session_id, ctl, poll_interval=poll_interval, proc=proc)

    def compose_bottom(self) -> ComposeResult:
        yield GuidanceInput(id="guidance")

    # -- is anything still running this session? ------------------------------------------
    def check_runner(self) -> str | None:
        """The session's heartbeat, as the heartbeat worker last read it, and, when the runner is
        gone (kill -9, crash, a closed machine), say so instead of a ticking clock."""
        change = self.ctl.check_runner()
        if change is None:
            return self.ctl.runner  # not read yet, or not created yet: keep what we knew
        if change.changed:
            if change.stopped:
                self.notify("Nothing is running this session any more: its runner process was killed or "
                            "crashed. Everything recorded is kept; press u to resume it.",
                            title="Runner stopped", severity="error", timeout=20)
            elif change.back:
                self.notify("The session's runner is running again.", title="Runner", timeout=6)
            self._sync_status()
        return change.status

    def _sync_status(self) -> None:
        ctl, state = self.ctl, self.ctl.state
        self._sync_guidance_input()
        self.query_one(StatusBar).sync(state, read_only=False, now=ctl.clock(), replay=None, runner=ctl.runner,
                                       criterion=ctl.view_criterion, live=ctl.live_reply())
        board = self.scoreboard
        board.set_unsandboxed(state.unsandboxed)
        self.refresh_bindings_on((state.status, ctl.runner, state.stop_requested, board.can_baselines,
                                  board.no_baselines(), self._training is None))

    def _sync_guidance_input(self) -> None:
        """Guidance only reaches a session that can still take it: say so instead of failing later."""
        box, state = self._guidance, self.ctl.state
        if box is None:
            return
        closed = views.ended(state)
        if closed != box.disabled:
            box.disabled = closed
            resumable = "" if state.status == "finished" else " (resume it from Sessions, l)"
            box.placeholder = (f"session {state.status}: guidance is closed{resumable}"
                               if closed else GuidanceInput.PLACEHOLDER)

    # -- the researcher's own keys ----------------------------------------------------------
    def action_stop(self) -> None:
        from befair_tui.screens.confirm import ConfirmModal

        def done(ok: bool | None) -> None:
            if ok:
                self._command("stop", {"interrupt": True}, note="Stop requested.")

        self.app.push_screen(
            ConfirmModal("Stop this session? The running step is interrupted; everything so far is kept.",
                         yes="Stop session", no="Keep running"), done)

    def action_add_steps(self) -> None:
        from befair_tui.screens.add_steps import AddStepsModal

        state = self.ctl.state
        base = max(state.budget, state.agent_steps)

        def done(n: int | None) -> None:
            if n:
                now = self.ctl.state
                steps = max(now.budget, now.agent_steps) + n
                self._command("set_budget", {"steps": steps}, note=f"Step budget raised by {n} to {steps}.")

        self.app.push_screen(AddStepsModal(base, state.agent_steps), done)

    def action_choose_feedback(self) -> None:
        """What the agent is shown of befair's measurements: a recorded steering command."""
        from befair_tui.screens.feedback import FeedbackModal

        current = feedback.current_feedback(self.ctl.state)

        def done(value: str | None) -> None:
            if value is None or value == current:
                return
            self._command("set_feedback", {"feedback": value},
                          note=f"From the next step the agent is shown {feedback.FEEDBACK_WORDS[value]}.")

        self.app.push_screen(FeedbackModal(current, live=True), done)

    def action_resume_runner(self) -> None:
        """Start `befair resume SESSION --headless` detached (launch.resume_argv) and follow it."""
        if self.check_action("resume_runner", ()) is not True:
            self.notify("This session's runner is not stopped; nothing to resume.", severity="warning")
            return
        navigator(self.app).resume_session(self.session_id)

    def action_sessions(self) -> None:
        navigator(self.app).action_open_sessions()
