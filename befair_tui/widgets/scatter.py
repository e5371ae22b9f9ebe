"""The AUC-against-gap plot itself, one split at a time (test or validation): the nodes measured
here, the best one, the baselines trained here and, on test only, the study's published rows.
Its frame, legend and notes are ComparisonPlot's (widgets/comparison_plot.py)."""
from __future__ import annotations

from textual_plotext import PlotextPlot

from engine.session.state import SessionState

from befair_tui import compare

MARKERS = {  # kind -> (marker, colour as #rrggbb); the legend and the help use the same colours
    "node": ("●", "#7dc855"),
    "best": ("★", "#ffd700"),
    "baseline": ("■", "#00c8d2"),
    "published": ("◆", "#e6508c"),
}


def _rgb(colour: str) -> tuple[int, int, int]:
    """plotext takes (r, g, b); its colour names are not the terminal's, so names would not match."""
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


class Scatter(PlotextPlot):
    DEFAULT_CSS = """
    Scatter { height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.split = "test"
        self.baselines: list[dict] = []
        self.published: list[dict] = []
        self.points: list[tuple[int, float, float]] = []       # (node id, gap, AUC) drawn
        self.references: list[tuple[str, float, float, str]] = []  # (name, gap, AUC, kind) drawn
        self._last_key: tuple | None = None

    def set_references(self, baselines: list[dict], published: list[dict]) -> None:
        self.baselines, self.published = baselines, published
        self._last_key = None

    def set_split(self, split: str) -> None:
        self.split = split
        self._last_key = None

    def sync(self, state: SessionState, best: int | None) -> None:
        points = compare.plot_points(state, self.split)
        refs = compare.reference_points(self.baselines, self.published, self.split)
        key = (self.split, tuple(points), best, tuple(refs))
        if key == self._last_key:
            return
        self._last_key = key
        self.points, self.references = points, refs
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        y_title, x_title = compare.AXIS[self.split]
        plt.xlabel(x_title)
        plt.ylabel(y_title)
        for kind in ("published", "baseline"):
            chosen = [r for r in refs if r[3] == kind]
            if chosen:
                marker, colour = MARKERS[kind]
                plt.scatter([r[1] for r in chosen], [r[2] for r in chosen], marker=marker, color=_rgb(colour))
        if points:
            marker, colour = MARKERS["node"]
            plt.scatter([p[1] for p in points], [p[2] for p in points], marker=marker, color=_rgb(colour))
        best_points = [p for p in points if p[0] == best]
        if best_points:
            marker, colour = MARKERS["best"]
            plt.scatter([best_points[0][1]], [best_points[0][2]], marker=marker, color=_rgb(colour))
        self.refresh()
