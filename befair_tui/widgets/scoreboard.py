"""Scoreboard: like with like. The test view puts the best nodes' held-out DDI-format test
metrics next to the baselines' test rows and the study's published DDI rows; the validation
view (key v) shows the validation split apart. Every row says where its numbers come from, and a
tooltip (mouse over a row) explains it. Which rows: engine.session.views (the presentation model).

The baselines and published rows carry the letter or number they are drawn as on the plot
(views.reference_tags), so the plot's points are named here too. When no baseline was trained
on the session's data it says so, and names the key that trains them in the background where the
screen has one (the console's `b`; a participant's console has none).

Narrow (80×24), nothing is cut: the source column gives way (a published row says "published" in
its name), a long name wraps onto a second line, and the rows below the edge are reached with Tab
and the arrows (the subtitle says how many there are)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rich.cells import cell_len
from rich.console import Console, Group
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.session import views

from engine.session import figure_text
from engine.session.state import SessionState

from befair_tui.widgets.scatter import MARKERS

TITLE = "Scoreboard"
SOURCE_STYLE = {views.SOURCE_MEASURED: "bold green", views.SOURCE_TRAINED: "cyan",
                views.SOURCE_PUBLISHED: "dim"}
NOTE_STYLE = "bold yellow"
NO_BASELINES = "no expert baseline trained on this session's data"
COMPACT_BELOW = 60  # columns: the source column gives way (a published row says so in its name)
AUC_WIDTH, GAP_WIDTH = 9, 7   # a gap cell keeps a space before "hidden" (no "hiddenhidden")
# a row's name breaks between criteria ("agent/AUC/") or words, never inside a criterion's name
KEEP_TOGETHER = tuple(name for name in views.CRITERION_SHORT.values() if " " in name)
INTERVAL_WIDTH, INTERVALS_FROM = 10, 56  # a cell with ± its interval, and the board width that fits two


class Scoreboard(VerticalScroll, can_focus=True):
    """Focusable (Tab) and scrolled with the arrows when its rows do not all fit."""

    DEFAULT_CSS = """
    Scoreboard { border: round $primary-darken-1; padding: 0 1; height: 1fr; scrollbar-size-vertical: 1; }
    Scoreboard:focus { border: round $accent; }
    Scoreboard #scoreboard-body { width: 1fr; height: auto; }
    """
    BINDINGS = [
        Binding("down,j", "scroll_down", "Down", id="scoreboard-down", show=False),
        Binding("up,k", "scroll_up", "Up", id="scoreboard-up", show=False),
        Binding("pagedown", "page_down", "Page down", id="scoreboard-page-down", show=False),
        Binding("pageup", "page_up", "Page up", id="scoreboard-page-up", show=False),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.split = "test"
        self.unsandboxed = False
        self.can_baselines = False        # the session's data is here: baselines can be trained for it
        self.train_key: str | None = None  # the screen's key that trains them (None: this screen cannot)
        self.training: str | None = None  # what the background baseline training says now
        self.baselines: list[dict[str, Any]] = []
        self.published: list[dict[str, Any]] = []
        self.rows: list[views.Row] = []
        self.notes: list[str] = []
        self.lines: list[Text] = []       # what the body shows, one entry per screen line
        self._line_help: list[str] = []   # tooltip text per content line
        self._last_key: tuple[object, ...] | None = None
        self._state: SessionState | None = None
        self.criterion: str | None = None  # the criterion ★ follows for this reader (None: the session's)
        self.certainty = ""                # can the ★ be told apart from the others (views.BestChoice)
        self._set_titles()

    def compose(self) -> ComposeResult:
        yield Static("", id="scoreboard-body")

    # -- titles ---------------------------------------------------------------------------
    def _set_titles(self) -> None:
        title = f"{TITLE} · {views.SPLIT_TITLE[self.split]}"
        if self.unsandboxed:  # the trust marker: the figures below come from code run without the sandbox
            title += f" · [bold black on $warning] {views.UNSANDBOXED} [/]"
        other = "validation" if self.split == "test" else "test"
        subtitle = f"v: {other}" if self.compact else f"v: show {other}"
        hidden = len(self.lines) - self.scrollable_content_region.height - round(self.scroll_y)
        if self.size.height and hidden > 0:  # rows below the edge: say so, and how to reach them
            subtitle = (f"↓{hidden} more · Tab ↑↓ · " if self.compact else f"↓ {hidden} more (Tab, ↑↓) · ") + subtitle
        if self.border_title != title:
            self.border_title = title
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def set_unsandboxed(self, unsandboxed: bool) -> None:
        if unsandboxed != self.unsandboxed:
            self.unsandboxed = unsandboxed
            self._set_titles()

    def set_split(self, split: str) -> None:
        if split not in views.SPLITS:
            raise ValueError(split)
        self.split = split
        self._last_key = None
        self._set_titles()

    def set_references(self, baselines: list[dict[str, Any]], published: list[dict[str, Any]]) -> None:
        self.baselines, self.published = baselines, published
        self._last_key = None

    def set_training(self, text: str | None) -> None:
        """The background baseline training's progress line (None: nothing is training)."""
        if text != self.training:
            self.training = text
            self._last_key = None

    def no_baselines(self) -> bool:
        """No baseline trained on this session's data (other data's do not count)."""
        return not any(b.get("same_data") is not False for b in self.baselines)

    @property
    def compact(self) -> bool:
        return 0 < self.size.width < COMPACT_BELOW

    # -- content --------------------------------------------------------------------------
    def sync(self, state: SessionState) -> None:
        self._state = state
        rows = views.comparison_rows(state, self.baselines, self.published, self.split, criterion=self.criterion)
        notes = views.notes(state, self.split, has_published=bool(self.published))
        width = self._text_width()
        self.certainty = views.best_choice(state, self.criterion).uncertainty if state.nodes else ""
        key = (self.split, tuple((r.name, r.auc, r.gap, r.note, r.chosen, r.hidden, r.auc_ci is None) for r in rows),
               tuple(notes), self.training, self.can_baselines, self.train_key, width, self.certainty)
        if key == self._last_key:
            return
        self._last_key = key
        self.rows, self.notes = rows, notes
        self.lines, self._line_help = self._render_lines(width)
        self.query_one("#scoreboard-body", Static).update(Group(*self.lines))
        self._set_titles()
        self.call_after_refresh(self._set_titles)  # the "↓ N more" once the new lines are laid out

    def _text_width(self) -> int:
        # one column kept for the scrollbar, which comes when the lines do not fit: a line
        # wrapped here is never wrapped again (the tooltips follow the lines)
        width = self.content_region.width
        return width - self.styles.scrollbar_size_vertical if width else 60

    def on_resize(self) -> None:
        if self._state is not None:
            self.sync(self._state)
        self._set_titles()

    def watch_scroll_y(self, old: float, new: float) -> None:
        super().watch_scroll_y(old, new)
        self._set_titles()

    def _render_lines(self, width: int) -> tuple[list[Text], list[str]]:
        """Every line of the board with its tooltip: notes, the header, one row per node,
        baseline and published row (wrapped, never cut), and what to do about baselines."""
        out = _BoardLines(self.app.console, width)
        for note in self.notes:
            info = note == views.PUBLISHED_NOTE  # information, not a warning
            shown = f"{note} (key v)" if info else note  # the console's key, said only in the console
            out.add(Text(f"{'note:' if info else '⚠'} {shown}", style="dim" if info else NOTE_STYLE), _note_help(note))
        label = "test AUC" if self.split == "test" else "val AUC"
        sources = [] if self.compact else [r.source for r in self.rows]
        out.source_width = max(map(cell_len, sources), default=0)
        # intervals beside the figures (± half the 95 % interval) when the board is wide enough
        spread = width >= INTERVALS_FROM and any(r.auc_ci is not None for r in self.rows)
        out.auc_width, out.gap_width = (INTERVAL_WIDTH, INTERVAL_WIDTH) if spread else (AUC_WIDTH, GAP_WIDTH)
        out.name_width = max(8, width - out.auc_width - out.gap_width
                             - (out.source_width + 2 if out.source_width else 0))
        out.row(Text(""), label, "gap", Text("source") if out.source_width else None,
                f"{label}: area under the ROC curve on the {views.SPLIT_WORDS[self.split]}; "
                "gap: best minus worst skin-tone group AUC on the same images (lower is fairer).")
        if not [r for r in self.rows if r.kind == "node"]:
            out.row(Text("no measured node yet", style="dim"), "", "", None, "No node has been measured yet.")
        self._add_rows(out, spread)
        self._add_baselines_hint(out)
        return out.lines, out.help_lines

    def _add_rows(self, out: _BoardLines, spread: bool) -> None:
        """One row per node, baseline and published result; how sure the ★ is, under the node rows."""
        tags = views.reference_tags(self.baselines, self.published, self.split)
        said = False
        references = iter([("baseline", b["name"]) for b in self.baselines]
                          + [("published", p["name"]) for p in self.published])
        for r in self.rows:
            if r.kind != "node" and self.certainty and not said:
                said = True
                self._add_certainty(out)
            name = Text("★ " if r.chosen else "")
            if r.kind != "node":  # the letter or number it is drawn as on the plot
                tag = tags.get(next(references, ("", "")), "")
                name.append(f"{tag} " if tag else "  ", style=f"bold {MARKERS[r.kind][1]}")
            name.append(r.name)
            if r.kind == "baseline" and self.compact:  # no source column: say it in the name
                name.append(" (trained here)")
            if r.kind == "baseline" and r.note:
                name.append(" · other data", style="dim")
            if r.kind == "node" and r.auc is None and not r.hidden and r.note:
                name.append(f" · {r.note}", style="dim")
            auc, gap = ("hidden", "hidden") if r.hidden else _cells(r, spread)
            out.row(name, auc, gap, Text(r.source, style=SOURCE_STYLE.get(r.source, "")), _row_help(r))
        if self.certainty and not said and self.rows:   # no reference rows under the nodes (a participant's)
            self._add_certainty(out)

    def _add_certainty(self, out: _BoardLines) -> None:
        out.add(Text(f"≈ {self.certainty}" if "cannot" in self.certainty else f"✓ {self.certainty}", style="italic"),
                "Two nodes cannot be told apart when the 95 % interval of their difference, on the same "
                "validation images resampled the same way (a paired bootstrap), contains 0: the ★ could as "
                "well be any of them.")

    def _add_baselines_hint(self, out: _BoardLines) -> None:
        """Baselines training, or how to get them when there are none."""
        if self.training:
            out.add(Text(f"⏳ {self.training}", style="bold cyan"),
                    "Expert baselines are training in the background; their rows appear here when they finish.")
        elif self.no_baselines() and self.can_baselines and self.train_key:
            out.add(Text(f"{NO_BASELINES} · {self.train_key}: train them", style=NOTE_STYLE),
                    f"Press {self.train_key} to train the three MEDFAIR baselines (ResNet-18) on this session's data "
                    "in the background; their test AUC and gap land in this database and here.")
        elif self.no_baselines():
            out.add(Text(NO_BASELINES, style="dim"),
                    "This session's data is not here, so no baseline can be trained for it from the console "
                    "(befair baselines train)." if self.train_key else
                    "No expert baseline was trained on this session's data.")

    # -- tooltips -------------------------------------------------------------------------
    def help_for_line(self, line: int) -> str | None:
        if 0 <= line < len(self._line_help):
            return self._line_help[line]
        return None

    def on_mouse_move(self, event: events.MouseMove) -> None:
        # from screen coordinates: the event may come from the body, whose offsets are its own
        region = self.content_region
        inside = region.contains(event.screen_x, event.screen_y)
        text = self.help_for_line(event.screen_y - region.y + round(self.scroll_y)) if inside else None
        if text != self.tooltip:
            self.tooltip = text


