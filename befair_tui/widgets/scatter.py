"""AUC against skin-tone gap for every measured node, with baselines and published rows marked."""
from __future__ import annotations

from textual_plotext import PlotextPlot

from engine.session.state import SessionState


class Scatter(PlotextPlot):
    DEFAULT_CSS = """
    Scatter { border: round $primary-darken-1; height: 1fr; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.border_title = "AUC ↑ vs skin-tone gap →"
        # the legend lives in the border: drawn inside the plot it hides points in the top-left
        self.border_subtitle = "● node (val) ★ best ◆ reference (test)"
        self.references: list[dict] = []  # {name, auc, gap, kind}
        self._last_key: tuple | None = None

    def set_references(self, baselines: list[dict], published: list[dict]) -> None:
        self.references = (
            [{**b, "kind": "baseline"} for b in baselines] + [{**p, "kind": "published"} for p in published]
        )
        self._last_key = None

    def sync(self, state: SessionState, best: int | None) -> None:
        points = [(n.node_id, n.val_gap, n.val_auc) for n in state.nodes.values()
                  if n.status == "ok" and n.val_auc is not None and n.val_gap is not None]
        key = (tuple(points), best, len(self.references))
        if key == self._last_key:
            return
        self._last_key = key
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        refs = [r for r in self.references if r.get("auc") is not None and r.get("gap") is not None]
        if refs:
            plt.scatter([r["gap"] for r in refs], [r["auc"] for r in refs], marker="◆", color="cyan")
        if points:
            plt.scatter([p[1] for p in points], [p[2] for p in points], marker="●", color="green")
        best_points = [p for p in points if p[0] == best]
        if best_points:
            plt.scatter([best_points[0][1]], [best_points[0][2]], marker="★", color="yellow")
        self.refresh()
