"""How big a study must be: runs per level (an agent study) or participants (a study with people)
to detect a difference of `effect` in an outcome, by simulation from a measured spread.

The spread comes from runs already made: an imported study's runs (the published be-fair study),
a pilot's sessions, or, when no level has two runs, the runs' own 95 % intervals (a lower bound:
the test images' sampling only, not the run-to-run variation). The residuals (each run minus its
agent × level mean, scaled by √(n/(n−1)) so that resampling keeps the sample variance) are drawn
with replacement, so the simulation keeps the measured distribution's shape, not only its sd.

- Runs per level (between runs): two levels of n runs each, the second shifted by `effect`;
  Welch's t-test (standing in for the report's permutation test, which it matches closely at these
  sizes) at α / k, where k is the number of pairs of levels the report compares (Holm's first,
  strictest step; `pairs=1` plans one comparison).
- Participants (within participant): each participant's difference between two levels; from a
  pilot with people, their measured paired differences (centred); from runs, the difference of two
  independent run residuals (a participant's own level cancels in the difference, and steering is
  assumed to add no spread of its own). The paired t-test at α / k.

The power at n is the share of SIMULATIONS simulated studies whose test is below the threshold;
the answer is the smallest n with power ≥ the target (searched up to MAX_N).
"""
from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from engine.study.within import observations

SIMULATIONS = 4000
MAX_N = 1000
SEED = 20_261_127
Z95 = 1.959963984540054
FEW = 8   # fewer measured values than this: the plan says its spread is rough


@dataclass
class Spread:
    """A measured spread of one outcome: centred residuals to resample, and where they come from."""

    outcome: str
    kind: str                      # "runs" | "paired" | "per-run intervals"
    source: str                    # words: the study and what was measured
    residuals: list[float]
    groups: int                    # the agent × level groups (or level pairs) that gave residuals
    values: int                    # the runs (or paired differences) measured

    @property
    def sd(self) -> float:
        r = np.asarray(self.residuals)
        return float(math.sqrt(np.mean(r ** 2))) if r.size else float("nan")


@dataclass
class Plan:
    effect: float
    label: str                     # what the effect is: "a .05 difference", "observed base − fairness-hint"
    unit: str                      # "runs per level" | "participants"
    n: int | None                  # None: more than MAX_N
    power: float | None            # the simulated power at n
    target_power: float
    alpha: float                   # the threshold each simulated test used (α / pairs)
    why_not: str | None = None     # no plan could be drawn (a spread of zero, none measured)

    def sentence(self) -> str:
        if self.why_not:
            return f"{self.label}: no plan: {self.why_not}"
        if self.n is None:
            return f"{self.label}: more than {MAX_N} {self.unit} for {self.target_power:.0%} power"
        return f"{self.label}: {self.n} {self.unit} (simulated power {self.power:.2f})"


@dataclass
class Assumptions:
    outcome: str
    design: str                    # "between runs" | "within participant"
    spread: dict[str, Any]
    alpha: float
    pairs: int
    power: float
    simulations: int
    notes: list[str] = field(default_factory=list)


# --------------------------------------------------------------------------- measured spreads


def spread_from_runs(values: Mapping[tuple[str, str], Sequence[float]], *, outcome: str, source: str) -> Spread:
    """values: (agent, level) -> one value per run. Groups of one run give nothing."""
    residuals: list[float] = []
    groups = 0
    for runs in values.values():
        x = np.asarray(runs, dtype=float)
        if x.size < 2:
            continue
        groups += 1
        residuals += list((x - x.mean()) * math.sqrt(x.size / (x.size - 1)))
    return Spread(outcome, "runs", source, residuals, groups, sum(len(v) for v in values.values() if len(v) > 1))


def spread_from_pairs(differences: Mapping[tuple[str, str], Sequence[float]], *, outcome: str, source: str) -> Spread:
    """differences: (level a, level b) -> each participant's a − b."""
    spread = spread_from_runs(differences, outcome=outcome, source=source)
    spread.kind = "paired"
    return spread


