"""Figure 2 in the terminal: mean test AUC (x) against the skin-tone AUC gap (y), as the console's plot, per agent ×
level, ± one std as bars, beside the expert baselines and the published rows (engine.study.tradeoff_plot
draws the same points to a file)."""
from __future__ import annotations

from typing import Any

from textual_plotext import PlotextPlot

from engine.study.tradeoff_plot import Point

AGENT_COLOURS = ((80, 140, 230), (230, 140, 60), (170, 110, 230), (60, 190, 190))
REFERENCE_COLOURS = {"baseline": (0, 200, 210), "expert": (230, 80, 80), "published": (160, 160, 160),
                     "human": (90, 200, 110)}
REFERENCE_LABELS = {"baseline": "baselines trained here", "expert": "expert pipelines (published)",
                    "published": "agents (published)", "human": "dermatologists (published)"}
MARKERS = ("●", "■", "▲", "◆", "▼", "✚")


class StudyPlot(PlotextPlot):
    DEFAULT_CSS = """
    StudyPlot { height: 1fr; min-height: 12; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.points: list[Point] = []
        self.references: list[Point] = []
        self._key: tuple[tuple[Point, ...], tuple[Point, ...]] | None = None

    def sync(self, points: list[Point], references: list[Point]) -> None:
        key = (tuple(points), tuple(references))
        if key == self._key:
            return
        self._key = key
        self.points, self.references = points, references
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        # the axis titles are the screen's (plotext puts the y title at the bottom left)
        agents = list(dict.fromkeys(p.group for p in points))
        levels = list(dict.fromkeys(p.level for p in points))
        for p in points:
            colour = AGENT_COLOURS[agents.index(p.group) % len(AGENT_COLOURS)]
            if p.auc_std:
                plt.plot([p.auc - p.auc_std, p.auc + p.auc_std], [p.gap, p.gap], color=colour, marker="braille")
            if p.gap_std:
                plt.plot([p.auc, p.auc], [p.gap - p.gap_std, p.gap + p.gap_std], color=colour, marker="braille")
            plt.scatter([p.auc], [p.gap], marker=MARKERS[levels.index(p.level) % len(MARKERS)], color=colour,
                        label=f"{p.group} · {p.level}")
        for kind in dict.fromkeys(r.group for r in references):
            chosen = [r for r in references if r.group == kind]
            plt.scatter([r.auc for r in chosen], [r.gap for r in chosen], marker="◇",
                        color=REFERENCE_COLOURS.get(kind, (160, 160, 160)), label=REFERENCE_LABELS.get(kind, kind))
        self.refresh()