def _cells(r: views.Row, spread: bool) -> tuple[str, str]:
    """A row's AUC and gap: `.74 ±.04` when the row has intervals and the board has room."""
    if spread and r.auc_ci is not None:
        return figure_text.plus_minus(r.auc, r.auc_ci), figure_text.plus_minus(r.gap, r.gap_ci)
    return figure_text.fmt(r.auc), figure_text.fmt(r.gap)


def _row_help(r: views.Row) -> str:
    """The row's tooltip: what its numbers are, and how sure they are (or why that is not known)."""
    if r.auc_ci is not None:
        gap = f", gap {figure_text.with_interval(r.gap, r.gap_ci)}" if r.gap_ci is not None else ""
        return (f"{r.explain} 95 % interval: AUC {figure_text.with_interval(r.auc, r.auc_ci)}{gap} "
                f"({r.interval}). {figure_text.INTERVAL_HELP}")
    return f"{r.explain} {r.interval[0].upper() + r.interval[1:]}." if r.interval else r.explain


def _note_help(note: str) -> str:
    if note == views.SYNTH_NOTE:
        return ("This session runs on SynthDerm, images generated by befair in the DDI format. Its test "
                "numbers cannot be compared with the study's published numbers on the real DDI images.")
    if note in (views.BLINDED_NOTE, views.STUDY_BLINDED_NOTE):
        return ("The session blinds test metrics (a study setting) so that choices are made on validation "
                "figures only. They appear when the session ends, unless a study keeps them blind.")
    if note == views.PUBLISHED_NOTE:
        return "The study published test results only; press v for the test figures to compare with them."
    return note


