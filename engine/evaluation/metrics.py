"""MEDFAIR-compatible metrics, overall and per skin-tone group.

The definitions follow MEDFAIR's ``utils/evaluation.py`` (Zong et al., ICLR 2023), which the
"Be Fair!" study used to score agent pipelines on DDI:

* AUC: ``sklearn.metrics.roc_curve`` (default ``drop_intermediate``) + ``auc``.
* Accuracy, "Overall FPR/FNR", "FPR-group_i"/"FNR-group_i": predictions are ``score > t`` (strict)
  where ``t`` is the F1-optimal threshold of ``precision_recall_curve`` over *all* samples (the
  first threshold reaching the maximal F1; Python's ``max`` semantics over the F1 array, so a
  NaN F1 after the first element is skipped). The per-group FPR/FNR are rounded to 4 decimals,
  exactly as MEDFAIR stores them; the overall ones are not.
* ``*_at_thres-group_i``: predictions are ``score >= 0.5``; recall via sklearn, specificity as
  TN / negatives; FNR = 1 - recall, FPR = 1 - specificity.
* ``tpr_at_tnr_i``: the ROC curve's TPR linearly interpolated at specificity 0.8 along
  ``1 - fpr``, exactly as ``scipy.interpolate.interp1d`` does it (stable sort, numpy.interp).
* ECE: 10 equal-width bins over the scores' own min..max as ``pandas.cut`` makes them (0.1 %
  widening of the outer edges), mean |mean score - mean label| weighted by bin size (empty bins
  dropped).
* BCE: the mean binary cross-entropy with each log clamped at -100 (``torch.nn.BCELoss``).
* worst_auc / worst_group: MEDFAIR's ``get_worst_auc`` (start at 1.0, ``<=``, so the last of
  tied groups wins). best_auc / best_group / auc_gap are the study's additions: the symmetric
  rule (start at 0.0, ``>=``) and gap = best - worst.

Deviations, only on degenerate input (never on DDI): a group (or the whole set) with a single
class has no AUC or TPR@TNR (``None`` plus a reason) instead of sklearn's NaN and warnings; a
recall/FNR without positives and a specificity/FPR without negatives are ``None`` (MEDFAIR gives
0.0 / 1.0 / NaN there). worst/best/gap are taken over the groups that have an AUC; the others are
named in ``group_auc_reason``.
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from sklearn import metrics as sklm

from engine.measures.uncertainty import Strata, interval_fields
from engine.task import GROUPS

THRESHOLD = 0.5
SPECIFICITY = 0.8
ECE_BINS = 10


# --------------------------------------------------------------------------- single metrics


def _clean(x: Any) -> float | None:
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def _has_both_classes(labels: np.ndarray) -> bool:
    return labels.size > 0 and bool((labels == 1).any()) and bool((labels == 0).any())


def single_class_reason(labels: np.ndarray) -> str | None:
    """Why an AUC cannot be computed for these labels, or None when it can."""
    n = int(labels.size)
    if n == 0:
        return "no cases (n=0)"
    if not (labels == 1).any():
        return f"only benign cases (n={n})"
    if not (labels == 0).any():
        return f"only malignant cases (n={n})"
    return None


def auc(labels: np.ndarray, scores: np.ndarray) -> float | None:
    """ROC AUC as MEDFAIR computes it (roc_curve + trapezoidal auc); None for a single class."""
    if not _has_both_classes(labels):
        return None
    fpr, tpr, _ = sklm.roc_curve(labels, scores, pos_label=1)
    return float(sklm.auc(fpr, tpr))


def _interp_linear(x: np.ndarray, y: np.ndarray, x_new: float) -> float:
    """Linear interpolation as scipy's interp1d does it (stable sort of x, then numpy.interp;
    outside the range of x: NaN)."""
    order = np.argsort(x, kind="mergesort")
    xs, ys = np.asarray(x, dtype=float)[order], np.asarray(y, dtype=float)[order]
    if x_new < xs[0] or x_new > xs[-1]:
        return float("nan")
    return float(np.interp(x_new, xs, ys))


def tpr_at_tnr(labels: np.ndarray, scores: np.ndarray, specificity: float = SPECIFICITY) -> float | None:
    """Sensitivity at the given specificity, interpolated along the ROC curve."""
    if not _has_both_classes(labels):
        return None
    fpr, tpr, _ = sklm.roc_curve(labels, scores)
    return _clean(_interp_linear(1.0 - fpr, tpr, specificity))


def f1_threshold(labels: np.ndarray, scores: np.ndarray) -> float:
    """MEDFAIR's F1-optimal threshold (first threshold whose F1 equals the maximum)."""
    if not _has_both_classes(labels):
        return THRESHOLD
    p, r, t = sklm.precision_recall_curve(labels, scores)
    with np.errstate(divide="ignore", invalid="ignore"):
        f1 = np.multiply(2, np.divide(np.multiply(p, r), np.add(r, p)))
    best = max(f1.tolist())  # Python max, as MEDFAIR: NaNs after the first element are skipped
    idx = [i for i in np.where(f1 == best)[0] if i < len(t)]
    return float(t[idx[0]]) if idx else THRESHOLD


