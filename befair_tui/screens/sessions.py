"""All sessions in the database: filter, sort, open, replay, resume, export, delete.

The list refreshes itself every REFRESH seconds (a thread worker reads the table and posts it);
the cursor stays on the same session, and an unchanged list is not redrawn."""
from __future__ import annotations

import json

import subprocess
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, DataTable, Input, Static

from engine.session import views

from engine.session import figure_text
from engine.session.store import SessionStore

from befair_tui.format import warning_style
from befair_tui.launch import runner_state
from befair_tui.messages import SessionsRead
from befair_tui.bindings import back_and_quit, open_and_replay
from befair_tui.navigation import navigator
from befair_tui.polling import refresh_every
from befair_tui.screens.session_picker import SessionPicker
from befair_tui.widgets.keys_footer import KeysFooter

REFRESH = 2.0  # seconds between two reads of the sessions table

# status and figures first: at 80 columns they are what shows; the rest lies beyond (← →)
COLUMNS = [
    ("status", "status"), ("val AUC", "best_auc"), ("val gap", "best_gap"), ("steps", "steps"),
    ("level", "level"), ("coder", "coder"), ("date", "created_at"), ("session", "id"),
    ("participant", "participant_id"),
]
# the status cell of a running/paused session whose process is gone, in lower case as the other statuses
RUNNER_STOPPED = views.RUNNER_STOPPED.lower()


def annotate(row: dict[str, Any], proc: subprocess.Popen[bytes] | None = None) -> dict[str, Any]:
    """The status column's trust markers: `trust` (UNSANDBOXED or blank; shown beside the status,
    so a list of sandboxed sessions spends no width on it) and a dead runner named in `status`."""
    out = dict(row)
    out["trust"] = views.UNSANDBOXED if views.row_state(row).unsandboxed else ""
    if row.get("status") in ("running", "paused"):
        try:
            if runner_state(row, proc) == "stopped":
                out["status"] = RUNNER_STOPPED  # said running/paused; nothing runs it
        except Exception:  # noqa: BLE001 - a listing never fails over a liveness guess
            pass
    return out


def _coder(row: dict[str, Any]) -> str:
    if row.get("simulated"):
        return "offline (simulated)"
    return row.get("coder_label") or row.get("coder") or "?"


def row_cells(row: dict[str, Any]) -> tuple[str, ...]:
    """The cells of a row, in COLUMNS' order."""
    steps = f"{row.get('steps') or 0}/{row.get('budget') or 0}"
    cells = {"status": _status(row), "best_auc": _with_ci(row.get("best_auc"), row.get("best_auc_ci")),
             "best_gap": _with_ci(row.get("best_gap"), row.get("best_gap_ci")),
             "steps": steps, "level": row.get("level") or "?", "coder": _coder(row),
             "created_at": views.date(row.get("created_at")), "id": row["id"],
             "participant_id": row.get("participant_id") or ""}
    return tuple(cells[key] for _, key in COLUMNS)


def _status(row: dict[str, Any]) -> str:
    status = row.get("status") or "?"
    return f"{status}  {row['trust']}" if row.get("trust") else status


def styled_cells(row: dict[str, Any], theme: dict[str, str] | None = None) -> tuple[str | Text, ...]:
    """row_cells with the trust markers coloured: UNSANDBOXED in the warning colour, a dead
    runner in red."""
    cells: list[str | Text] = list(row_cells(row))
    status = row.get("status") or "?"
    text = Text(status, style="bold red" if RUNNER_STOPPED in status else "")
    if row.get("trust"):
        text.append(" ")
        text.append(f" {row['trust']} ", style=warning_style(theme))
    cells[[k for _, k in COLUMNS].index("status")] = text
    return tuple(cells)


