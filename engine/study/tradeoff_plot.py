"""The study's Figure 2: overall test AUC (x) against the skin-tone AUC gap (y), one point per
agent × instruction level (mean, error bars ± one sample std, as the study draws them), beside
the expert baselines and the published reference rows, each labelled with its source.

Drawn with matplotlib's Agg backend (no display); the file type follows the suffix (.png, .svg,
.pdf). On generated data (SynthDerm) the figure says that its numbers are not comparable to the
published DDI ones.
"""
from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import UsageError
from engine.study.aggregate import AUC_GAP, MEAN, MODEL, OVERALL_AUC, PROMPT, STD

SYNTH_CAVEAT = "generated data (SynthDerm): not comparable to published DDI numbers"
FORMATS = (".png", ".svg", ".pdf")
FOOTER_PT = 7.5
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
AGENT_COLOURS = ("#2B6CB0", "#C05621", "#6B46C1", "#2C7A7B", "#B83280", "#744210")
# kind -> (colour, marker): baselines trained here, the study's expert pipelines, its agents, the dermatologists
REFERENCE_STYLE = {"baseline": ("#9C4221", "1"), "expert": ("#C53030", "2"), "published": ("#4A5568", "x"),
                   "human": ("#2F855A", ".")}


@dataclass(frozen=True)
class Point:
    """One mark of the figure: a mean with its spread (None: no error bar)."""

    label: str
    auc: float
    gap: float
    auc_std: float | None = None
    gap_std: float | None = None
    group: str = ""        # the agent (colour); for references their kind
    level: str = ""        # the instruction level (marker)
    source: str = ""       # where a reference row comes from
    auc_ci: tuple[float, float] | None = None   # a 95 % interval instead of ± std (lopsided bars)
    gap_ci: tuple[float, float] | None = None

    def errors(self) -> tuple[Any, Any]:
        """(xerr, yerr) for matplotlib: the interval when known, else ± the std (0: none)."""
        return (_error(self.auc, self.auc_ci, self.auc_std), _error(self.gap, self.gap_ci, self.gap_std))


def _error(value: float, ci: tuple[float, float] | None, std: float | None) -> Any:
    if ci is not None:
        return [[max(0.0, value - ci[0])], [max(0.0, ci[1] - value)]]
    return std or 0.0


def study_points(table: Sequence[Mapping[str, Any]], level_names: Mapping[str, str] | None = None) -> list[Point]:
    """Agent × level points from an aggregated table (rows without a mean AUC and gap are skipped);
    `level_names`: how to name a table's prompt label on the figure (an imported study's)."""
    names = level_names or {}
    stats: dict[tuple[str, str], dict[str, Mapping[str, Any]]] = {}
    for row in table:
        stats.setdefault((str(row[MODEL]), str(row[PROMPT])), {})[str(row["statistic"])] = row
    points = []
    for (model, prompt), by_stat in stats.items():
        mean, std = by_stat.get(MEAN, {}), by_stat.get(STD, {})
        if mean.get(OVERALL_AUC) is None or mean.get(AUC_GAP) is None:
            continue
        shown = names.get(prompt, prompt)
        points.append(Point(label=shown, auc=float(mean[OVERALL_AUC]), gap=float(mean[AUC_GAP]),
                            auc_std=_opt(std.get(OVERALL_AUC)), gap_std=_opt(std.get(AUC_GAP)),
                            group=model, level=shown))
    return points


def reference_points(rows: Sequence[Mapping[str, Any]]) -> list[Point]:
    """Points from reference rows {name, auc, auc_std, gap, gap_std, source, kind}."""
    out = []
    for row in rows:
        if row.get("auc") is None or row.get("gap") is None:
            continue
        out.append(Point(label=str(row["name"]), auc=float(row["auc"]), gap=float(row["gap"]),
                         auc_std=_opt(row.get("auc_std")), gap_std=_opt(row.get("gap_std")),
                         group=str(row.get("kind") or "published"), source=str(row.get("source") or "")))
    return out


def _opt(value: Any) -> float | None:
    return None if value is None else float(value)