def ece(labels: np.ndarray, scores: np.ndarray, num_bins: int = ECE_BINS) -> float | None:
    """Expected calibration error over equal-width bins of the scores' own range (pandas.cut)."""
    if scores.size == 0:
        return None
    bins = pd.cut(scores, num_bins, labels=False, retbins=False)
    df = pd.DataFrame({"p": scores, "y": labels.astype(float), "b": bins})
    g = df.groupby("b").agg(p=("p", "mean"), y=("y", "mean"), n=("p", "size"))
    err = np.abs(g["p"].to_numpy() - g["y"].to_numpy())
    return float(np.average(err, weights=g["n"].to_numpy() / df.shape[0]))


def bce(labels: np.ndarray, scores: np.ndarray) -> float | None:
    """Mean binary cross-entropy with logs clamped at -100 (torch.nn.BCELoss)."""
    if scores.size == 0:
        return None
    y = labels.astype(float)
    with np.errstate(divide="ignore"):
        log_p = np.maximum(np.log(scores), -100.0)
        log_q = np.maximum(np.log(1.0 - scores), -100.0)
    return float(np.mean(-(y * log_p + (1.0 - y) * log_q)))


def recall_at(labels: np.ndarray, scores: np.ndarray, threshold: float = THRESHOLD) -> float | None:
    pos = labels == 1
    if not pos.any():
        return None
    return float(((scores >= threshold) & pos).sum() / pos.sum())


def specificity_at(labels: np.ndarray, scores: np.ndarray, threshold: float = THRESHOLD) -> float | None:
    neg = labels == 0
    if not neg.any():
        return None
    return float(((scores < threshold) & neg).sum() / neg.sum())


def _one_minus(x: float | None) -> float | None:
    return None if x is None else 1.0 - x


def _rate(num: np.ndarray, den: np.ndarray) -> float | None:
    d = int(den.sum())
    return None if d == 0 else float(int(num.sum()) / d)


