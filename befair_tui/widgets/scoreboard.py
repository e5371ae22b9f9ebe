"""Scoreboard: like with like. The test view puts the best nodes' held-out DDI-format test
metrics next to the baselines' test rows and the study's published DDI rows; the validation
view (key v) shows the validation split apart. Every row says where its numbers come from, and a
tooltip (mouse over a row) explains it. Which rows: engine.session.views (the presentation model)."""
from __future__ import annotations

from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual import events
from textual.widgets import Static

from engine.session.state import SessionState

from befair_tui import compare
from befair_tui.compare import Row
from befair_tui.format import UNSANDBOXED, num

TITLE = "Scoreboard"
SOURCE_STYLE = {compare.SOURCE_MEASURED: "bold green", compare.SOURCE_TRAINED: "cyan",
                compare.SOURCE_PUBLISHED: "dim"}
NOTE_STYLE = "bold yellow"
# kept for callers that imported them from here
baseline_points = compare.baseline_points
published_points = compare.published_points


class Scoreboard(Static):
    DEFAULT_CSS = """
    Scoreboard { border: round $primary-darken-1; padding: 0 1; height: 1fr; overflow-y: auto; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.split = "test"
        self.unsandboxed = False
        self.baselines: list[dict[str, Any]] = []
        self.published: list[dict[str, Any]] = []
        self.rows: list[Row] = []
        self.notes: list[str] = []
        self._line_help: list[str] = []  # tooltip text per content line
        self._last_key: tuple | None = None
        self._set_titles()

    # -- titles ---------------------------------------------------------------------------
    def _set_titles(self) -> None:
        title = f"{TITLE} · {compare.SPLIT_TITLE[self.split]}"
        if self.unsandboxed:  # the trust marker: the figures below come from code run without the sandbox
            title += f" · [bold black on $warning] {UNSANDBOXED} [/]"
        other = "validation" if self.split == "test" else "test"
        subtitle = f"v: show {other}"
        if self.border_title != title:
            self.border_title = title
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def set_unsandboxed(self, unsandboxed: bool) -> None:
        if unsandboxed != self.unsandboxed:
            self.unsandboxed = unsandboxed
            self._set_titles()

    def set_split(self, split: str) -> None:
        if split not in compare.SPLITS:
            raise ValueError(split)
        self.split = split
        self._last_key = None
        self._set_titles()

    def set_references(self, baselines: list[dict], published: list[dict]) -> None:
        self.baselines, self.published = baselines, published
        self._last_key = None

    # -- content --------------------------------------------------------------------------
    def sync(self, state: SessionState) -> None:
        rows = compare.comparison_rows(state, self.baselines, self.published, self.split)
        notes = compare.notes(state, self.split, has_published=bool(self.published))
        key = (self.split, tuple((r.name, r.auc, r.gap, r.note, r.chosen) for r in rows), tuple(notes))
        if key == self._last_key:
            return
        self._last_key = key
        self.rows, self.notes = rows, notes
        self.update(self._render_rows(state))

    def _render_rows(self, state: SessionState) -> Group:
        parts: list = []
        help_lines: list[str] = []
        for note in self.notes:
            info = note == compare.PUBLISHED_NOTE  # information, not a warning
            parts.append(Text(f"{'note:' if info else '⚠'} {note}", style="dim" if info else NOTE_STYLE,
                              no_wrap=True, overflow="ellipsis"))
            help_lines.append(_note_help(note))
        label = "test AUC" if self.split == "test" else "val AUC"
        table = Table(box=None, pad_edge=False, expand=True, show_edge=False)
        table.add_column("", ratio=1, no_wrap=True, overflow="ellipsis", min_width=20)
        table.add_column(label, justify="right", no_wrap=True)
        table.add_column("gap", justify="right", no_wrap=True)
        table.add_column("source", no_wrap=True, overflow="ellipsis")
        help_lines.append(f"{label}: area under the ROC curve on the {compare.SPLIT_WORDS[self.split]}; "
                          "gap: best minus worst skin-tone group AUC on the same images (lower is fairer).")
        nodes = [r for r in self.rows if r.kind == "node"]
        if not nodes:
            table.add_row(Text("no measured node yet", style="dim"), "", "", "")
            help_lines.append("No node has been measured yet.")
        for row in self.rows:
            name = Text(("★ " if row.chosen else "") + row.name)
            source = Text(row.source, style=SOURCE_STYLE.get(row.source, ""))
            if row.kind == "baseline" and row.note:
                name.append(" · other data", style="dim")
            hidden = row.hidden
            auc = "hidden" if hidden else num(row.auc)
            gap = "hidden" if hidden else num(row.gap)
            if row.kind == "node" and row.auc is None and not hidden and row.note:
                name.append(f" · {row.note}", style="dim")
            table.add_row(name, auc, gap, source)
            help_lines.append(row.explain)
        if not self.baselines and not self.published:
            table.add_row(Text("baselines: none in this database", style="dim"), "", "", "")
            help_lines.append("Train expert baselines with `befair baselines train` to compare against them.")
        parts.append(table)
        self._line_help = help_lines
        return Group(*parts)

    # -- tooltips -------------------------------------------------------------------------
    def help_for_line(self, line: int) -> str | None:
        if 0 <= line < len(self._line_help):
            return self._line_help[line]
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        offset = event.get_content_offset(self)
        text = self.help_for_line(offset.y + int(self.scroll_y)) if offset is not None else None
        if text != self.tooltip:
            self.tooltip = text


def _note_help(note: str) -> str:
    if note == compare.SYNTH_NOTE:
        return ("This session runs on SynthDerm, images generated by befair in the DDI format. Its test "
                "numbers cannot be compared with the study's published numbers on the real DDI images.")
    if note in (compare.BLINDED_NOTE, compare.STUDY_BLINDED_NOTE):
        return ("The session blinds test metrics (a study setting) so that choices are made on validation "
                "figures only. They appear when the session ends, unless a study keeps them blind.")
    if note == compare.PUBLISHED_NOTE:
        return "The study published test results only; press v for the test view to compare with them."
    return note
