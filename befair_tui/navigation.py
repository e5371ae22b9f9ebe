"""What the screens ask of the app they live in: befair_tui.app.BefairApp's navigation, and the participant's
way through a study (befair_tui.participant_app.ParticipantApp), typed here so a screen can call them without
importing the app modules (which import the screens)."""
from __future__ import annotations

from typing import Any, Protocol, cast

from textual.app import App

from engine.session.store import SessionStore
from engine.study.spec import StudySpec

from befair_tui.settings import SetupChoices


class Navigator(Protocol):
    def open_setup(self) -> None: ...

    def action_open_sessions(self) -> None: ...

    def open_console(self, session_id: str, *, must_exist: bool = True) -> None: ...

    def open_replay(self, session_id: str) -> None: ...

    def start_session(self, choices: SetupChoices, secrets: dict[str, str] | None = None) -> None: ...

    def resume_session(self, session_id: str) -> None: ...


def navigator(app: App[Any]) -> Navigator:
    """`app` (a screen's `self.app`, which Textual types as a plain App) as the BefairApp it is."""
    return cast(Navigator, app)


class ParticipantFlow(Protocol):
    participant: str | None  # None until signed in

    @property
    def store(self) -> SessionStore: ...

    @property
    def spec(self) -> StudySpec: ...

    def sign_in(self, participant: str, code: str) -> str | None: ...

    def take_back(self) -> None: ...

    def advance(self) -> None: ...

    def start_current(self) -> None: ...

    def ensure_runner(self) -> bool: ...

    def start_runner_if_needed(self) -> tuple[bool, str | None]: ...


def participant_flow(app: App[Any]) -> ParticipantFlow:
    """`app` (a participant screen's `self.app`) as the ParticipantApp it is."""
    return cast(ParticipantFlow, app)
