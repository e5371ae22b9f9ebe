"""Measured figures as a reader sees them: each with its 95 % interval, each skin-tone group named.

An `evaluated` summary stores groups as group_0/1/2 and intervals as [lo, hi] lists
(engine.evaluation.uncertainty). Every surface a person or an export reads (tree, scoreboard,
node panel, `befair show`, JSON, CSV, the session report) renders them from here:

- groups are named after DDI's skin-tone groups: 12, 34, 56 (FST I–II, III–IV, V–VI);
- a compact figure reads `.81 ±.05 · gap .16 ±.11` (± half the interval's width: the interval
  itself, which may be lopsided, is in the node panel and the JSON);
- a group with fewer than MIN_CASES malignant (or benign) cases is "too few to judge" instead of
  a bare AUC;
- a summary recorded before intervals existed says "no interval: predictions were not kept".
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.evaluation.uncertainty import MIN_CASES, too_few
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


def half_width(ci: Any) -> float | None:
    return (float(ci[1]) - float(ci[0])) / 2 if _is_interval(ci) else None


def _is_interval(ci: Any) -> bool:
    return isinstance(ci, (list, tuple)) and len(ci) == 2 and all(isinstance(x, (int, float)) for x in ci)


def has_intervals(summary: Mapping[str, Any] | None) -> bool:
    return bool(summary) and "ci_method" in (summary or {})


def plus_minus(value: float | None, ci: Any, digits: int = 2) -> str:
    """`.81 ±.05`, or `.812` when there is no interval."""
    if value is None:
        return "–"
    half = half_width(ci)
    return fmt(value, digits) if half is None else f"{fmt(value, digits)} ±{fmt(half, digits)}"


def compact(summary: Mapping[str, Any]) -> str:
    """The tree's and scoreboard's figure: `.81 ±.05 · gap .16 ±.11` (`.812 / .052` without intervals)."""
    auc, gap = summary.get("auc"), summary.get("auc_gap")
    if not has_intervals(summary):
        return f"{fmt(auc)} / {fmt(gap)}"
    return f"{plus_minus(auc, summary.get('auc_ci'))} · gap {plus_minus(gap, summary.get('auc_gap_ci'))}"


def with_interval(value: float | None, ci: Any, digits: int = 3) -> str:
    """`.812 (.774–.851)`; the bare value without an interval."""
    if value is None:
        return "–"
    if not _is_interval(ci):
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


def groups(summary: Mapping[str, Any] | None) -> list[GroupFigure]:
    """Each group's figures, in skin-tone order (the groups the summary names)."""
    summary = summary or {}
    aucs = dict(summary.get("group_auc") or {})
    names = [g for g in GROUPS if g in aucs or g in (summary.get("group_n") or {})]
    names += sorted(set(aucs) - set(names))
    out = []
    for name in names:
        n = (summary.get("group_n") or {}).get(name)
        positives = (summary.get("group_positives") or {}).get(name)
        key = group_key(name)
        out.append(GroupFigure(
            key=key, words=GROUP_WORDS.get(key, key), n=n, malignant=positives, auc=aucs.get(name),
            auc_ci=(summary.get("group_auc_ci") or {}).get(name),
            auc_reason=(summary.get("group_auc_reason") or {}).get(name), too_few=too_few(positives, n),
            missed=(summary.get("group_missed") or {}).get(name), fnr=(summary.get("group_fnr") or {}).get(name),
            fnr_ci=(summary.get("group_fnr_ci") or {}).get(name)))
    return out


def too_few_groups(summary: Mapping[str, Any] | None) -> list[str]:
    """Public names of the groups too small to judge on this split."""
    return [g.key for g in groups(summary) if g.too_few]


_GROUP_FIELDS = ("group_auc", "group_auc_reason", "group_auc_ci", "group_n", "group_positives", "group_missed",
                 "group_fnr", "group_fnr_ci")


def public(summary: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A summary for JSON and exports: groups keyed 12/34/56, and a note when it has no interval."""
    if summary is None:
        return None
    out = {k: ({group_key(g): v for g, v in value.items()} if k in _GROUP_FIELDS and isinstance(value, Mapping)
               else value) for k, value in summary.items()}
    if not has_intervals(summary):
        out["interval"] = NO_INTERVAL
    else:
        out["too_few_to_judge"] = too_few_groups(summary)
    return out
