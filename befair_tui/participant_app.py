"""The participant's app: one person's way through a study with people, and nothing else.

What each browser tab of `befair serve --study NAME` runs (and `befair participate`): the
participant id (from the URL or a form), the study's instructions and consent text, the
participant fields, then each of their cells in their counterbalanced order: a page that says
what comes, the session live in a console with steering only (pause, guidance, expand, prune),
the spec's questions when it ends, and a closing page. No sessions screen, no setup, no delete,
export, replay, unblinding or settings: the screens that do those are not in this app.

Where the participant is comes from the database alone (engine.study.people.where), so a closed
tab, a second tab or a restarted server all find the same place. The tab says every few seconds
that it is open (engine.session.participants.touch): the researcher's grid shows who is where.

An id opens nothing without its link's code (engine.study.links). One tab steers: signing in makes
this one the participant's live tab (`tab_opened`); when another takes over, this one says so
and steers no more until the participant takes it back here.
"""
from __future__ import annotations

import secrets
import subprocess
import time
from collections.abc import Callable, Iterable
from functools import partial
from pathlib import Path

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from engine.errors import BefairError
from engine.session import participants as log
from engine.session.store import SessionStore
from engine.study import grid, links, people
from engine.study.spec import StudySpec

PRESENCE_S = 3.0  # seconds between two "this tab is open" writes


