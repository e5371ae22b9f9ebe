"""Measured figures as a reader sees them: each with its 95 % interval, each skin-tone group named.

An `evaluated` summary stores groups as group_0/1/2 and intervals as [lo, hi] lists
(engine.measures.uncertainty). Every surface a person or an export reads (tree, scoreboard,
node panel, `befair show`, JSON, CSV, the session report) renders them from here:

- groups are named after DDI's skin-tone groups: 12, 34, 56 (FST I–II, III–IV, V–VI);
- a compact figure reads `.81 ±.05 · gap .16 ±.11` (± half the interval's width: the interval
  itself, which may be lopsided, is in the node panel and the JSON);
- a group with fewer than MIN_CASES malignant (or benign) cases is "too few to judge" instead of
  a bare AUC;
- a summary recorded before intervals existed says "no interval: predictions were not kept".
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.measures import operating_point
from engine.measures.summary import EvaluationSummary
from engine.measures.uncertainty import CI_LEVEL, METHODS, MIN_CASES, missed_interval, too_few
from engine.task import GROUP_LABELS, GROUPS

GROUP_KEY = {"group_0": "12", "group_1": "34", "group_2": "56"}   # the public name of a group (DDI's)
GROUP_WORDS = {GROUP_KEY[g]: f"FST {label}" for g, label in GROUP_LABELS.items()}
NO_INTERVAL = "no interval: predictions were not kept"
TOO_FEW = "too few to judge"
INTERVAL_HELP = (
    "A 95 % interval is the range the figure would likely fall in if the same pipeline were scored on "
    "another set of images like these: with few malignant images in a skin-tone group, that range is "
    "wide. It does not include the variation from training the same pipeline again.")
TOO_FEW_HELP = (f"A group with fewer than {MIN_CASES} malignant (or benign) images is marked 'too few to "
                "judge': its AUC could lie almost anywhere.")


def group_key(name: str) -> str:
    return GROUP_KEY.get(name, name)


def fmt(value: float | None, digits: int = 3) -> str:
    """.812 (no leading zero); – for a missing value."""
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("0.") else text.replace("-0.", "-.")


def half_width(ci: Sequence[float] | None) -> float | None:
    return None if ci is None else (ci[1] - ci[0]) / 2


def has_intervals(summary: EvaluationSummary | None) -> bool:
    return summary is not None and summary.intervals is not None


def interval(summary: EvaluationSummary | None, figure: str) -> list[float] | None:
    """A stored summary's 95 % interval of "auc", "worst_auc", "auc_gap" or a group's AUC (its
    stored name, e.g. "group_2"); None without one."""
    found = summary.intervals if summary is not None else None
    if found is None:
        return None
    return {"auc": found.auc, "worst_auc": found.worst, "auc_gap": found.gap}.get(figure) if figure in (
        "auc", "worst_auc", "auc_gap") else found.group(figure)


def plus_minus(value: float | None, ci: Sequence[float] | None, digits: int = 2) -> str:
    """`.81 ±.05`, or `.812` when there is no interval."""
    if value is None:
        return "–"
    half = half_width(ci)
    return fmt(value, digits) if half is None else f"{fmt(value, digits)} ±{fmt(half, digits)}"


def compact(summary: EvaluationSummary | None) -> str:
    """The tree's and scoreboard's figure: `.81 ±.05 · gap .16 ±.11` (`.812 / .052` without intervals)."""
    if summary is None:
        return f"{fmt(None)} / {fmt(None)}"
    auc, gap = summary.auc, summary.auc_gap
    found = summary.intervals
    if found is None:
        return f"{fmt(auc)} / {fmt(gap)}"
    return f"{plus_minus(auc, found.auc)} · gap {plus_minus(gap, found.gap)}"


def with_interval(value: float | None, ci: Sequence[float] | None, digits: int = 3) -> str:
    """`.812 (.774–.851)`; the bare value without an interval."""
    if value is None:
        return "–"
    if ci is None:
        return fmt(value, digits)
    return f"{fmt(value, digits)} ({fmt(ci[0], digits)}–{fmt(ci[1], digits)})"


@dataclass(frozen=True)
class GroupFigure:
    """One skin-tone group's figures on one split."""

    key: str                   # 12 | 34 | 56
    words: str                 # FST I–II (light) …
    n: int | None
    malignant: int | None
    auc: float | None
    auc_ci: list[float] | None
    auc_reason: str | None     # why there is no AUC (one class only)
    too_few: bool
    missed: int | None         # malignant images predicted below 0.5
    fnr: float | None
    fnr_ci: list[float] | None

    def auc_text(self) -> str:
        if self.auc is None:
            return self.auc_reason or "no AUC"
        shown = with_interval(self.auc, self.auc_ci)
        return f"{TOO_FEW} ({self.malignant} malignant): {shown}" if self.too_few else shown

    def missed_text(self) -> str:
        if not self.malignant:
            return "no malignant images"
        share = f": {with_interval(self.fnr, self.fnr_ci, 2)}" if self.fnr is not None else ""
        return f"{self.missed} of {self.malignant} missed{share}"


