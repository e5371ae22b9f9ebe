"""How sure a measured figure is: 95 % intervals by a bootstrap stratified by skin-tone group and label.

Per-group AUCs rest on few malignant cases (DDI: 48 in FST V–VI; a small validation split: a
handful), so every AUC, per-group AUC, worst-group AUC and gap carries an interval, and two nodes
measured on the same images are compared by a paired bootstrap of their difference.

Method (`METHOD`): each resample draws, within every (skin-tone group × label) cell, as many
images as the cell holds, with replacement (multinomial counts), so every resample keeps each
group's n and malignant count; `N_RESAMPLES` resamples from a fixed seed, so the same predictions
always give the same intervals. A resample's AUC is the trapezoidal ROC AUC of the weighted sample
(ties count one half), the same figure as sklearn's roc_curve + auc on the resampled images,
computed for all resamples at once from cumulative weights: O(resamples × images).

- AUC and each group's AUC: a logit interval, logit⁻¹(logit(AUC) ± 1.96·SD), SD the resamples'
  spread on the logit scale. An AUC near 1 has a lopsided sampling distribution, and the plain
  percentile interval undercovers with few malignant cases: measured on binormal data with a
  validation split's composition (29/18/5 malignant per group, AUC .92/.90/.85), the percentile
  interval covered the truth 91/92/83 % of the time, the logit interval 93/96/97 %.
- Worst-group AUC (a minimum): percentile interval.
- Differences between skin-tone groups (`group_differences`): every pair's AUC difference gets a
  simultaneous interval, d ± c·SD, SD each difference's spread over the resamples and c the 95th
  percentile of the resamples' largest studentised deviation max_pairs |d* − d| / SD (a bootstrap
  max-t band: all pairs hold together 95 % of the time). Stored: the signed differences a
  clinician reads (dark − light, dark − medium; and medium − light) with their intervals, and the
  max-t test of equal group AUCs (p: the share of resamples whose largest studentised deviation
  reaches the observed one; "apart" when some pair's interval excludes 0, i.e. p ≤ .05).
- The gap (MEDFAIR's max − min, kept as the point estimate) gets the interval those pairwise
  intervals imply: the true gap is the largest |difference|, so it lies between the largest
  distance from 0 to a pair's interval (0 when every interval includes 0) and the largest |bound|.
  It holds whenever the simultaneous intervals do, whatever the true gap. The percentile interval
  of max − min (METHOD_ID v1) inherits its upward bias and cannot hold a small true gap. Measured
  on binormal data with the default test split's composition (208/241/207 images, 49/74/48
  malignant; 500 data sets per true gap; `python -m tests.uncertainty_coverage --binormal`):

  | true gap | 0 | .01 | .03 | .05 | .08 | .12 | .20 |
  | --- | --- | --- | --- | --- | --- | --- | --- |
  | percentile of max − min (v1) | .00 | .44 | .89 | .93 | .96 | .97 | .96 |
  | bias-corrected percentile | .00 | .77 | .86 | .85 | .86 | .90 | .93 |
  | from the pairwise max-t intervals (v2) | .96 | .97 | 1.0 | .99 | .99 | .99 | .98 |

  at a cost of width (median .12–.23 against .10–.18). The signed differences' simultaneous
  intervals covered .97–.99. With the default validation split's composition (187/147/52
  images, 29/18/5 malignant: FST V–VI too few to judge) the bootstrap understates the spread of
  an AUC resting on 5 cases: the gap covered .84 at a true gap of 0 and .91–.99 above, dark −
  light .88–.92, dark − medium .92–.93 (`--split validation`). Against SynthDerm's ground truth
  (tests/uncertainty_coverage.py: 8 nodes of an offline session and 22 "levelled" pipelines, 40
  draws of the default test split each) the gap covered .96 / 1.00 / .99 of 480 / 440 / 280
  pairs whose true gap was under .03 / .03–.08 / over .08, the signed differences .97–.99.
- Missed malignant cases (false-negative rate at the 0.5 threshold, MEDFAIR's fnr_at_thres) per
  group: a Wilson score interval (a proportion of the group's malignant cases; the bootstrap
  would give [0, 0] for a group with no miss).

fairlearn's `MetricFrame(n_boot=…)` resamples rows without stratification (a resample can lose
every malignant case of a small group) and computes each resample in Python through pandas;
scipy.stats.bootstrap cannot pair two nodes' resamples across cells of different sizes. Hence the
vectorised loop here; tests/unit/test_uncertainty.py checks it against scipy.stats.bootstrap.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Protocol

import numpy as np

from engine.task import GROUPS

CI_LEVEL = 0.95
N_RESAMPLES = 2000
SEED = 20_261_124
_V1 = (f"bootstrap stratified by skin-tone group and label, {N_RESAMPLES} resamples, fixed seed; AUCs: logit "
       "interval from the resamples' spread; worst-group AUC and gap: percentile interval; "
       "missed malignant cases: Wilson score interval")
METHOD = (f"bootstrap stratified by skin-tone group and label, {N_RESAMPLES} resamples, fixed seed; AUCs: logit "
          "interval from the resamples' spread; worst-group AUC: percentile interval; differences between "
          "skin-tone groups' AUCs: simultaneous bootstrap max-t intervals over every pair of groups; gap (max − "
          "min): the range those pairwise intervals allow for the largest difference (it reaches 0 when every "
          "pair's interval includes 0); groups told apart: bootstrap max-t test of equal skin-tone group AUCs; missed "
          "malignant cases: Wilson score interval")
# What a stored summary says (kept short: every evaluated event carries it); METHODS spells it out.
METHOD_ID = f"stratified-bootstrap-{N_RESAMPLES}-v2"
METHODS = {f"stratified-bootstrap-{N_RESAMPLES}-v1": _V1, METHOD_ID: METHOD}
GROUP_TEST = "bootstrap max-t test of equal skin-tone group AUCs"
# The differences a clinician reads: the darkest group against each lighter one (and the third
# pair, so that a test that tells groups apart always shows the pair that does).
SIGNED_PAIRS = ((("group_2", "group_0"), "dark − light"), (("group_2", "group_1"), "dark − medium"),
                (("group_1", "group_0"), "medium − light"))
DIGITS = 4  # interval bounds are stored to 4 decimals
MIN_CASES = 10  # fewer malignant (or benign) cases than this in a group: too few to judge its AUC
FNR_THRESHOLD = 0.5

Interval = tuple[float, float]
_NORMAL = NormalDist()


@dataclass(frozen=True)
class Strata:
    """The images of one held-out set grouped into (skin-tone group × label) cells."""

    labels: np.ndarray                 # 0/1 per image
    groups: np.ndarray                 # group name per image (object array)
    names: tuple[str, ...]             # group names, in report order
    cells: tuple[np.ndarray, ...]      # image indices of each (group, label) cell

    @classmethod
    def of(cls, labels: Sequence[int] | np.ndarray, groups: Sequence[str] | np.ndarray,
           names: Sequence[str] | None = None) -> Strata:
        y = np.asarray(labels, dtype=int)
        g = np.asarray([str(x) for x in groups], dtype=object)
        order = tuple(names) if names is not None else tuple(sorted(set(g.tolist())))
        cells = tuple(np.flatnonzero((g == name) & (y == lab)) for name in order for lab in (0, 1))
        return cls(labels=y, groups=g, names=order, cells=cells)

    @property
    def n(self) -> int:
        return int(self.labels.size)

    def counts(self, n_resamples: int = N_RESAMPLES, seed: int = SEED) -> np.ndarray:
        """(images × n_resamples) how often each image is drawn; each cell keeps its size. Images
        are rows so that taking a group's or a class's images copies whole rows."""
        rng = np.random.default_rng(seed)
        out = np.zeros((self.n, n_resamples), dtype=np.float32)
        columns = np.arange(n_resamples, dtype=np.int32)
        for cell in self.cells:
            if cell.size:  # draws with replacement within the cell, counted per resample
                drawn = rng.integers(0, cell.size, size=(n_resamples, cell.size), dtype=np.int32) * n_resamples
                drawn += columns[:, None]
                out[cell] = np.bincount(drawn.ravel(), minlength=cell.size * n_resamples).reshape(
                    cell.size, n_resamples)
        return out


_COUNTS: dict[tuple[bytes, tuple[str, ...]], np.ndarray] = {}
_COUNTS_KEPT = 4


def shared_counts(strata: Strata) -> np.ndarray:
    """strata.counts(), kept for the last few held-out sets: every node of a split is resampled
    the same way (paired), and the counts are drawn once."""
    key = (strata.labels.tobytes() + "\x00".join(strata.groups.tolist()).encode(), strata.names)
    if key not in _COUNTS:
        while len(_COUNTS) >= _COUNTS_KEPT:
            _COUNTS.pop(next(iter(_COUNTS)))
        _COUNTS[key] = strata.counts()
    return _COUNTS[key]


def weighted_auc(scores: np.ndarray, labels: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Trapezoidal ROC AUC of each weighted sample (columns of `weights`, images × samples); NaN
    where a class has no weight. Counts are whole numbers, so the float32 sums are exact."""
    pos, neg = np.flatnonzero(labels == 1), np.flatnonzero(labels == 0)
    order = neg[np.argsort(scores[neg], kind="mergesort")]
    s_neg_sorted = scores[order]
    cum = np.zeros((order.size + 1, weights.shape[1]), dtype=np.float32)
    np.cumsum(weights[order], axis=0, out=cum[1:])
    lo = np.searchsorted(s_neg_sorted, scores[pos], side="left")
    hi = np.searchsorted(s_neg_sorted, scores[pos], side="right")
    below = cum[lo]
    half_ties = cum[hi]
    half_ties -= below
    half_ties *= 0.5
    below += half_ties
    w_pos = weights[pos]
    below *= w_pos
    with np.errstate(invalid="ignore", divide="ignore"):
        out: np.ndarray = below.sum(axis=0, dtype=np.float64) / (w_pos.sum(axis=0, dtype=np.float64) * cum[-1])
    return out