class ParticipantApp(App[None], inherit_bindings=False):  # no Ctrl+Q: a participant closes the tab
    CSS_PATH = "befair.tcss"
    TITLE = "befair · study"
    BINDINGS = [Binding("question_mark,f1", "help", "Help", id="participant-help", key_display="?")]

    def __init__(self, db: Path | str, study: str, *, participant: str | None = None, code: str | None = None,
                 tab: str | None = None, via: str = "link", poll_interval: float = 0.15,
                 clock: Callable[[], float] | None = None) -> None:
        super().__init__()
        self.db_path = Path(db)
        self.study = study
        self.participant = (participant or "").strip() or None
        self.code = code
        self.tab = tab or f"terminal-{secrets.token_urlsafe(6)}"   # befair serve gives each browser tab its id
        self.via = via
        self.taken_over = False
        self.poll_interval = poll_interval
        self.clock = clock
        self.procs: dict[str, subprocess.Popen[bytes]] = {}   # cell workers started from this tab
        self._store: SessionStore | None = None
        self._spec: StudySpec | None = None
        self.position: people.Position | None = None

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            self._store = SessionStore(self.db_path)
            self._store.tab = self.tab  # every command this tab issues names it
        return self._store

    @property
    def spec(self) -> StudySpec:
        if self._spec is None:
            self._spec = grid.stored_spec(self.store, self.study)
            people.people_of(self._spec)
        return self._spec

    # -- the way through the study ----------------------------------------------------------
    def on_mount(self) -> None:
        from befair_tui.screens.participant_signin import SignInScreen

        try:
            self.sub_title = f"study {self.spec.name}"
        except BefairError as exc:
            self.exit(message=str(exc), return_code=2)
            return
        problem, given = None, self.participant
        if self.participant:
            try:
                self.participant = links.check_participant(self.store, self.spec, self.participant, self.code)
            except BefairError as exc:
                problem, self.participant = str(exc), None
        if self.participant is None:
            self.push_screen(SignInScreen(self.spec.name, problem=problem, participant=given))
            return
        self._signed_in(self.via)

    def sign_in(self, participant: str, code: str) -> str | None:
        """The id and code typed in the form: None when the code is that participant's, else what is wrong."""
        try:
            self.participant = links.check_participant(self.store, self.spec, participant, code)
        except BefairError as exc:
            return str(exc)
        self._signed_in("form")
        return None

    def _signed_in(self, via: str) -> None:
        """This tab becomes the participant's live one; a tab reconnecting after a server restart
        does not take back what another tab took over meanwhile (it says so, and offers to)."""
        assert self.participant is not None
        self.set_interval(PRESENCE_S, self._touch)
        live, _ = log.live_tab(self.store, self.study, self.participant)
        if via == "reconnect" and live not in (None, self.tab):
            self._show_taken_over()
            return
        log.claim_tab(self.store, self.study, self.participant, self.tab, via=via)
        self.advance()

    def take_back(self) -> None:
        """This tab steers again (the page shown after another tab took over)."""
        if self.participant is None:
            return
        log.claim_tab(self.store, self.study, self.participant, self.tab, via="take-back")
        self.taken_over = False
        self.advance()

    def advance(self) -> None:
        """Show the page for where the participant is now (see engine.study.people)."""
        from befair_tui.screens.participant_between import DoneScreen, QuestionsScreen, ReadyScreen
        from befair_tui.screens.participant_console import ParticipantConsoleScreen
        from befair_tui.screens.participant_profile import ProfileScreen
        from befair_tui.screens.participant_signin import ConsentScreen

        assert self.participant is not None
        try:
            position = self.position = people.where(self.store, self.spec, self.participant)
        except BefairError as exc:
            self.notify(str(exc), severity="error", timeout=15)
            return
        self._touch()
        if self.taken_over:
            return
        screen: Screen[None]
        if position.step == people.CONSENT:
            screen = ConsentScreen(self.spec)
        elif position.step == people.PROFILE:
            screen = ProfileScreen(people.people_of(self.spec))
        elif position.step == people.READY:
            screen = ReadyScreen(self.spec, position)
        elif position.step == people.LIVE:
            cell = position.cell
            assert cell is not None
            self.ensure_runner()
            screen = ParticipantConsoleScreen(self.store, cell.session_id, position=position, spec=self.spec,
                                              participant=self.participant, poll_interval=self.poll_interval,
                                              clock=self.clock)
        elif position.step == people.QUESTIONS:
            screen = QuestionsScreen(self.spec, position)
        else:
            screen = DoneScreen(self.spec, position)
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(screen)

    def start_current(self) -> None:
        """Start the current cell's session (the Start button of the page before it)."""
        position = self.position
        if position is None or position.cell is None or self.participant is None:
            return
        try:
            proc = people.start_cell(self.store, self.spec, self.participant, position)
        except (BefairError, OSError) as exc:
            self.notify(f"Cannot start the session: {exc}", severity="error", timeout=15)
            return
        if proc is not None:
            self.procs[position.cell.session_id] = proc
        self.advance()

    def ensure_runner(self) -> bool:
        """Start a worker for the current cell when nothing runs it (it was interrupted: the server
        or the machine was killed); True when one was started here. Says on screen why it could not."""
        started, error = self.start_runner_if_needed()
        if error:
            self.notify(f"Cannot resume the session: {error}", severity="error", timeout=15)
        return started

    def start_runner_if_needed(self) -> tuple[bool, str | None]:
        """ensure_runner without a word on screen, so that a thread worker may call it: (started
        here, why it could not)."""
        position = self.position
        if position is None or position.cell is None:
            return False, None
        mine = self.procs.get(position.cell.session_id)
        if mine is not None and mine.poll() is None:
            return False, None  # the worker this tab started is still setting up or running it
        try:
            proc = people.ensure_runner(self.store, self.spec, position.cell)
        except (BefairError, OSError) as exc:
            return False, str(exc)
        if proc is None:
            return False, None
        self.procs[position.cell.session_id] = proc
        return True, None

    def _touch(self) -> None:
        self._reap()
        if self.participant is None or self.taken_over:
            return
        cell = self.position.cell if self.position is not None else None
        try:
            mine = log.touch(self.store, self.study, self.participant, cell=cell.index if cell else None,
                             client=self.tab)
        except Exception:  # noqa: BLE001 - presence is a courtesy to the researcher, never an error here
            return
        if not mine:
            self._show_taken_over()

    def _show_taken_over(self) -> None:
        from befair_tui.screens.participant_signin import TakenOverScreen

        assert self.participant is not None
        self.taken_over = True
        _, since = log.live_tab(self.store, self.study, self.participant)
        at = time.strftime("%H:%M", time.localtime(since)) if since else None
        while len(self.screen_stack) > 1:
            self.pop_screen()
        self.push_screen(TakenOverScreen(self.spec.name, at))

    def _reap(self) -> None:
        """Forget (and reap: no defunct process left) the workers this tab started that ended."""
        for session_id, proc in list(self.procs.items()):
            if proc.poll() is not None:
                del self.procs[session_id]

    # -- help, palette, leaving --------------------------------------------------------------
    def action_help(self) -> None:
        from befair_tui.screens.participant_help import ParticipantHelp

        if not isinstance(self.screen, ParticipantHelp):
            self.push_screen(ParticipantHelp())

    def get_system_commands(self, screen: Screen[None]) -> Iterable[SystemCommand]:
        """The theme, and the current screen's own actions: nothing else (no quit to a shell, no
        screenshot written on the server, no other screen)."""
        yield SystemCommand("Theme", "Change the colours", self.action_change_theme)
        seen: set[str] = set()
        for key, active in screen.active_bindings.items():
            binding = active.binding
            if not binding.id or binding.id in seen or not binding.description or not active.enabled:
                continue
            seen.add(binding.id)
            yield SystemCommand(binding.description, f"{binding.id} · key {binding.key_display or key}",
                                partial(self.call_later, self.run_action, binding.action, active.node))

    def on_unmount(self) -> None:
        if self.participant is not None and self._store is not None:
            try:
                log.leave(self.store, self.study, self.participant, client=self.tab)
            except Exception:  # noqa: BLE001
                pass

