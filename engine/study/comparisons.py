"""Can two instruction levels (or two agents) be told apart? Tests between groups of runs.

A study's runs differ for two reasons: the images the final pipeline was scored on (each run's
own 95 % interval, engine.measures.uncertainty) and the run itself (another search, another
training). The second is what a level changes, so levels and agents are compared over runs:

- the difference of the two groups' mean (test AUC, or skin-tone AUC gap) with Welch's 95 %
  interval (a t interval that does not assume equal spreads);
- a two-sided permutation test of that difference (every relabelling when there are few, else
  `RESAMPLES` random ones, a fixed seed): the share of relabellings with a difference at least as
  large. Exact for the small groups of a study, whatever the values' distribution.

Several pairs compared at once (every pair of levels within an agent, every pair of agents within
a level) are one family per figure, and their p-values are corrected for multiple comparisons by
Holm's step-down method (statsmodels.stats.multitest): two groups can be told apart when the
corrected p is below 0.05 (a family of one pair keeps its p). (A bootstrap interval of
the difference was tried first: with 5–7 runs a group it is too narrow, and it "told apart" pairs
whose exact permutation p was .09–.10 on the published study.) With so few runs only large
differences can be told apart: the report says so rather than rank.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

RESAMPLES = 10_000
SEED = 20_261_124
ALPHA = 0.05
METHOD = ("difference of means over runs: Welch's 95 % interval; told apart when a two-sided permutation test "
          f"(exact, or {RESAMPLES} random relabellings), Holm-corrected over the pairs of levels within an agent "
          f"(and of agents within a level) of each figure, gives p < {ALPHA}")
CORRECTION = "Holm (step-down, family-wise error rate), statsmodels.stats.multitest"


@dataclass(frozen=True)
class Comparison:
    """Group a minus group b on one figure."""

    figure: str            # "test AUC" | "skin-tone AUC gap"
    within: str            # what is held fixed: an agent (levels compared) or a level (agents compared)
    a: str
    b: str
    n_a: int
    n_b: int
    difference: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    p_holm: float | None = None    # p corrected over the pairs of its family (Holm); None: a family of one

    @property
    def p_used(self) -> float | None:
        return self.p_holm if self.p_holm is not None else self.p_value

    @property
    def told_apart(self) -> bool | None:
        p = self.p_used
        return None if p is None else p < ALPHA

    def sentence(self) -> str:
        head = f"{self.within}: {self.a} vs {self.b}, {self.figure}"
        if self.difference is None or self.ci is None:
            return f"{head}: not enough runs to compare (n = {self.n_a}, {self.n_b})"
        verdict = "told apart" if self.told_apart else "cannot be told apart"
        p = f", p = {self.p_value:.3f}" if self.p_value is not None else ""
        p += f", Holm {self.p_holm:.3f}" if self.p_holm is not None else ""
        return (f"{head}: difference {_signed(self.difference)} (95 % {_signed(self.ci[0])} to "
                f"{_signed(self.ci[1])}{p}, n = {self.n_a} vs {self.n_b}): {verdict}")

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "told_apart": self.told_apart, "sentence": self.sentence()}


def _signed(x: float) -> str:
    text = f"{x:+.3f}"
    return text.replace("+0.", "+.").replace("-0.", "-.")


def compare(a: Sequence[float], b: Sequence[float], *, figure: str, within: str, names: tuple[str, str],
            seed: int = SEED) -> Comparison:
    """Group a minus group b: mean difference, bootstrap interval, permutation p-value."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)

    def result(difference: float | None, ci: tuple[float, float] | None, p: float | None) -> Comparison:
        return Comparison(figure=figure, within=within, a=names[0], b=names[1], n_a=int(xa.size),
                          n_b=int(xb.size), difference=difference, ci=ci, p_value=p)

    if xa.size < 2 or xb.size < 2:
        return result(None, None, None)
    diff = float(xa.mean() - xb.mean())
    return result(diff, welch_interval(xa, xb), permutation_p(xa, xb, np.random.default_rng(seed)))


def welch_interval(xa: np.ndarray, xb: np.ndarray, level: float = 0.95) -> tuple[float, float]:
    from scipy import stats

    va, vb = xa.var(ddof=1) / xa.size, xb.var(ddof=1) / xb.size
    se = math.sqrt(va + vb)
    diff = float(xa.mean() - xb.mean())
    if se == 0.0:
        return diff, diff
    df = (va + vb) ** 2 / (va ** 2 / (xa.size - 1) + vb ** 2 / (xb.size - 1))
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return diff - half, diff + half


def permutation_p(xa: np.ndarray, xb: np.ndarray, rng: np.random.Generator) -> float:
    pooled, n_a = np.concatenate([xa, xb]), xa.size
    observed = abs(xa.mean() - xb.mean())
    if math.comb(pooled.size, n_a) <= RESAMPLES:
        splits = [list(c) for c in itertools.combinations(range(pooled.size), n_a)]
        mask = np.zeros((len(splits), pooled.size), dtype=bool)
        for i, chosen in enumerate(splits):
            mask[i, chosen] = True
    else:
        order = np.argsort(rng.random((RESAMPLES, pooled.size)), axis=1)
        mask = np.zeros((RESAMPLES, pooled.size), dtype=bool)
        np.put_along_axis(mask, order[:, :n_a], True, axis=1)
    sums = mask @ pooled
    diffs = np.abs(sums / n_a - (pooled.sum() - sums) / (pooled.size - n_a))
    return float(np.mean(diffs >= observed - 1e-12))


def between_groups(values: Mapping[tuple[str, str], Sequence[float]], *, figure: str,
                   level_order: Sequence[str] = ()) -> list[Comparison]:
    """values: (agent, level) -> one value per run. Every pair of levels within each agent, and
    every pair of agents within each level."""
    agents = list(dict.fromkeys(a for a, _ in values))
    rank = {lv: i for i, lv in enumerate(level_order)}
    levels = sorted({lv for _, lv in values}, key=lambda lv: (rank.get(lv, len(rank)), lv))
    out = []
    for agent in agents:
        mine = [lv for lv in levels if (agent, lv) in values]
        out += with_holm([compare(values[(agent, la)], values[(agent, lb)], figure=figure, within=agent,
                                  names=(la, lb)) for la, lb in itertools.combinations(mine, 2)])
    for level in levels:
        out += with_holm([compare(values[(aa, level)], values[(ab, level)], figure=figure, within=level,
                                  names=(aa, ab))
                          for aa, ab in itertools.combinations([a for a in agents if (a, level) in values], 2)])
    return out


def holm_adjust(p_values: Sequence[float], alpha: float = ALPHA) -> list[float]:
    """Holm's step-down adjusted p-values (statsmodels.stats.multitest.multipletests)."""
    from statsmodels.stats.multitest import multipletests

    if not p_values:
        return []
    return [float(p) for p in multipletests(list(p_values), alpha=alpha, method="holm")[1]]


def with_holm(family: list[Comparison]) -> list[Comparison]:
    """The family's comparisons with their Holm-corrected p (only when two or more were tested)."""
    tested = [i for i, c in enumerate(family) if c.p_value is not None]
    if len(tested) < 2:
        return family
    adjusted = holm_adjust([float(family[i].p_value or 0.0) for i in tested])
    out = list(family)
    for i, p in zip(tested, adjusted, strict=True):
        out[i] = replace(family[i], p_holm=p)
    return out
