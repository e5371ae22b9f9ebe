"""The researcher's live grid of a study with people: every participant's cells in their order,
each cell's state, and who is on which cell now (their tab is open on it). From here the whole
console: Enter opens a cell's session (steer it, as the console does), r replays it, s the Study
screen (the aggregate and Figure 2), l the sessions screen.

A thread worker re-reads the grid every REFRESH seconds and posts it; this screen only draws."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import DataTable, Footer, Static

from engine.session import views
from engine.session.store import SessionStore
from engine.study import grid, people

from befair_tui.bindings import back_and_quit, open_and_replay
from befair_tui.navigation import navigator
from befair_tui.polling import refresh_every
from befair_tui.screens.session_picker import SessionPicker
from befair_tui.screens.study import cell_session

REFRESH = 2.0
COLUMNS = ("who", "role", "tab", "#", "level", "state", "steps taken", "val AUC", "val gap", "answered", "now")


class PeopleGridRead(Message):
    def __init__(self, rows: list[dict[str, Any]], error: str | None = None) -> None:
        super().__init__()
        self.rows, self.error = rows, error


def row_cells(row: dict[str, Any], first: bool) -> tuple[str | Text, ...]:
    steps = f"{row['steps'] or 0}/{row['budget'] or '?'}" if row["session_id"] and row["session_status"] else "–"
    state = "paused" if row["state"] == grid.RUNNING and row["session_status"] == "paused" else row["state"]
    now = Text("▶ on it", style="bold green") if row["here"] else ""
    tab = (Text("online", style="green") if row["online"] else Text("offline", style="dim")) if first else ""
    return (row["participant"] if first else "", (row["role"] or "-") if first else "", tab, str(row["position"]),
            row["level"], state, steps, views.fmt(row["best_auc"]), views.fmt(row["best_gap"]),
            "yes" if row["answered"] else "", now)


class StudyPeopleScreen(SessionPicker):
    DEFAULT_CSS = """
    StudyPeopleScreen #people-title { height: 1; padding: 0 1; background: $boost; }
    StudyPeopleScreen #people-table { height: 1fr; }
    """
    BINDINGS = [
        *open_and_replay("people"),
        Binding("s", "study", "Study screen", id="people-study"),
        Binding("l", "sessions", "Sessions", id="people-sessions"),
        *back_and_quit("people"),
    ]

    def __init__(self, store: SessionStore, study: str) -> None:
        super().__init__()
        self.store = store
        self.study = study
        self.spec = grid.stored_spec(store, study)
        people.people_of(self.spec)
        self.rows: list[dict[str, Any]] = []

    def compose(self) -> ComposeResult:
        yield Static(id="people-title")
        yield DataTable(id="people-table", cursor_type="row", zebra_stripes=True)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for column in COLUMNS:
            table.add_column(column, key=column)
        table.focus()
        self._show(people.live_grid(self.store, self.spec))
        self.refresher()

    @work(thread=True, exclusive=True, group="people-refresh", name="people-refresh")
    def refresher(self) -> None:
        """Read the grid every REFRESH seconds on the worker's own connection; never touches widgets."""
        from textual.worker import get_current_worker

        def read(store: SessionStore) -> PeopleGridRead:
            return PeopleGridRead(people.live_grid(store, self.spec))

        refresh_every(get_current_worker(), REFRESH, SessionStore(self.store.path), read,
                      lambda error: PeopleGridRead([], error=error), self.post_message)

    @on(PeopleGridRead)
    def _on_read(self, message: PeopleGridRead) -> None:
        if message.error:
            self.notify(f"cannot read study {self.study}: {message.error}", severity="error")
            return
        self._show(message.rows)

    def _show(self, rows: list[dict[str, Any]]) -> None:
        table = self.query_one(DataTable)
        cursor = table.cursor_row
        self.rows = rows
        online = len({r["participant"] for r in rows if r["online"]})
        done = sum(1 for r in rows if r["answered"])
        self.query_one("#people-title", Static).update(
            f"Study {self.study} · {len(self.spec.participants)} participants, {online} online now · "
            f"{done} of {len(rows)} sessions done and answered")
        table.clear()
        previous = None
        for i, row in enumerate(rows):
            table.add_row(*row_cells(row, row["participant"] != previous), key=str(i))
            previous = row["participant"]
        if rows:
            table.move_cursor(row=min(cursor, len(rows) - 1))

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "people-refresh")

    # -- actions -------------------------------------------------------------------------------
    def highlighted_session(self) -> str | None:
        table = self.query_one(DataTable)
        if not self.rows or table.cursor_row >= len(self.rows):
            return None
        return cell_session(self, self.rows[table.cursor_row])

    def action_open(self) -> None:
        """The whole console on the cell's session, over this grid (closing it comes back here)."""
        from befair_tui.screens.console import ConsoleScreen

        sid = self.highlighted_session()
        if sid:
            app: Any = self.app
            self.app.push_screen(ConsoleScreen(self.store, sid, poll_interval=app.poll_interval, clock=app.clock))

    def action_replay(self) -> None:
        from befair_tui.screens.replay import ReplayScreen

        sid = self.highlighted_session()
        if sid:
            app: Any = self.app
            self.app.push_screen(ReplayScreen(self.store, sid, speed=app.replay_speed, clock=app.clock))

    def action_study(self) -> None:
        from befair_tui.screens.study import StudyScreen

        self.app.push_screen(StudyScreen(self.store, self.study))

    def action_sessions(self) -> None:
        navigator(self.app).action_open_sessions()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "back":  # only over another screen (opened from the sessions screen)
            return len(self.app.screen_stack) > 2
        return True

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