class ExportModal(ModalScreen[Path | None]):
    BINDINGS = [Binding("escape", "cancel", "Cancel", id="export-cancel")]

    def __init__(self, default: Path) -> None:
        super().__init__()
        self.default = default

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static("Export the session (best pipeline, tree, node metrics, events) to a folder:",
                         classes="question")
            yield Input(str(self.default), id="export-path")
            yield Static("Enter: export · Esc: cancel", classes="hint")
            yield Button("Export", id="export-ok", variant="primary")

    @on(Input.Submitted)
    @on(Button.Pressed, "#export-ok")
    def _ok(self) -> None:
        value = self.query_one("#export-path", Input).value.strip()
        self.dismiss(Path(value).expanduser() if value else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class SessionsScreen(SessionPicker):
    FOOTER_DROP = ("app.quit", "back", "sort", "filter", "study", "delete")  # widgets/keys_footer.py
    BINDINGS = [
        *open_and_replay("sessions", "Open"),
        Binding("u", "resume", "Resume", id="sessions-resume"),
        Binding("x", "export", "Export", id="sessions-export"),
        Binding("d,delete", "delete", "Delete", id="sessions-delete"),
        Binding("slash", "filter", "Filter", id="sessions-filter"),
        Binding("t", "sort", "Sort", id="sessions-sort"),
        Binding("n", "new", "New session", id="sessions-new"),
        Binding("s", "study", "Study", id="sessions-study"),
        *back_and_quit("sessions"),
    ]

    def __init__(self, store: SessionStore) -> None:
        super().__init__()
        self.store = store
        self.rows: list[dict[str, Any]] = []
        self.sort_key = "created_at"
        self.sort_reverse = True
        self.filter_text = ""
        # what the table shows now (to skip identical redraws)
        self._shown: list[tuple[str, tuple[str, ...], object]] | None = None

    def compose(self) -> ComposeResult:
        yield Static(f"Sessions in {self.store.path.name}", id="sessions-title")
        yield Input(placeholder="filter (any column)…", id="sessions-filter")
        yield DataTable(id="sessions-table", cursor_type="row", zebra_stripes=True)
        yield KeysFooter()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        for label, key in COLUMNS:
            table.add_column(label, key=key)
        self.reload()
        table.focus()
        self.refresher()

    def on_screen_resume(self) -> None:
        self.reload()

    def _read(self, store: SessionStore) -> list[dict[str, Any]]:
        procs = getattr(self.app, "procs", {})
        return [annotate(r, procs.get(r["id"])) for r in store.sessions()]

    def reload(self) -> None:
        """Read the sessions table now (on mount, on coming back, after a delete), on the UI thread:
        one query, so that the list is there when the screen is; the refresher reads it after."""
        try:
            self.rows = self._read(self.store)
        except Exception as exc:  # noqa: BLE001
            self.notify(f"cannot read the sessions: {exc}", severity="error")
            self.rows = []
        self._fill()

    @work(thread=True, exclusive=True, group="sessions-refresh", name="sessions-refresh")
    def refresher(self) -> None:
        """Read the sessions table every REFRESH seconds; never touches widgets."""
        from textual.worker import get_current_worker

        def read(store: SessionStore) -> SessionsRead:
            return SessionsRead(self._read(store))

        # connections are per thread: the store's connection in this thread is the worker's own
        refresh_every(get_current_worker(), REFRESH, self.store, read, lambda error: SessionsRead([], error=error),
                      self.post_message, repeat_errors=False)

    @on(SessionsRead)
    def _on_read(self, message: SessionsRead) -> None:
        if message.error:
            self.notify(f"cannot read the sessions: {message.error}", severity="error")
            return
        self.rows = message.rows
        self._fill()

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "sessions-refresh")

    def _fill(self) -> None:
        table = self.query_one(DataTable)
        needle = self.filter_text.lower()
        rows = [r for r in self.rows if not needle or needle in " ".join(row_cells(r)).lower()]

        def key(r: dict[str, Any]) -> tuple[bool, Any]:
            value = r.get(self.sort_key)
            return (value is None, value if value is not None else 0)

        rows.sort(key=key, reverse=self.sort_reverse)
        if self.sort_reverse:  # keep missing values last either way
            rows.sort(key=lambda r: r.get(self.sort_key) is None)
        shown = [(r["id"], row_cells(r), r.get("trust")) for r in rows]
        if shown != self._shown:
            self._shown = shown
            selected = self._cursor_key() if table.row_count else None
            table.clear()
            theme = self.app.theme_variables
            for r in rows:
                table.add_row(*styled_cells(r, theme), key=r["id"])
            ids = [r["id"] for r in rows]
            if selected in ids:  # the cursor stays on the same session wherever it moved
                table.move_cursor(row=ids.index(selected), animate=False)
        label = {key: title for title, key in COLUMNS}.get(self.sort_key, self.sort_key)
        direction = "↓" if self.sort_reverse else "↑"
        if not self.rows:
            title = f"Sessions in {self.store.path.name} · none yet: press n to set up a new session"
        elif not rows:
            title = f"Sessions in {self.store.path.name} · none of {len(self.rows)} match the filter"
        else:
            title = f"Sessions in {self.store.path.name} · {len(rows)} shown · sorted by {label} {direction}"
        self.query_one("#sessions-title", Static).update(title)

    @on(Input.Changed, "#sessions-filter")
    def _filter(self, event: Input.Changed) -> None:
        self.filter_text = event.value
        self._fill()

    @on(Input.Submitted, "#sessions-filter")
    def _filter_done(self) -> None:
        self.query_one(DataTable).focus()

    @on(DataTable.HeaderSelected)
    def _header(self, event: DataTable.HeaderSelected) -> None:
        key = str(event.column_key.value)
        if key == self.sort_key:
            self.sort_reverse = not self.sort_reverse
        else:
            self.sort_key, self.sort_reverse = key, key in ("created_at", "best_auc", "steps")
        self._fill()

    def _cursor_key(self) -> str | None:
        table = self.query_one(DataTable)
        try:
            row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        except Exception:  # noqa: BLE001 - no row under the cursor
            return None
        return str(row_key.value)

    def selected_id(self) -> str | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            self.notify("No session selected.", severity="warning")
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return str(row_key.value)

    def highlighted_session(self) -> str | None:
        return self.selected_id()

    def action_filter(self) -> None:
        self.query_one("#sessions-filter", Input).focus()

    def action_sort(self) -> None:
        keys = [k for _, k in COLUMNS]
        self.sort_key = keys[(keys.index(self.sort_key) + 1) % len(keys)] if self.sort_key in keys else keys[0]
        self.sort_reverse = self.sort_key in ("created_at", "best_auc", "steps")
        self._fill()

    def action_resume(self) -> None:
        sid = self.selected_id()
        if sid:
            navigator(self.app).resume_session(sid)

    def action_new(self) -> None:
        navigator(self.app).open_setup()

    def action_study(self) -> None:
        """The Study screen: the selected session's study, else the newest study."""
        from befair_tui.screens.study import StudyScreen, study_of

        selected = self._cursor_key() if self.query_one(DataTable).row_count else None
        self.app.push_screen(StudyScreen(self.store, study_of(self.store, selected)))

    def action_export(self) -> None:
        sid = self.selected_id()
        if not sid:
            return
        default = Path(self.store.path).resolve().parent / "exports" / sid

        def done(folder: Path | None) -> None:
            if folder is None:
                return
            try:
                from engine.session.export import export_session

                info = export_session(self.store, sid, folder)
            except Exception as exc:  # noqa: BLE001
                self.notify(f"export failed: {exc}", severity="error", title="Export")
                return
            self.notify(f"wrote {', '.join(info['files'])} to {folder}", title="Export")

        self.app.push_screen(ExportModal(default), done)

    def action_delete(self) -> None:
        from befair_tui.screens.confirm import ConfirmModal

        sid = self.selected_id()
        if not sid:
            return

        def done(ok: bool | None) -> None:
            if not ok:
                return
            try:
                self.store.delete_session(sid)
            except Exception as exc:  # noqa: BLE001
                self.notify(f"delete failed: {exc}", severity="error")
                return
            self.notify(f"deleted session {sid}")
            self.reload()

        self.app.push_screen(
            ConfirmModal(f"Delete session {sid} and everything recorded for it? This cannot be undone.",
                         yes="Delete", no="Keep"), done)

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 2:
            self.app.pop_screen()
        else:
            navigator(self.app).open_setup()


def _with_ci(value: float | None, ci: str | None) -> str:
    """`.734 ±.05` when the sessions row has the ★ node's 95 % interval, else `.734`."""
    try:
        bounds = json.loads(ci) if ci else None
    except ValueError:
        bounds = None
    return figure_text.plus_minus(value, bounds) if bounds and value is not None else figure_text.fmt(value)

