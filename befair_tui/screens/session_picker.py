"""What the screens that list sessions share: Enter (or o, or a click on a row) opens the highlighted
row's session in the console, r replays it (their keys: befair_tui.bindings.open_and_replay)."""
from __future__ import annotations

from textual import on
from textual.screen import Screen
from textual.widgets import DataTable

from befair_tui.navigation import navigator


class SessionPicker(Screen[None]):
    def highlighted_session(self) -> str | None:
        """The highlighted row's session (None, said on screen, when it has none)."""
        raise NotImplementedError

    def action_open(self) -> None:
        sid = self.highlighted_session()
        if sid:
            navigator(self.app).open_console(sid)

    def action_replay(self) -> None:
        sid = self.highlighted_session()
        if sid:
            navigator(self.app).open_replay(sid)

    @on(DataTable.RowSelected)
    def _row_selected(self) -> None:
        self.action_open()