@dataclass(frozen=True)
class Replicates:
    """One node's figures in every resample (same resamples for every node of a split: paired)."""

    auc: np.ndarray
    group_auc: dict[str, np.ndarray]   # only the groups that have both classes
    worst: np.ndarray | None
    gap: np.ndarray | None

    def statistic(self, name: str) -> np.ndarray | None:
        """'auc', 'worst_auc' or 'auc_gap' across resamples."""
        return {"auc": self.auc, "worst_auc": self.worst, "auc_gap": self.gap}[name]


def replicates(scores: Sequence[float] | np.ndarray, strata: Strata, counts: np.ndarray) -> Replicates:
    s = np.asarray(scores, dtype=float)
    y = strata.labels
    auc = weighted_auc(s, y, counts) if 0 < int(y.sum()) < y.size else np.full(counts.shape[1], np.nan)
    groups: dict[str, np.ndarray] = {}
    for name in strata.names:
        idx = np.flatnonzero(strata.groups == name)
        gy = y[idx]
        if 0 < int(gy.sum()) < gy.size:
            groups[name] = weighted_auc(s[idx], gy, counts[idx])
    if not groups:
        return Replicates(auc, groups, None, None)
    stacked = np.vstack(list(groups.values()))
    worst, best = stacked.min(axis=0), stacked.max(axis=0)
    return Replicates(auc, groups, worst, best - worst)


