"""The plot's frame: a title that names the split and both axes, the axis titles where a reader
looks (the gap's above the y axis, the AUC's at the right end of the x axis), the notes a reader
must see (generated data, blinded test metrics), a legend for every marker and the name of every
lettered or numbered point. The plot inside is widgets/scatter.py.

Small (80×24: a few rows), it stays, compact: the axis titles move into the frame's title and the
names of the numbered points into the scoreboard beside it, which numbers its rows the same way."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from engine.session import views
from engine.session.state import SessionState

from befair_tui.widgets.scatter import MARKERS, Mark, Scatter

LEGEND_WORDS = {"node": "node", "best": "best", "baseline": "trained here", "published": "published"}
ROOMY = 10      # rows inside the frame from which the axis titles have lines of their own
NAMES_FROM = 16  # ... and the names of the numbered points (else the scoreboard beside names them)


def legend(split: str, kinds: set[str] | None = None, compact: bool = False) -> str:
    """Console markup: every marker the plot draws in this split (`kinds`: those it has drawn;
    None: all it can), in its colour. Baselines are lettered A, B, …; published rows numbered.
    Compact, "★ best" goes to the title and "trained here" reads "trained"."""
    order = ["node", "best", "baseline"] + (["published"] if split == "test" else [])
    shown = {"baseline": "A", "published": "1"}
    words = {**LEGEND_WORDS, "baseline": "trained"} if compact else LEGEND_WORDS
    return " ".join(f"[{MARKERS[k][1]}]{shown.get(k, MARKERS[k][0])}[/] {words[k]}" for k in order
                    if (kinds is None or k in kinds or k in ("node", "best")) and not (compact and k == "best"))


COMPACT_NOTES = {views.SYNTH_NOTE: "generated data: not comparable"}  # the scoreboard beside says it all


def axis_titles(split: str) -> tuple[str, str]:
    """(y title, x title): the gap up the side (lower is fairer), the AUC along the bottom."""
    y, x = views.AXIS[split]
    return f"↑ {y} · lower is fairer", f"{x} · higher is better →"


def title(split: str, compact: bool = False) -> str:
    y, x = views.AXIS[split]
    if compact:
        return f"{x} → · gap ↑ · [{MARKERS['best'][1]}]★[/] best"
    return f"{x} → vs {y} ↑"


def names(marks: list[Mark]) -> Text:
    """"1 Dermatologists · 2 MEDFAIR · … · A medfair (trained here)": what each tag stands for."""
    text = Text()
    for mark in marks:
        if not mark.tag:
            continue
        if text:
            text.append(" · ", style="dim")
        text.append(mark.tag, style=f"bold {mark.colour}")
        text.append(f" {mark.name}" + (" (trained here)" if mark.kind == "baseline" else ""))
    return text


class ComparisonPlot(Vertical):
    DEFAULT_CSS = """
    ComparisonPlot { border: round $primary-darken-1; height: 1fr; }
    ComparisonPlot #plot-notes { height: auto; color: $warning; text-style: bold; padding: 0 1; }
    ComparisonPlot .axis-title { height: 1; padding: 0 1; color: $text-muted; }
    ComparisonPlot #plot-x-title { text-align: right; }
    ComparisonPlot #plot-names { height: auto; padding: 0 1; }
    ComparisonPlot.-compact .axis-title, ComparisonPlot.-compact #plot-names { display: none; }
    ComparisonPlot.-no-names #plot-names { display: none; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.split = "test"
        self.note_lines: list[str] = []
        self.compact = False
        self._set_titles()

    def compose(self) -> ComposeResult:
        y_title, x_title = axis_titles(self.split)
        yield Static("", id="plot-notes")
        yield Static(y_title, id="plot-y-title", classes="axis-title")
        yield Scatter(id="scatter-plot")
        yield Static(x_title, id="plot-x-title", classes="axis-title")
        yield Static("", id="plot-names")

    def _set_titles(self) -> None:
        drawn = {m.kind for m in self.scatter.marks} if self.is_mounted else None
        titles = (title(self.split, self.compact), legend(self.split, drawn, self.compact))
        if titles != (self.border_title, self.border_subtitle):  # unchanged: no redraw of the frame
            self.border_title, self.border_subtitle = titles

    _scatter: Scatter | None = None
    _names_shown: str | None = None

    @property
    def scatter(self) -> Scatter:
        if self._scatter is None:  # looked up once: a query walks the widget tree
            self._scatter = self.query_one(Scatter)
        return self._scatter

    def set_references(self, baselines: list[dict[str, Any]], published: list[dict[str, Any]]) -> None:
        self.scatter.set_references(baselines, published)

    def set_split(self, split: str) -> None:
        self.split = split
        self._set_titles()
        y_title, x_title = axis_titles(split)
        self.query_one("#plot-y-title", Static).update(y_title)
        self.query_one("#plot-x-title", Static).update(x_title)
        self.scatter.set_split(split)

    def on_resize(self) -> None:
        self.set_class(self.size.height - 2 < NAMES_FROM, "-no-names")
        compact = self.size.height - 2 < ROOMY
        if compact != self.compact:
            self.compact = compact
            self.set_class(compact, "-compact")
            self._set_titles()
            self.note_lines = []  # drawn again, shorter or longer
            if self._state is not None:
                self.sync(self._state, self._best)

    _state: SessionState | None = None
    _best: int | None = None

    def sync(self, state: SessionState, best: int | None) -> None:
        self._state, self._best = state, best
        scatter = self.scatter
        scatter.sync(state, best)
        self._set_titles()
        shown = names(scatter.marks)
        if shown.plain != self._names_shown:  # an update lays the screen out again: only on a change
            self._names_shown = shown.plain
            self.query_one("#plot-names", Static).update(shown)
        notes = views.notes(state, self.split, has_published=bool(scatter.published))
        if self.split == "validation":
            notes = [n for n in notes if n != views.PUBLISHED_NOTE] + ["published rows: test only (v)"]
        if self.split == "test" and views.test_hidden(state) and state.nodes:
            notes = [n if n not in (views.BLINDED_NOTE, views.STUDY_BLINDED_NOTE)
                     else f"no nodes shown: {n}" for n in notes]
        if notes != self.note_lines:
            self.note_lines = notes
            box = self.query_one("#plot-notes", Static)
            text = Text()
            for n in notes:
                info = n.startswith("published rows")
                note = COMPACT_NOTES.get(n, n) if self.compact else n
                text.append(("\n" if text else "") + ("note: " if info else "⚠ ") + note,
                            style="dim" if info else "")
            box.update(text)
            box.display = bool(notes)