def spread_from_intervals(intervals: Sequence[tuple[float, float]], *, outcome: str, source: str) -> Spread:
    """A run's 95 % interval as a normal sd ((hi − lo) / 3.92), the median over runs; residuals
    drawn from that normal (a fixed seed)."""
    widths = [hi - lo for lo, hi in intervals if hi > lo]
    sd = float(np.median(widths)) / (2 * Z95) if widths else float("nan")
    draws = np.random.default_rng(SEED).normal(0.0, sd, 2000) if widths else np.array([])
    return Spread(outcome, "per-run intervals", source, list(draws), 0, len(widths))


# --------------------------------------------------------------------------- power by simulation


def simulated_power(spread: Spread, n: int, effect: float, *, within: bool, alpha: float,
                    simulations: int = SIMULATIONS, seed: int = SEED) -> float:
    """The share of simulated studies of size n whose test finds the difference."""
    rng = np.random.default_rng(seed + n)
    r = np.asarray(spread.residuals, dtype=float)
    with warnings.catch_warnings():   # a simulated sample of nearly equal values: its p is simply large
        warnings.simplefilter("ignore", RuntimeWarning)
        p = _p_values(rng, r, spread.kind, n, effect, within, simulations)
    return float(np.mean(np.nan_to_num(p, nan=1.0) < alpha))


def _p_values(rng: np.random.Generator, r: np.ndarray, kind: str, n: int, effect: float, within: bool,
              simulations: int) -> np.ndarray:
    from scipy import stats

    if within:
        if kind == "paired":
            d = rng.choice(r, (simulations, n)) + effect
        else:   # a participant's difference of two sessions: two independent run residuals
            d = rng.choice(r, (simulations, n)) - rng.choice(r, (simulations, n)) + effect
        return np.asarray(stats.ttest_1samp(d, 0.0, axis=1).pvalue)
    a = rng.choice(r, (simulations, n))
    b = rng.choice(r, (simulations, n)) + effect
    return np.asarray(stats.ttest_ind(a, b, axis=1, equal_var=False).pvalue)


