"""A study's grid on the Study screen: one row per session (cell) with its live state and its steps
taken of its budget (engine.session.views.steps: the count the session's console shows too)."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import DataTable

from engine.session.figure_text import fmt
from engine.session.views import row_step_count

COLUMNS = [("cell", "cell"), ("agent", "agent"), ("level", "level"), ("participant", "participant_id"),
           ("repeat", "repeat_index"), ("state", "state"), ("steps taken", "steps"), ("val AUC", "best_auc"),
           ("val gap", "best_gap"), ("session", "session_id")]
STATE_STYLE = {"finished": "green", "running": "bold cyan", "queued": "dim", "interrupted": "yellow",
               "failed": "bold red"}


def cells(row: dict[str, Any]) -> tuple[str | Text, ...]:
    steps = row_step_count(row).cell() if row.get("session_id") else "-"
    state = str(row.get("state") or "?")
    return (str(row["cell"]), str(row.get("agent") or ""), str(row.get("level") or ""),
            str(row.get("participant_id") or ""), str(row.get("repeat_index")),
            Text(state, style=STATE_STYLE.get(state, "")),
            steps, fmt(row.get("best_auc")), fmt(row.get("best_gap")), str(row.get("session_id") or "-"))


class StudyGrid(DataTable[str | Text]):
    """Redrawn only when what it shows changed; the cursor stays on its cell."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("cursor_type", "row")
        kwargs.setdefault("zebra_stripes", True)
        super().__init__(**kwargs)
        self._shown: list[tuple[str, ...]] | None = None
        self.rows_by_key: dict[str, dict[str, Any]] = {}

    def on_mount(self) -> None:
        for label, key in COLUMNS:
            self.add_column(label, key=key)

    def sync(self, rows: list[dict[str, Any]]) -> None:
        shown = [tuple(str(c) for c in cells(r)) for r in rows]
        if shown == self._shown:
            return
        self._shown = shown
        cursor = self.cursor_row if self.row_count else 0
        self.clear()
        self.rows_by_key = {}
        for row in rows:
            key = str(row["cell"])
            self.rows_by_key[key] = row
            self.add_row(*cells(row), key=key)
        if self.row_count:
            self.move_cursor(row=min(cursor, self.row_count - 1), animate=False)

    def selected(self) -> dict[str, Any] | None:
        if not self.row_count:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(self.cursor_coordinate)
        except Exception:  # noqa: BLE001 - no row under the cursor
            return None
        return self.rows_by_key.get(str(row_key.value))