def draw_figure(path: str | Path, points: Sequence[Point], references: Sequence[Point] = (), *,
                title: str = "", synthetic: bool = False, note: str = "",
                bars: str = "error bars: ± one sample std over sessions", runs: Sequence[Point] = ()) -> Path:
    """Write the figure to `path` (.png/.svg/.pdf); returns the path. `bars`: what the error bars are."""
    target = Path(path)
    if target.suffix.lower() not in FORMATS:
        raise UsageError(f"--figure must end in {', '.join(FORMATS)}, not {target.name!r}")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(11, 5.4))
    try:
        _draw_runs(ax, runs, points)
        _draw_agents(ax, points)
        _draw_references(ax, references)
        ax.set_xlabel("prediction quality: overall test AUC →")
        ax.set_ylabel("← fairness: skin-tone AUC gap (best − worst group)")
        ax.grid(True, alpha=0.25)
        if title:
            ax.set_title(title, fontsize=11)
        ax.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.01, 1.0), framealpha=0.85)
        footer = bars + ("; faint marks: each run with its own 95 % interval (its images resampled)" if runs else "") \
            + (f"; {note}" if note else "")
        if synthetic:
            footer = f"{SYNTH_CAVEAT}\n{footer}"
        footer = wrap_footer(footer, fig.get_figwidth())
        lines = footer.count("\n") + 1
        fig.text(0.01, 0.01, footer, fontsize=FOOTER_PT, color="#9B2C2C" if synthetic else "#4A5568", va="bottom")
        line_share = FOOTER_PT * 1.25 / 72 / fig.get_figheight()  # one footer line, as a share of the height
        fig.tight_layout(rect=(0, 0.02 + lines * line_share, 1, 1))
        target.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(target, dpi=150, bbox_inches="tight", pad_inches=0.15)  # the legend outside the axes too
    finally:
        plt.close(fig)
    return target


def wrap_footer(text: str, width_in: float) -> str:
    """The footer's lines wrapped to the figure's width (a line of FOOTER_PT-point text holds
    about width / (0.6 · size) characters; wider ones ran off the right edge)."""
    chars = max(40, int((width_in - 0.2) * 72 / (FOOTER_PT * 0.6)))
    return "\n".join(textwrap.fill(line, chars) if line else line for line in text.split("\n"))


def _draw_agents(ax: Any, points: Sequence[Point]) -> None:
    agents = list(dict.fromkeys(p.group for p in points))
    levels = list(dict.fromkeys(p.level for p in points))
    for p in points:
        colour = AGENT_COLOURS[agents.index(p.group) % len(AGENT_COLOURS)]
        marker = MARKERS[levels.index(p.level) % len(MARKERS)]
        xerr, yerr = p.errors()
        ax.errorbar(p.auc, p.gap, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour,
                    elinewidth=1, capsize=3, alpha=0.45, zorder=1)
        ax.scatter(p.auc, p.gap, marker=marker, color=colour, s=60, zorder=3,
                   label=textwrap.fill(f"{p.group} · {p.level}", 44, break_on_hyphens=False))
        ax.annotate(p.level, (p.auc, p.gap), xytext=(5, 4), textcoords="offset points", fontsize=7.5, color=colour)


def _draw_runs(ax: Any, runs: Sequence[Point], points: Sequence[Point]) -> None:
    """Each run, faint, in its agent's colour and its level's marker, with its own interval."""
    agents = list(dict.fromkeys([p.group for p in points] + [r.group for r in runs]))
    levels = list(dict.fromkeys([p.level for p in points] + [r.level for r in runs]))
    for r in runs:
        colour = AGENT_COLOURS[agents.index(r.group) % len(AGENT_COLOURS)]
        xerr, yerr = r.errors()
        ax.errorbar(r.auc, r.gap, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour, elinewidth=0.6, alpha=0.18,
                    zorder=0)
        ax.scatter(r.auc, r.gap, marker=MARKERS[levels.index(r.level) % len(MARKERS)], facecolors="none",
                   edgecolors=colour, s=22, alpha=0.35, zorder=0)


def _draw_references(ax: Any, references: Sequence[Point]) -> None:
    """Reference marks: one legend entry per kind and source, each point named beside it."""
    seen: set[tuple[str, str]] = set()
    for p in references:
        colour, marker = REFERENCE_STYLE.get(p.group, REFERENCE_STYLE["published"])
        if p.auc_std is not None or p.gap_std is not None or p.auc_ci is not None or p.gap_ci is not None:
            xerr, yerr = p.errors()
            ax.errorbar(p.auc, p.gap, xerr=xerr, yerr=yerr, fmt="none", ecolor=colour,
                        elinewidth=0.8, capsize=2, alpha=0.3, zorder=1)
        key = (p.group, p.source)
        ax.scatter(p.auc, p.gap, marker=marker, color=colour, s=70, zorder=2,
                   label=textwrap.fill(p.source, 44) if key not in seen else None)
        seen.add(key)
        ax.annotate(p.label, (p.auc, p.gap), xytext=(5, -9), textcoords="offset points", fontsize=7, color=colour)
