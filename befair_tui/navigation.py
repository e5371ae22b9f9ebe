"""What the screens ask of the app they live in: befair_tui.app.BefairApp's navigation, typed here so a
screen can call it without importing the app module (which imports the screens)."""
from __future__ import annotations

from typing import Any, Protocol, cast

from textual.app import App

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