def _round4(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


# --------------------------------------------------------------------------- the metric set


@dataclass
class GroupResult:
    name: str
    n: int
    n_pos: int
    auc: float | None
    auc_reason: str | None
    acc: float | None
    tpr_at_tnr: float | None
    fnr_at_thres: float | None
    fpr_at_thres: float | None
    recall_at_thres: float | None
    specificity_at_thres: float | None
    ece: float | None
    bce: float | None
    fpr: float | None  # at the F1 threshold, rounded to 4 decimals (MEDFAIR)
    fnr: float | None


@dataclass
class MetricSet:
    """Every MEDFAIR metric for one set of predictions, overall and per group."""

    n: int
    n_pos: int
    auc: float | None
    auc_reason: str | None
    acc: float | None
    ece: float | None
    bce: float | None
    fpr: float | None
    fnr: float | None
    threshold: float
    groups: list[GroupResult] = field(default_factory=list)
    worst_auc: float | None = None
    worst_group: str | None = None
    best_auc: float | None = None
    best_group: str | None = None
    auc_gap: float | None = None
    intervals: dict[str, Any] = field(default_factory=dict)  # engine.measures.uncertainty.interval_fields
    # (labels, scores, group names) as scored: the operating point's cut-off is chosen from them
    # (engine.measures.operating_point); never stored
    scored: tuple[np.ndarray, np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    @property
    def group_auc(self) -> dict[str, float | None]:
        return {g.name: g.auc for g in self.groups}

    @property
    def group_auc_reason(self) -> dict[str, str]:
        return {g.name: g.auc_reason for g in self.groups if g.auc_reason}

    def medfair(self, prefix: str = "") -> dict[str, Any]:
        """The metrics under MEDFAIR's names, in the study's column order (45 for 3 groups)."""
        out: dict[str, Any] = {"Overall AUC": self.auc, "Overall Acc": self.acc}
        for g in self.groups:
            out[f"acc-{g.name}"] = g.acc
            out[f"auc-{g.name}"] = g.auc
        out["Overall ECE"] = self.ece
        out["Overall BCE"] = self.bce
        for i, g in enumerate(self.groups):
            suffix = g.name[len("group_"):] if g.name.startswith("group_") else str(i)
            out[f"tpr_at_tnr_{suffix}"] = g.tpr_at_tnr
            out[f"fnr_at_thres-{g.name}"] = g.fnr_at_thres
            out[f"fpr_at_thres-{g.name}"] = g.fpr_at_thres
            out[f"recall_at_thres-{g.name}"] = g.recall_at_thres
            out[f"specificity_at_thres-{g.name}"] = g.specificity_at_thres
            out[f"ECE-{g.name}"] = g.ece
            out[f"BCE-{g.name}"] = g.bce
        out["worst_auc"] = self.worst_auc
        out["worst_group"] = f"auc-{self.worst_group}" if self.worst_group else None
        out["best_auc"] = self.best_auc
        out["best_group"] = f"auc-{self.best_group}" if self.best_group else None
        out["auc_gap"] = self.auc_gap
        out["Overall FPR"] = self.fpr
        out["Overall FNR"] = self.fnr
        for g in self.groups:
            out[f"FPR-{g.name}"] = g.fpr
        for g in self.groups:
            out[f"FNR-{g.name}"] = g.fnr
        return {prefix + k: v for k, v in out.items()}

    def summary(self) -> dict[str, Any]:
        """The `evaluated` event's summary: headline AUC, worst/best/gap and per-group AUCs, and
        with `intervals` their 95 % intervals and each group's n, malignant and missed cases."""
        return {
            "auc": self.auc,
            "worst_auc": self.worst_auc,
            "best_auc": self.best_auc,
            "auc_gap": self.auc_gap,
            "group_auc": self.group_auc,
            "group_auc_reason": self.group_auc_reason,
            "n": self.n,
            **self.intervals,
        }


def _group_name(g: Any) -> str:
    if isinstance(g, (int, np.integer)) and not isinstance(g, bool):
        return f"group_{int(g)}"
    if isinstance(g, float) and g.is_integer():
        return f"group_{int(g)}"
    return str(g)


def _group_order(names: Iterable[str]) -> list[str]:
    present = set(names)
    extra = sorted(present - set(GROUPS))
    if present and not present & set(GROUPS) and not any(n.startswith("group_") for n in present):
        return extra  # some other grouping altogether: only what is there
    return [*GROUPS, *extra]


def _as_arrays(labels: Sequence[Any] | np.ndarray, scores: Sequence[Any] | np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels)
    if y.dtype == bool:
        y = y.astype(int)
    y = y.astype(float)
    s = np.asarray(scores, dtype=float)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"labels and scores must be 1-D and equally long ({y.shape} vs {s.shape})")
    if not np.isin(y, (0.0, 1.0)).all():
        raise ValueError("labels must be 0/1")
    if not np.isfinite(s).all():
        raise ValueError("scores contain NaN or infinite values")
    return y.astype(int), s


def compute_metrics(labels: Sequence[Any] | np.ndarray, scores: Sequence[Any] | np.ndarray,
                    groups: Sequence[Any] | np.ndarray, *, intervals: bool = False) -> MetricSet:
    """The full MEDFAIR metric set from 0/1 labels, scores in [0, 1] and group ids.

    `groups` holds names like "group_0" or integers (0 -> "group_0"). The three skin-tone groups
    always appear (an absent one has n=0 and no AUC); other names follow, sorted. A grouping with
    none of the group_N names (e.g. "light"/"dark") is reported as it is, sorted.
    `intervals`: also the 95 % intervals (engine.measures.uncertainty; ~30 ms for 656 images).
    """
    y, s = _as_arrays(labels, scores)
    names = np.array([_group_name(g) for g in groups], dtype=object)
    if names.shape != y.shape:
        raise ValueError("groups must be as long as labels")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        thr = f1_threshold(y, s)
        pred = (s > thr).astype(int)
        result = _overall(y, s, pred, thr)
        for name in _group_order(names.tolist()):
            idx = names == name
            result.groups.append(_group_result(name, y[idx], s[idx], pred[idx]))
    _worst_and_best(result)
    result.scored = (y, s, names)
    if intervals:

        strata = Strata.of(y, names, [g.name for g in result.groups])
        result.intervals = interval_fields(s, strata, result)
    return result


def _overall(y: np.ndarray, s: np.ndarray, pred: np.ndarray, thr: float) -> MetricSet:
    neg, pos = y == 0, y == 1
    return MetricSet(
        n=int(y.size), n_pos=int(pos.sum()), auc=auc(y, s), auc_reason=single_class_reason(y),
        acc=float((pred == y).mean()) if y.size else None, ece=ece(y, s), bce=bce(y, s),
        fpr=_rate((pred == 1) & neg, neg), fnr=_rate((pred == 0) & pos, pos), threshold=thr,
    )


def _group_result(name: str, gy: np.ndarray, gs: np.ndarray, gp: np.ndarray) -> GroupResult:
    recall, spec = recall_at(gy, gs), specificity_at(gy, gs)
    return GroupResult(
        name=name, n=int(gy.size), n_pos=int(gy.sum()), auc=auc(gy, gs), auc_reason=single_class_reason(gy),
        acc=float((gp == gy).mean()) if gy.size else None, tpr_at_tnr=tpr_at_tnr(gy, gs),
        fnr_at_thres=_one_minus(recall), fpr_at_thres=_one_minus(spec), recall_at_thres=recall,
        specificity_at_thres=spec, ece=ece(gy, gs), bce=bce(gy, gs),
        fpr=_round4(_rate((gp == 1) & (gy == 0), gy == 0)), fnr=_round4(_rate((gp == 0) & (gy == 1), gy == 1)),
    )


def _worst_and_best(result: MetricSet) -> None:
    """The worst and best group by AUC (the later of equals) and the gap between them."""
    scored = [(g.name, g.auc) for g in result.groups if g.auc is not None]
    if not scored:
        return
    worst, worst_g = 1.0, None
    best, best_g = 0.0, None
    for name, group_auc in scored:
        if group_auc <= worst:
            worst, worst_g = group_auc, name
        if group_auc >= best:
            best, best_g = group_auc, name
    result.worst_auc, result.worst_group = worst, worst_g
    result.best_auc, result.best_group = best, best_g
    result.auc_gap = best - worst
