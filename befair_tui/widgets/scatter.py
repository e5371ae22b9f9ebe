"""The test AUC (x) against skin-tone AUC gap (y) plot itself, one split at a time (test or
validation): the nodes measured here, the best one, the baselines trained here (lettered A, B, …)
and, on test only, the study's published rows (numbered 1, 2, …: the legend and the scoreboard
name them). The same axes as the Study screen's Figure 2. Its frame, axis titles, legend and
notes are ComparisonPlot's (widgets/comparison_plot.py).

Every mark goes through `draw_point`, so that a point's spread (an interval) can be drawn with it."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from textual_plotext import PlotextPlot
from textual_plotext.plot import Plot

from engine.session import views

from engine.session import figure_text
from engine.session.state import SessionState


MARKERS = {  # kind -> (marker, colour as #rrggbb); the legend and the help use the same colours
    "node": ("●", "#7dc855"),
    "best": ("★", "#ffd700"),
    "baseline": ("■", "#00c8d2"),
    "published": ("◆", "#e6508c"),
}


@dataclass(frozen=True)
class Mark:
    """One drawn point: x = AUC, y = gap, the character drawn and its colour, and the name a
    legend gives it (published rows and baselines carry a tag: 1, 2, … or A, B, …)."""

    auc: float
    gap: float
    marker: str
    colour: str
    kind: str
    name: str = ""
    tag: str = ""
    auc_ci: tuple[float, float] | None = None   # 95 % intervals: drawn as error bars on both axes
    gap_ci: tuple[float, float] | None = None


def _rgb(colour: str) -> tuple[int, int, int]:
    """plotext takes (r, g, b); its colour names are not the terminal's, so names would not match."""
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def draw_point(plt: Plot, mark: Mark) -> None:
    """Draw one mark, with its 95 % intervals as error bars when it has them (dimmer, under it)."""
    red, green, blue = _rgb(mark.colour)
    dim = (red // 2, green // 2, blue // 2)
    if mark.auc_ci is not None:
        plt.plot(list(mark.auc_ci), [mark.gap, mark.gap], marker="─", color=dim)
    if mark.gap_ci is not None:
        plt.plot([mark.auc, mark.auc], list(mark.gap_ci), marker="│", color=dim)
    plt.scatter([mark.auc], [mark.gap], marker=mark.marker, color=_rgb(mark.colour))


def draw_marks(plt: Plot, marks: Sequence[Mark]) -> None:
    """Draw every mark in order; the nodes (hundreds in a long session) as one series, each
    other mark through draw_point."""
    nodes = [m for m in marks if m.kind == "node" and m.auc_ci is None]  # with bars: drawn one by one
    if nodes:
        marker, colour = MARKERS["node"]
        plt.scatter([m.auc for m in nodes], [m.gap for m in nodes], marker=marker, color=_rgb(colour))
    for mark in marks:
        if mark.kind != "node" or mark.auc_ci is not None:
            draw_point(plt, mark)


def tagged(references: Sequence[tuple[str, float, float, str]], tags: dict[tuple[str, str], str]) -> list[Mark]:
    """The baselines and published rows as marks, each drawn as its tag (views.reference_tags)."""
    out = []
    for name, gap, auc, kind in references:
        tag = tags.get((kind, name), "")
        out.append(Mark(auc, gap, tag or MARKERS[kind][0], MARKERS[kind][1], kind, name, tag))
    return out


def _intervals(state: SessionState, node_id: int, split: str) -> tuple[tuple[float, float] | None, ...]:
    node = state.nodes[node_id]
    summary = node.validation if split == "validation" else views.visible_test(state, node)
    return tuple(_pair(figure_text.interval(summary, k)) for k in ("auc", "auc_gap"))


def _pair(ci: object) -> tuple[float, float] | None:
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 else None


class Scatter(PlotextPlot):
    DEFAULT_CSS = """
    Scatter { height: 1fr; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.split = "test"
        self.baselines: list[dict[str, Any]] = []
        self.published: list[dict[str, Any]] = []
        self.points: list[tuple[int, float, float]] = []       # (node id, gap, AUC) drawn
        self.references: list[tuple[str, float, float, str]] = []  # (name, gap, AUC, kind) drawn
        self.marks: list[Mark] = []
        self._last_key: tuple[object, ...] | None = None

    def set_references(self, baselines: list[dict[str, Any]], published: list[dict[str, Any]]) -> None:
        self.baselines, self.published = baselines, published
        self._last_key = None

    def set_split(self, split: str) -> None:
        self.split = split
        self._last_key = None

    def sync(self, state: SessionState, best: int | None) -> None:
        points = views.plot_points(state, self.split)
        refs = views.reference_points(self.baselines, self.published, self.split)
        chosen = set(views.best_nodes(state))  # the best by each criterion: drawn with their intervals
        key = (self.split, tuple(points), best, tuple(refs), tuple(sorted(chosen)))
        if key == self._last_key:
            return
        self._last_key = key
        self.points, self.references = points, refs
        marks = tagged(refs, views.reference_tags(self.baselines, self.published, self.split))
        for node_id, gap, auc in points:
            kind = "best" if node_id == best else "node"
            auc_ci, gap_ci = _intervals(state, node_id, self.split) if node_id in chosen else (None, None)
            marks.append(Mark(auc, gap, MARKERS[kind][0], MARKERS[kind][1], kind, f"node {node_id}",
                              auc_ci=auc_ci, gap_ci=gap_ci))
        marks.sort(key=lambda m: m.kind == "best")  # the best node is drawn last, on top
        self.marks = marks
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        # the axis titles are the frame's (widgets/comparison_plot.py): plotext puts the y title
        # at the bottom left, beside the x title, where nobody looks for it
        draw_marks(plt, marks)
        self.refresh()
