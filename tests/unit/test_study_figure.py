"""Figure 2's footnote stays inside the figure: a long note (eight agent × level points with
their n, the SynthDerm caveat) is wrapped to the figure's width instead of running off its edge."""
from __future__ import annotations

import pytest

from engine.study.tradeoff_plot import FOOTER_PT, Point, draw_figure, wrap_footer


def test_a_long_footnote_is_wrapped_inside_the_figure(tmp_path, monkeypatch):
    matplotlib = pytest.importorskip("matplotlib")
    matplotlib.use("Agg")
    from matplotlib import pyplot as plt
    from matplotlib.figure import Figure

    drawn: dict[str, Figure] = {}
    close = plt.close
    monkeypatch.setattr(plt, "close", lambda fig: drawn.setdefault("fig", fig) and close(fig))
    points = [Point(label=level, auc=0.6 + i / 100, gap=0.1 + i / 200, auc_std=0.02, gap_std=0.03, group=agent,
                    level=level)
              for i, (agent, level) in enumerate((a, lv) for a in ("AIDE", "MLZero")
                                                 for lv in ("base", "fairness-hint", "fairness-metric",
                                                            "fairness-methods"))]
    note = "final choice by claimed; n per point: " + ", ".join(f"{p.group} · {p.level} {6 + i}"
                                                                 for i, p in enumerate(points))
    draw_figure(tmp_path / "f.png", points, synthetic=True, note=note)
    fig = drawn["fig"]
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    renderer = FigureCanvasAgg(fig).get_renderer()
    footers = [t for t in fig.texts if "error bars" in t.get_text()]
    assert footers and footers[0].get_text().count("\n") >= 2  # the caveat, and the note over 2+ lines
    box = footers[0].get_window_extent(renderer)
    assert box.x0 >= 0 and box.x1 <= fig.bbox.width, (box, fig.bbox.width)
    axes = fig.axes[0].get_window_extent(renderer)
    assert axes.y0 > box.y1  # the plot sits above the footnote, not on it


def test_short_lines_are_left_alone():
    assert wrap_footer("error bars: ± one sample std over sessions", 11) == "error bars: ± one sample std over sessions"
    wrapped = wrap_footer("x " * 400, 11)
    assert max(len(line) for line in wrapped.splitlines()) <= int((11 - 0.2) * 72 / (FOOTER_PT * 0.6))
