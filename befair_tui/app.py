"""The befair Textual app. `create_app(...)` is the one factory used by the CLI, tests and the
screenshot script."""
from __future__ import annotations

import subprocess
from functools import partial
from pathlib import Path
from collections.abc import Callable, Iterable

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from engine.errors import BefairError
from engine.paths import default_db
from engine.session.store import SessionStore

from befair_tui.settings import SetupChoices


class BefairApp(App[None]):
    CSS_PATH = "befair.tcss"
    TITLE = "befair"
    SUB_TITLE = "steering ML-engineering agents under a fairness constraint"
    BINDINGS = [
        Binding("ctrl+q", "quit", "Quit", id="app-quit", show=False, priority=True),
        Binding("question_mark,f1", "help", "Help", id="app-help", key_display="?"),
    ]

    def __init__(self, db: Path | str | None = None, *, start: str = "setup", session_id: str | None = None,
                 proc: subprocess.Popen[bytes] | None = None, poll_interval: float = 0.15,
                 clock: Callable[[], float] | None = None, settings_file: Path | None = None,
                 autoplay: bool = False, replay_speed: str = "10x",
                 child_env: dict[str, str] | None = None, study: str | None = None) -> None:
        super().__init__()
        self.db_path = Path(db) if db else default_db()
        self.start_study = study
        self.start = start
        self.start_session_id = session_id
        self.start_proc = proc
        self.poll_interval = poll_interval
        self.clock = clock
        self.settings_file = settings_file
        self.autoplay = autoplay
        self.replay_speed = replay_speed
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        # extra environment for the runners this console starts (resume): the API key given as
        # `befair run --api-key`, passed on in the environment, never on a command line
        self.child_env: dict[str, str] = dict(child_env or {})
        # secrets typed in the setup screen (an API key), per session started from it: used to
        # start and resume that session from this console, kept in memory only
        self.session_env: dict[str, dict[str, str]] = {}
        self._store: SessionStore | None = None
        self.refused: str | None = None  # why the database was refused at start (the app then exits)

    @property
    def store(self) -> SessionStore:
        if self._store is None:
            self._store = SessionStore(self.db_path)
        return self._store

    # -- start-up -------------------------------------------------------------------------
    def on_mount(self) -> None:
        # A file that is not a befair database is refused before anything is written beside it
        # (no <db>.settings.json), with the command line's one line, not a crash on the first key.
        try:
            if self.db_path.exists():  # a new database is created by what first needs it, as before
                _ = self.store
        except BefairError as exc:
            self.refused = f"befair: {exc}"
            self.exit(return_code=int(getattr(exc, "exit_code", 3)), message=self.refused)
            return
        try:
            if self.start == "console" and self.start_session_id:
                if self.start_proc is not None:
                    self.procs[self.start_session_id] = self.start_proc
                self.open_console(self.start_session_id, must_exist=self.start_proc is None)
            elif self.start == "replay" and self.start_session_id:
                self.open_replay(self.start_session_id)
            elif self.start == "sessions":
                self.action_open_sessions()
            elif self.start == "people" and self.start_study:
                from befair_tui.screens.study_people import StudyPeopleScreen

                self._switch(StudyPeopleScreen(self.store, self.start_study))
            else:
                self.open_setup()
        except Exception as exc:  # noqa: BLE001 - start on setup, with the reason shown
            self.open_setup()
            self.show_error("Cannot open", str(exc))

    def show_error(self, title: str, text: str) -> None:
        from befair_tui.screens.confirm import MessageModal

        self.push_screen(MessageModal(title, text))

    # -- navigation -----------------------------------------------------------------------
    def _switch(self, screen: Screen[None]) -> None:
        """Keep one screen of each kind: the new one replaces the top of the stack."""
        if len(self.screen_stack) > 1:
            self.switch_screen(screen)
        else:
            self.push_screen(screen)

    def open_setup(self) -> None:
        from befair_tui.screens.setup import SetupScreen
        from befair_tui.settings import settings_path

        # remembered per database: two studies on two databases never share their settings
        self._switch(SetupScreen(settings_file=self.settings_file or settings_path(self.db_path)))

    def action_help(self) -> None:
        from befair_tui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_open_sessions(self) -> None:
        from befair_tui.screens.sessions import SessionsScreen

        self._switch(SessionsScreen(self.store))

    def open_console(self, session_id: str, *, must_exist: bool = True) -> None:
        from befair_tui.screens.console import ConsoleScreen

        if must_exist:
            session_id = self.store.resolve(session_id)
        self._switch(ConsoleScreen(self.store, session_id, proc=self.procs.get(session_id),
                                   poll_interval=self.poll_interval, clock=self.clock))

    def open_replay(self, session_id: str) -> None:
        from befair_tui.screens.replay import ReplayScreen

        session_id = self.store.resolve(session_id)
        self._switch(ReplayScreen(self.store, session_id, autoplay=self.autoplay, speed=self.replay_speed,
                                  clock=self.clock))

    # -- sessions as processes ------------------------------------------------------------
    def start_session(self, choices: SetupChoices, secrets: dict[str, str] | None = None) -> None:
        """Start a detached runner for `choices`; `secrets` (an API key typed in the setup screen)
        reach that runner through its environment only."""
        from befair_tui import launch

        env = {**self.child_env, **(secrets or {})}
        try:
            session_id, proc = launch.start_session(choices, self.db_path, env=env)
        except (OSError, ValueError, BefairError) as exc:
            self.show_error("Cannot start the session", str(exc))
            return
        if secrets:
            self.session_env[session_id] = dict(secrets)
        self.procs[session_id] = proc
        self.open_console(session_id, must_exist=False)
        self.notify(f"Session {session_id} starting (log: {launch.log_path(self.db_path, session_id)})",
                    timeout=6)

    def resume_session(self, session_id: str) -> None:
        from befair_tui import launch

        try:
            row = self.store.session(session_id)
            if row.get("status") in ("running", "paused") and \
                    launch.runner_state(row, self.procs.get(session_id)) == "alive":
                self.notify("That session is already running; opening it.")
            else:
                proc = launch.spawn(launch.resume_argv(self.db_path, session_id), self.db_path, session_id,
                                    env={**self.child_env, **self.session_env.get(session_id, {})})
                self.procs[session_id] = proc
        except (OSError, BefairError) as exc:
            self.show_error("Cannot resume", str(exc))
            return
        self.open_console(session_id)

    # -- quitting -------------------------------------------------------------------------
    async def action_quit(self) -> None:
        from befair_tui.screens.console import ConsoleScreen
        from befair_tui.screens.confirm import QuitModal

        screen = self.screen
        if isinstance(screen, ConsoleScreen) and screen.live:
            sid = screen.session_id

            def done(answer: str | None) -> None:
                if answer == "stop":
                    try:
                        self.store.issue_command(sid, "stop", {"interrupt": True}, by="console")
                    except Exception as exc:  # noqa: BLE001
                        self.show_error("Could not stop the session", str(exc))
                        return
                    self.exit(message=f"Stop requested for session {sid}.")
                elif answer == "leave":
                    self.exit(message=f"Session {sid} keeps running headless; "
                                      f"reopen it with `{self.reopen_command(sid)}`.")

            self.push_screen(QuitModal(sid, reopen=self.reopen_command(sid)), done)
            return
        self.exit()

    def reopen_command(self, session_id: str) -> str:
        """`befair open SESSION`, with --db when this database is not the default one."""
        import shlex

        command = f"befair open {session_id}"
        try:
            if Path(self.db_path).resolve() != Path(default_db()).resolve():
                command += f" --db {shlex.quote(str(self.db_path))}"
        except OSError:
            pass
        return command

    # -- command palette: every binding of the current screen -----------------------------
    def get_system_commands(self, screen: Screen[None]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        seen: set[str] = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not binding.id or binding.id in seen or not binding.description or not active.enabled:
                continue
            seen.add(binding.id)
            shown = binding.key_display or self.get_key_display(binding)
            # a reader's words only: the key, never the binding's internal id
            yield SystemCommand(binding.description, f"key {shown}",
                                partial(self.call_later, self.run_action, binding.action, active.node))


def create_app(db: Path | str | None = None, *, start: str = "setup", session_id: str | None = None,
               proc: subprocess.Popen[bytes] | None = None, poll_interval: float = 0.15,
               clock: Callable[[], float] | None = None, settings_file: Path | None = None,
               autoplay: bool = False, replay_speed: str = "10x",
               child_env: dict[str, str] | None = None, study: str | None = None,
               participant_study: str | None = None, participant: str | None = None) -> App[None]:
    """The one app factory. start: setup | console | replay | sessions | people (a study with
    people's live grid: `study`). `child_env`: extra environment for the runners the console
    starts (secrets stay off command lines). `participant_study`: a participant's app for that
    study instead (befair_tui.participant_app: steering of their own sessions only)."""
    if participant_study is not None:
        from befair_tui.participant_app import ParticipantApp

        return ParticipantApp(db or default_db(), participant_study, participant=participant,
                              poll_interval=poll_interval, clock=clock)
    return BefairApp(db, start=start, session_id=session_id, proc=proc, poll_interval=poll_interval,
                     clock=clock, settings_file=settings_file, autoplay=autoplay, replay_speed=replay_speed,
                     child_env=child_env, study=study)


def frozen_clock(ts: float) -> Callable[[], float]:
    """A clock for snapshots and screenshots: always `ts`."""
    return lambda: ts


__all__ = ["BefairApp", "create_app", "frozen_clock"]