@dataclass
class _BoardLines:
    """The board's lines being laid out, each with its tooltip, and the table's column widths."""

    console: Console
    width: int
    name_width: int = 8
    auc_width: int = AUC_WIDTH
    gap_width: int = GAP_WIDTH
    source_width: int = 0
    lines: list[Text] = field(default_factory=list)
    help_lines: list[str] = field(default_factory=list)

    def add(self, text: Text, help_text: str) -> None:
        """A line of prose, wrapped to the board's width."""
        for line in text.wrap(self.console, max(self.width, 8)):
            line.rstrip()
            self.lines.append(line)
            self.help_lines.append(help_text)

    def row(self, name: Text, auc: str, gap: str, source: Text | None, help_text: str) -> None:
        """A table row: the name wrapped in its column, the figures (and source) on its first line."""
        cells = Text(f"{auc:>{self.auc_width}}{gap:>{self.gap_width}}")
        if self.source_width:
            cells.append("  ")
            cells.append_text(source if source is not None else Text(""))
        chunks = wrap_name(name, self.name_width) if name.plain else [Text("")]
        for i, chunk in enumerate(chunks):
            chunk.pad_right(self.name_width - chunk.cell_len)
            if i == 0:
                chunk.append_text(cells)
            self.lines.append(chunk)
            self.help_lines.append(help_text)