def needed(spread: Spread, effect: float, *, within: bool, alpha: float, power: float,
           simulations: int = SIMULATIONS) -> tuple[int | None, float | None]:
    """The smallest n (2..MAX_N) whose simulated power reaches `power`, and that power."""
    if not spread.residuals or effect == 0:
        return None, None

    def at(n: int) -> float:
        return simulated_power(spread, n, abs(effect), within=within, alpha=alpha, simulations=simulations)

    lo, hi = 2, 2
    while at(hi) < power:            # double until enough, then bisect
        if hi >= MAX_N:
            return None, None
        lo, hi = hi, min(2 * hi, MAX_N)
    if lo == hi:
        return hi, at(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if at(mid) >= power:
            hi = mid
        else:
            lo = mid
    return hi, at(hi)


def plan(spread: Spread, effects: Sequence[tuple[float, str]], *, within: bool, pairs: int = 1,
         alpha: float = 0.05, power: float = 0.8, simulations: int = SIMULATIONS) -> tuple[Assumptions, list[Plan]]:
    """Runs per level (or participants) for each (effect, label)."""
    if not 0 < power < 1:
        raise ValueError(f"the power must lie between 0 and 1, not {power}")
    threshold = alpha / max(1, pairs)
    unit = "participants" if within else "runs per level"
    out = []
    why_not = ("no value was measured" if not spread.residuals else
               "the measured spread is zero (every value alike), so it cannot say how much runs vary"
               if spread.sd <= 1e-12 else None)
    for effect, label in effects:
        if why_not:
            out.append(Plan(effect, label, unit, None, None, power, threshold, why_not))
            continue
        n, reached = needed(spread, effect, within=within, alpha=threshold, power=power, simulations=simulations)
        out.append(Plan(effect, label, unit, n, reached, power, threshold))
    notes = [_spread_note(spread, within)]
    if len(spread.residuals) < FEW and spread.kind != "per-run intervals":
        notes.append(f"the spread rests on {len(spread.residuals)} values only: a rough figure (resampling so few "
                     "values can neither show a long tail nor settle the sd)")
    if pairs > 1:
        notes.append(f"{pairs} pairs of levels are compared, Holm-corrected: each simulated test is at "
                     f"α / {pairs} = {threshold:.4f} (Holm's strictest step; the other pairs' steps are laxer)")
    notes.append("two-sided Welch t-test between two levels (the report's permutation test behaves alike)"
                 if not within else "two-sided paired t-test over participants (the report's paired analysis)")
    design = "within participant" if within else "between runs"
    return Assumptions(spread.outcome, design, {**asdict(spread), "sd": spread.sd, "residuals": len(spread.residuals)},
                       alpha, pairs, power, simulations, notes), out


def _spread_note(spread: Spread, within: bool) -> str:
    what = {"runs": f"{spread.values} runs in {spread.groups} agent × level groups, centred per group",
            "paired": f"{spread.values} paired differences in {spread.groups} level pairs, centred per pair",
            "per-run intervals": f"the median 95 % interval of {spread.values} runs, as a normal sd (a lower bound: "
                                 "the test images' sampling only, not run-to-run variation)"}[spread.kind]
    text = f"spread of {spread.outcome} from {spread.source}: sd {spread.sd:.4f} ({what}), resampled with replacement"
    if within and spread.kind != "paired":
        text += ("; a participant's difference between two levels is taken as the difference of two independent runs "
                 "(their own level cancels; steering is assumed to add no spread)")
    return text


# --------------------------------------------------------------------------- from a study's report

OUTCOME_KEYS = {"gap": "test_auc_gap", "auc": "test_auc"}
OUTCOME_NAMES = {"gap": "the skin-tone AUC gap (test)", "auc": "the test AUC"}


def run_values(report: Any, key: str, agent: str | None = None) -> dict[tuple[str, str], list[float]]:
    """(agent, level name) -> the runs' values, from a StudyReport's sessions kept in its statistics."""
    left_out = {e.get("session_id") for e in report.excluded}
    out: dict[tuple[str, str], list[float]] = {}
    for s in report.sessions:
        if s.get("session_id") in left_out or s.get(key) is None or (agent and s["model"] != agent):
            continue
        out.setdefault((str(s["model"]), report.level_name(str(s["prompt"]))), []).append(float(s[key]))
    return out


def measured_spread(report: Any, outcome: str, agent: str | None = None) -> Spread:
    """The spread of the outcome in a study's report: its participants' paired differences (a study
    with people), its runs (two or more at a level), else its runs' own intervals."""
    key = OUTCOME_KEYS[outcome]
    name = f"study {report.study}" + (f", agent {agent}" if agent else "")
    if report.within is not None:
        measure = next(m for m in report.within["measures"] if m["measure"] == key)
        diffs = _paired_differences(report.people_rows, key)
        if any(len(v) > 1 for v in diffs.values()):
            return spread_from_pairs(diffs, outcome=OUTCOME_NAMES[outcome], source=f"{name} (pilot with people, "
                                     f"{measure['model']['n_participants']} participants)")
    values = run_values(report, key, agent)
    spread = spread_from_runs(values, outcome=OUTCOME_NAMES[outcome], source=name)
    if spread.residuals:
        return spread
    intervals = [(float(s[f"{key}_ci"][0]), float(s[f"{key}_ci"][1])) for s in report.sessions
                 if s.get(f"{key}_ci") and (not agent or s["model"] == agent)]
    return spread_from_intervals(intervals, outcome=OUTCOME_NAMES[outcome], source=name)


def _paired_differences(rows: Sequence[dict[str, Any]], key: str) -> dict[tuple[str, str], list[float]]:

    per: dict[tuple[str, str], list[float]] = {}
    for o in observations(rows, key):
        per.setdefault((o.participant, o.level), []).append(o.value)
    means = {k: float(np.mean(v)) for k, v in per.items()}
    levels = list(dict.fromkeys(lv for _, lv in means))
    people = sorted({p for p, _ in means})
    out: dict[tuple[str, str], list[float]] = {}
    for i, a in enumerate(levels):
        for b in levels[i + 1:]:
            out[(a, b)] = [means[(p, a)] - means[(p, b)] for p in people if (p, a) in means and (p, b) in means]
    return out


def observed_differences(report: Any, outcome: str) -> list[tuple[str, str, str, float]]:
    """(agent, level a, level b, mean a − mean b) for every pair of levels within each agent."""
    values = run_values(report, OUTCOME_KEYS[outcome])
    out = []
    for agent in dict.fromkeys(a for a, _ in values):
        levels = [lv for a, lv in values if a == agent]
        for i, la in enumerate(levels):
            for lb in levels[i + 1:]:
                out.append((agent, la, lb, float(np.mean(values[(agent, la)]) - np.mean(values[(agent, lb)]))))
    return out
