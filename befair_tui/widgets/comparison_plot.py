"""The plot's frame: a title that names the split, the notes a reader must see (generated data,
blinded test metrics) and a legend for every marker. The plot inside is widgets/scatter.py."""
from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from engine.session.state import SessionState

from befair_tui import compare
from befair_tui.widgets.scatter import MARKERS, Scatter

LEGEND_WORDS = {"node": "node", "best": "best", "baseline": "trained here", "published": "published"}


def legend(split: str) -> str:
    """Console markup: every marker the plot can draw in this split, in its colour."""
    kinds = ["node", "best", "baseline"] + (["published"] if split == "test" else [])
    return " ".join(f"[{MARKERS[k][1]}]{MARKERS[k][0]}[/] {LEGEND_WORDS[k]}" for k in kinds)


def title(split: str) -> str:
    y, x = compare.AXIS[split]
    return f"{y} ↑ vs {x} →"


class ComparisonPlot(Vertical):
    DEFAULT_CSS = """
    ComparisonPlot { border: round $primary-darken-1; height: 1fr; }
    ComparisonPlot #plot-notes { height: auto; color: $warning; text-style: bold; padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.split = "test"
        self.note_lines: list[str] = []
        self._set_titles()

    def compose(self) -> ComposeResult:
        yield Static("", id="plot-notes")
        yield Scatter(id="scatter-plot")

    def _set_titles(self) -> None:
        self.border_title = title(self.split)
        self.border_subtitle = legend(self.split)

    @property
    def scatter(self) -> Scatter:
        return self.query_one(Scatter)

    def set_references(self, baselines: list[dict], published: list[dict]) -> None:
        self.scatter.set_references(baselines, published)

    def set_split(self, split: str) -> None:
        self.split = split
        self._set_titles()
        self.scatter.set_split(split)

    def sync(self, state: SessionState, best: int | None) -> None:
        scatter = self.scatter
        scatter.sync(state, best)
        notes = compare.notes(state, self.split, has_published=bool(scatter.published))
        if self.split == "validation":
            notes = [n for n in notes if n != compare.PUBLISHED_NOTE] + ["published rows: test only (v)"]
        if self.split == "test" and compare.blinded(state) and state.nodes:
            notes = [n if n not in (compare.BLINDED_NOTE, compare.STUDY_BLINDED_NOTE)
                     else f"no nodes shown: {n}" for n in notes]
        if notes != self.note_lines:
            self.note_lines = notes
            box = self.query_one("#plot-notes", Static)
            text = Text()
            for n in notes:
                info = n.startswith("published rows")
                text.append(("\n" if text else "") + ("note: " if info else "⚠ ") + n,
                            style="dim" if info else "")
            box.update(text)
            box.display = bool(notes)