def _alpha(level: float) -> float:
    return (1.0 - level) / 2.0


def percentile(values: np.ndarray, level: float = CI_LEVEL) -> Interval:
    a = _alpha(level)
    lo, hi = np.quantile(values, [a, 1.0 - a])
    return float(lo), float(hi)


def logit_interval(values: np.ndarray, estimate: float, level: float = CI_LEVEL) -> Interval:
    """logit⁻¹(logit(estimate) ± z·SD(logit(values))): an AUC's interval that keeps within [0, 1]
    and widens on the side away from 1."""
    eps = 1e-4
    z = _NORMAL.inv_cdf(1.0 - _alpha(level))
    clipped = np.clip(values[np.isfinite(values)], eps, 1.0 - eps)
    spread = float(np.std(np.log(clipped / (1.0 - clipped)), ddof=1)) if clipped.size > 1 else 0.0
    centre = math.log(min(max(estimate, eps), 1.0 - eps) / (1.0 - min(max(estimate, eps), 1.0 - eps)))
    return 1.0 / (1.0 + math.exp(-(centre - z * spread))), 1.0 / (1.0 + math.exp(-(centre + z * spread)))


def wilson(successes: int, trials: int, level: float = CI_LEVEL) -> Interval | None:
    """Wilson score interval of a proportion; None without trials."""
    if trials <= 0:
        return None
    z = _NORMAL.inv_cdf(1.0 - _alpha(level))
    p = successes / trials
    denom = 1.0 + z * z / trials
    centre = (p + z * z / (2 * trials)) / denom
    half = z * math.sqrt(p * (1 - p) / trials + z * z / (4 * trials * trials)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


@dataclass(frozen=True)
class GroupDifferences:
    """Every pair of skin-tone groups' AUC difference (a − b) with its simultaneous interval, and
    the max-t test of equal group AUCs."""

    pairs: tuple[tuple[str, str], ...]
    diff: np.ndarray
    low: np.ndarray
    high: np.ndarray
    p: float

    @property
    def apart(self) -> bool:
        """Some pair's interval excludes 0: at least two groups' AUCs differ."""
        return bool(np.any((self.low > 0) | (self.high < 0)))

    def gap(self) -> Interval:
        """The interval of the largest |difference| (the gap) that the pairwise intervals allow."""
        far = np.where(self.low > 0, self.low, np.where(self.high < 0, -self.high, 0.0))
        return float(far.max()), float(min(1.0, np.maximum(np.abs(self.low), np.abs(self.high)).max()))

    def pair(self, a: str, b: str) -> tuple[float, float, float] | None:
        """(a − b, low, high); None when either group has no AUC."""
        for i, p in enumerate(self.pairs):
            if p == (a, b):
                return float(self.diff[i]), float(self.low[i]), float(self.high[i])
            if p == (b, a):
                return -float(self.diff[i]), -float(self.high[i]), -float(self.low[i])
        return None


def group_differences(rep: Replicates, group_point: Mapping[str, float | None],
                      level: float = CI_LEVEL) -> GroupDifferences | None:
    """Simultaneous max-t intervals of every pair's AUC difference over the same resamples; None
    with fewer than two groups that have an AUC."""
    names = [n for n in rep.group_auc if group_point.get(n) is not None]
    pairs = tuple((a, b) for i, a in enumerate(names) for b in names[i + 1:])
    if not pairs:
        return None
    stacked = np.vstack([rep.group_auc[a] - rep.group_auc[b] for a, b in pairs])
    diff = np.array([float(group_point[a]) - float(group_point[b]) for a, b in pairs])  # type: ignore[arg-type]
    spread = stacked.std(axis=1, ddof=1)
    spread = np.where(spread > 0, spread, np.finfo(float).tiny)  # a pair that never varies: no spread
    deviation = np.max(np.abs(stacked - diff[:, None]) / spread[:, None], axis=0)
    # inverted-CDF quantile and p = share of resamples at least as extreme: a pair's interval
    # excludes 0 exactly when p <= 1 - level, so the words and the test never disagree
    critical = float(np.quantile(deviation, level, method="inverted_cdf"))
    observed = float(np.max(np.abs(diff) / spread))
    p = int(np.count_nonzero(deviation >= observed)) / deviation.size
    return GroupDifferences(pairs, diff, diff - critical * spread, diff + critical * spread, p)


def difference_fields(differences: GroupDifferences | None, names: Sequence[str]) -> dict[str, Any]:
    """`signed`: [diff, low, high] of each of SIGNED_PAIRS in turn (dark − light, dark − medium,
    medium − light; nulls where a group has no AUC) and `groups_apart`: {p, apart} (the test is
    METHODS' "groups told apart"). Compact: every evaluated event carries them."""
    if differences is None:
        return {}
    signed: list[float | None] = []
    for (a, b), _ in SIGNED_PAIRS:
        found = differences.pair(a, b) if a in names and b in names else None
        signed += [round(v, DIGITS) for v in found] if found is not None else [None, None, None]
    return {"signed": signed, "groups_apart": {"p": round(differences.p, DIGITS), "apart": differences.apart}}


def _rounded(interval: Interval | tuple[Any, ...] | None) -> list[float | None]:
    if interval is None:
        return [None, None]
    return [round(float(interval[0]), DIGITS), round(float(interval[1]), DIGITS)]


def interval_fields(scores: Sequence[float] | np.ndarray, strata: Strata, point: PointEstimates,
                    counts: np.ndarray | None = None) -> dict[str, Any]:
    """The summary fields an `evaluated` event gains, kept compact (every event of a long session is
    decoded when it opens; `Intervals` reads them, engine.session.figure_text.public spells them out):

    - `ci`: [AUC lo, hi, worst-group lo, hi, gap lo, hi, then each group's AUC lo, hi] (null where a
      figure has none);
    - `cases`: [images, malignant, missed malignant] per group;
    - `ci_groups`: the groups' names, in both lists' order, only when not the three skin-tone groups;
    - `ci_method`: the method's id (METHODS spells it out);
    - `signed`: [diff, low, high] per pair of SIGNED_PAIRS and `groups_apart`: {p, apart}
      (difference_fields; engine.session.views.group_tests reads them; absent with fewer than two
      groups that have an AUC, and in summaries recorded before METHOD_ID v2).
    `point`: the point estimates (engine.evaluation.metrics.MetricSet)."""
    s = np.asarray(scores, dtype=float)
    rep = replicates(s, strata, shared_counts(strata) if counts is None else counts)
    y = strata.labels
    group_point = point.group_auc
    ci: list[float | None] = []
    ci += _rounded(logit_interval(rep.auc, point.auc)) if point.auc is not None else [None, None]
    ci += _rounded(percentile(rep.worst)) if rep.worst is not None and point.worst_auc is not None \
        else [None, None]
    differences = group_differences(rep, group_point)
    gap = differences.gap() if differences is not None else (percentile(rep.gap) if rep.gap is not None else None)
    ci += _rounded(gap) if gap is not None and point.auc_gap is not None else [None, None]
    cases: list[int] = []
    for name in strata.names:
        values = rep.group_auc.get(name)
        group = group_point.get(name)
        ci += _rounded(logit_interval(values, group)) if values is not None and group is not None else [None, None]
        idx = strata.groups == name
        cases += [int(idx.sum()), int(y[idx].sum()), int(((s < FNR_THRESHOLD) & idx & (y == 1)).sum())]
    fields: dict[str, Any] = {"ci": ci, "cases": cases, "ci_method": METHOD_ID,
                              **difference_fields(differences, strata.names)}
    if tuple(strata.names) != GROUPS:
        fields["ci_groups"] = list(strata.names)
    return fields


class PointEstimates(Protocol):
    """The point estimates the intervals are built around."""

    @property
    def auc(self) -> float | None: ...
    @property
    def worst_auc(self) -> float | None: ...
    @property
    def auc_gap(self) -> float | None: ...
    @property
    def group_auc(self) -> Mapping[str, float | None]: ...


@dataclass(frozen=True)
class Intervals:
    """A summary's compact interval fields (see interval_fields), read back
    (engine.measures.summary.EvaluationSummary.intervals)."""

    ci: Sequence[float | None]
    cases: Sequence[int]
    groups: tuple[str, ...]
    method: str | None = None   # the method's id (METHODS spells it out)

    def _pair(self, i: int) -> list[float] | None:
        lo, hi = (self.ci[i], self.ci[i + 1]) if len(self.ci) > i + 1 else (None, None)
        return None if lo is None or hi is None else [float(lo), float(hi)]

    @property
    def auc(self) -> list[float] | None:
        return self._pair(0)

    @property
    def worst(self) -> list[float] | None:
        return self._pair(2)

    @property
    def gap(self) -> list[float] | None:
        return self._pair(4)

    def group(self, name: str) -> list[float] | None:
        return self._pair(6 + 2 * self.groups.index(name)) if name in self.groups else None

    def counts(self, name: str) -> tuple[int, int, int] | None:
        """(images, malignant, missed malignant) of a group."""
        if name not in self.groups:
            return None
        i = 3 * self.groups.index(name)
        return (int(self.cases[i]), int(self.cases[i + 1]), int(self.cases[i + 2])) if len(self.cases) > i + 2 \
            else None


def missed_interval(missed: int | None, positives: int | None) -> list[float] | None:
    """The Wilson interval of a group's share of missed malignant cases (from its stored counts)."""
    interval = wilson(missed, positives) if missed is not None and positives else None
    return None if interval is None else [round(interval[0], DIGITS), round(interval[1], DIGITS)]


def too_few(positives: int | None, n: int | None) -> bool:
    """A group's AUC is too uncertain to judge with fewer than MIN_CASES malignant or benign cases."""
    if positives is None or n is None:
        return False
    return positives < MIN_CASES or n - positives < MIN_CASES


def difference(a: Replicates, b: Replicates, statistic: str, level: float = CI_LEVEL) -> Interval | None:
    """Percentile interval of a − b for one statistic, over the same resamples (paired)."""
    va, vb = a.statistic(statistic), b.statistic(statistic)
    if va is None or vb is None:
        return None
    diff = va - vb
    diff = diff[np.isfinite(diff)]
    return percentile(diff, level) if diff.size else None