def groups(summary: EvaluationSummary | None) -> list[GroupFigure]:
    """Each group's figures, in skin-tone order (the groups the summary names)."""
    if summary is None:
        return []
    aucs = summary.group_auc
    found = summary.intervals
    names = [g for g in GROUPS if g in aucs or (found is not None and g in found.groups)]
    names += sorted(set(aucs) - set(names))
    out = []
    for name in names:
        n, positives, missed = (found.counts(name) if found is not None else None) or (None, None, None)
        key = group_key(name)
        out.append(GroupFigure(
            key=key, words=GROUP_WORDS.get(key, key), n=n, malignant=positives, auc=aucs.get(name),
            auc_ci=found.group(name) if found is not None else None,
            auc_reason=summary.group_auc_reason.get(name), too_few=too_few(positives, n),
            missed=missed, fnr=missed / positives if missed is not None and positives else None,
            fnr_ci=missed_interval(missed, positives)))
    return out


def too_few_groups(summary: EvaluationSummary | None) -> list[str]:
    """Public names of the groups too small to judge on this split."""
    return [g.key for g in groups(summary) if g.too_few]


_SPELLED_OUT = ("ci", "cases", "ci_groups", "ci_method", "auc_ci", "worst_auc_ci", "auc_gap_ci", "group_auc_ci",
                "group_n", "group_positives", "group_missed", "group_fnr", "group_fnr_ci", "ci_level")


def public(summary: EvaluationSummary | None) -> dict[str, Any] | None:
    """A summary for JSON and exports: groups keyed 12/34/56, every interval spelled out (auc_ci,
    worst_auc_ci, auc_gap_ci, group_auc_ci, group_n, group_positives, group_missed, group_fnr(_ci),
    ci_level, ci_method), and a note when it has none."""
    if summary is None:
        return None
    out: dict[str, Any] = {"auc": summary.auc, "worst_auc": summary.worst_auc, "best_auc": summary.best_auc,
                           "auc_gap": summary.auc_gap, "group_auc": _by_key(summary.group_auc),
                           "group_auc_reason": _by_key(summary.group_auc_reason), "n": summary.n}
    out.update((k, v) for k, v in summary.extra.items() if k not in _SPELLED_OUT)
    if summary.signed is not None:
        out["signed"] = list(summary.signed)
    if summary.groups_apart is not None:
        out["groups_apart"] = {"p": summary.groups_apart.p, "apart": summary.groups_apart.apart}
    if (point := operating_point.public(summary.operating_point, group_key)) is not None:   # counts spelled out
        out[operating_point.KEY] = point
    found = summary.intervals
    if found is None:
        out["interval"] = NO_INTERVAL
        return out
    method = str(found.method)
    rows = groups(summary)
    out.update(auc_ci=found.auc, worst_auc_ci=found.worst, auc_gap_ci=found.gap,
               group_auc_ci={g.key: g.auc_ci for g in rows}, group_n={g.key: g.n for g in rows},
               group_positives={g.key: g.malignant for g in rows}, group_missed={g.key: g.missed for g in rows},
               group_fnr={g.key: g.fnr for g in rows}, group_fnr_ci={g.key: g.fnr_ci for g in rows},
               ci_level=CI_LEVEL, ci_method=METHODS.get(method, method), ci_method_id=method, min_cases=MIN_CASES,
               too_few_to_judge=[g.key for g in rows if g.too_few])
    return out


def _by_key(by_group: Mapping[str, Any]) -> dict[str, Any]:
    return {group_key(g): v for g, v in by_group.items()}