def _break_points(plain: str) -> list[int]:
    """Where a row's name may go on to its next line: after a space or a "/", except inside one of
    KEEP_TOGETHER ("worst low end" stays whole)."""
    inside: set[int] = set()
    for phrase in KEEP_TOGETHER:
        start = plain.find(phrase)
        while start >= 0:
            inside.update(range(start, start + len(phrase)))
            start = plain.find(phrase, start + 1)
    return [i + 1 for i, ch in enumerate(plain) if ch == "/" or (ch == " " and i not in inside)]


def wrap_name(name: Text, width: int) -> list[Text]:
    """A row's name in lines of at most `width` cells, broken at _break_points (where a criterion's
    name is wider than the board, between its words; a word wider still is cut)."""
    plain, lines, start = name.plain, [], 0
    points = _break_points(plain)
    spaces = [i + 1 for i, ch in enumerate(plain) if ch == " "]   # a narrow board: a long name's words
    while cell_len(plain[start:].rstrip()) > width:
        fits = [p for p in points if start < p and cell_len(plain[start:p].rstrip()) <= width]
        fits = fits or [p for p in spaces if start < p and cell_len(plain[start:p].rstrip()) <= width]
        end = fits[-1] if fits else start + max(1, width)
        line = name[start:end]
        line.rstrip()
        lines.append(line)
        start = end
        while start < len(plain) and plain[start] == " ":
            start += 1
    last = name[start:]
    last.rstrip()
    lines.append(last)
    return lines
