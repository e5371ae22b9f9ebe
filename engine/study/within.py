"""Within-participant statistics for a study with people: every participant steers every level
(in a Latin-square order), so their sessions are not independent and levels are compared within
each person.

- The model: a linear mixed model, `outcome ~ level × expertise` with a random intercept per
  participant (statsmodels' MixedLM, REML), fitted per measure. Fixed effects in treatment
  coding (the spec's first level and the first expertise group present are the references); each
  expertise group × level gets the model's estimate (the sum of its fixed effects) with its 95 %
  Wald interval. With fewer than MIN_PARTICIPANTS participants, or a singular fit (the
  participants' variance estimated at zero, a design the data cannot estimate, no convergence),
  the model is not reported: the report says why and the paired analysis stands alone.
- The paired analysis: for each pair of levels, each participant's difference (their sessions at
  level a minus at level b, repeats averaged), the mean difference over participants with
  Student's t interval (n − 1 degrees of freedom) and the paired t-test's p, Holm-corrected over
  the pairs of levels of one measure (statsmodels.stats.multitest). Told apart when the corrected
  p < .05.

Measures: the final choice's test AUC, skin-tone AUC gap and sensitivity on dark skin (FST V–VI)
at the session's operating point (sessions left out of the statistics are left out here too; a
session measured before operating points has no sensitivity), and each answer on a scale.
"""
from __future__ import annotations

import itertools
import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from engine.study.comparisons import holm_adjust

MIN_PARTICIPANTS = 4
ALPHA = 0.05
OUTCOMES = {"test_auc": "test AUC", "test_auc_gap": "skin-tone AUC gap",
            "test_sensitivity_dark": "sensitivity on dark skin at the operating point"}
MODEL_METHOD = ("linear mixed model: outcome ~ level × expertise, random intercept per participant "
                "(statsmodels MixedLM, REML); 95 % Wald intervals")
PAIRED_METHOD = ("paired differences within participant (repeats averaged): mean over participants with "
                 "Student's t 95 % interval; paired t-test, Holm-corrected over the pairs of levels of each "
                 f"measure; told apart when the corrected p < {ALPHA}")
FALLBACK = "the paired analysis stands alone"


@dataclass(frozen=True)
class Observation:
    participant: str
    group: str        # the participant's expertise group (their role)
    level: str
    value: float


@dataclass
class Effect:
    term: str                      # "level fairness-methods (vs base)", "... × expertise ..."
    level: str | None              # the level the term adds (None: any level)
    group: str | None              # the expertise group it adds (None: any group)
    estimate: float
    se: float
    ci: tuple[float, float]
    p_value: float


@dataclass
class ModelFit:
    measure: str
    label: str
    status: str                    # "fitted" | "too few participants" | "singular fit" | "one level"
    why: str | None
    n_participants: int
    n_sessions: int
    references: dict[str, str | None] = field(default_factory=dict)
    effects: list[Effect] = field(default_factory=list)
    cells: list[dict[str, Any]] = field(default_factory=list)   # the model's estimate per group × level
    participant_variance: float | None = None
    residual_variance: float | None = None

    @property
    def fitted(self) -> bool:
        return self.status == "fitted"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "fitted": self.fitted, "method": MODEL_METHOD}


@dataclass
class PairedDifference:
    measure: str
    label: str
    a: str
    b: str
    n: int                         # participants with both levels
    mean: float | None
    sd: float | None
    ci: tuple[float, float] | None
    p_value: float | None
    p_holm: float | None = None

    @property
    def told_apart(self) -> bool | None:
        return None if self.p_holm is None else self.p_holm < ALPHA

    def sentence(self) -> str:
        head = f"{self.label}: {self.a} − {self.b}"
        if self.mean is None or self.ci is None:
            return f"{head}: {self.n} participant(s) with both levels: too few to compare"
        text = (f"{head}: mean paired difference {_signed(self.mean)} (95 % {_signed(self.ci[0])} to "
                f"{_signed(self.ci[1])}, n = {self.n} participants")
        if self.p_value is None:
            return text + "): every participant's difference is the same (no spread): no test"
        verdict = "told apart" if self.told_apart else "cannot be told apart"
        return text + f", p = {self.p_value:.3f}, Holm {self.p_holm:.3f}): {verdict}"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "told_apart": self.told_apart, "sentence": self.sentence()}


def _signed(x: float) -> str:
    return f"{x:+.3f}".replace("+0.", "+.").replace("-0.", "-.")


# --------------------------------------------------------------------------- the data


def measures(rows: Sequence[dict[str, Any]], scale_questions: Sequence[str] = ()) -> dict[str, str]:
    """measure column -> its name: the outcomes, then each scale question (q_<id>)."""
    out = dict(OUTCOMES)
    out.update({f"q_{q}": f"answer {q}" for q in scale_questions})
    return out


def observations(rows: Sequence[dict[str, Any]], measure: str) -> list[Observation]:
    """One observation per session that has the measure; an outcome only from a session kept in
    the statistics (an answer counts whenever it was given)."""
    out = []
    for r in rows:
        value = r.get(measure)
        if value is None or value == "" or (measure in OUTCOMES and r.get("excluded")):
            continue
        x = float(value)
        if math.isfinite(x):
            out.append(Observation(str(r["participant"]), str(r["role"]), str(r["level"]), x))
    return out


# --------------------------------------------------------------------------- the mixed model


def fit_model(obs: Sequence[Observation], *, measure: str, label: str, level_order: Sequence[str],
              group_order: Sequence[str]) -> ModelFit:
    """The mixed model for one measure, or why it is not reported (see the module docstring)."""
    people = sorted({o.participant for o in obs})
    fit = ModelFit(measure, label, "fitted", None, len(people), len(obs))
    levels = [lv for lv in level_order if any(o.level == lv for o in obs)]
    groups = [g for g in group_order if any(o.group == g for o in obs)]
    fit.references = {"level": levels[0] if levels else None, "expertise": groups[0] if groups else None}
    if not obs:
        fit.status, fit.why = "no data", "no session has this measure yet"
    elif len(levels) < 2:
        fit.status, fit.why = "one level", "fewer than two levels have this measure: nothing to compare"
    elif len(people) < MIN_PARTICIPANTS:
        fit.status, fit.why = "too few participants", (
            f"{len(people)} participant(s) have this measure; the model needs at least {MIN_PARTICIPANTS}")
    else:
        _fit(fit, obs, levels, groups)
    return fit


def _columns(levels: Sequence[str], groups: Sequence[str]) -> list[tuple[str, str | None, str | None]]:
    """(term, level, group) per fixed effect, in treatment coding."""
    cols: list[tuple[str, str | None, str | None]] = [("intercept", None, None)]
    cols += [(f"level {lv} (vs {levels[0]})", lv, None) for lv in levels[1:]]
    cols += [(f"expertise {g} (vs {groups[0]})", None, g) for g in groups[1:]]
    cols += [(f"level {lv} × expertise {g}", lv, g) for lv in levels[1:] for g in groups[1:]]
    return cols


def _row(level: str, group: str, cols: Sequence[tuple[str, str | None, str | None]]) -> list[float]:
    return [1.0 if (lv is None or lv == level) and (g is None or g == group) else 0.0 for _, lv, g in cols]


def _fit(fit: ModelFit, obs: Sequence[Observation], levels: list[str], groups: list[str]) -> None:
    from statsmodels.regression.mixed_linear_model import MixedLM

    cols = _columns(levels, groups)
    x = np.array([_row(o.level, o.group, cols) for o in obs])
    keep = [j for j in range(len(cols)) if x[:, j].any()]     # a group × level no session reached
    cols, x = [cols[j] for j in keep], x[:, keep]
    y = np.array([o.value for o in obs])
    if np.linalg.matrix_rank(x) < x.shape[1] or x.shape[0] <= x.shape[1]:
        fit.status, fit.why = "singular fit", (f"{x.shape[0]} sessions cannot estimate the {x.shape[1]} fixed "
                                               "effects of level × expertise")
        return
    cell_means = {key: np.mean([o.value for o in obs if (o.level, o.group) == key])
                  for key in {(o.level, o.group) for o in obs}}
    if all(abs(o.value - cell_means[(o.level, o.group)]) < 1e-12 for o in obs):
        fit.status, fit.why = "singular fit", ("every participant of an expertise group has the same value at each "
                                               "level: no variance between or within participants to model")
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            result = MixedLM(y, x, groups=np.array([o.participant for o in obs])).fit(reml=True)
        except (np.linalg.LinAlgError, ValueError) as exc:
            fit.status, fit.why = "singular fit", f"the fit failed: {exc}"
            return
    present = {(o.level, o.group) for o in obs}
    _read_result(fit, result, cols, caught, [(lv, g) for g in groups for lv in levels if (lv, g) in present])


def _read_result(fit: ModelFit, result: Any, cols: list[tuple[str, str | None, str | None]],
                 caught: list[warnings.WarningMessage], cells: list[tuple[str, str]]) -> None:
    k = len(cols)
    beta = np.asarray(result.fe_params, dtype=float)
    cov = np.asarray(result.cov_params(), dtype=float)[:k, :k]
    participant_var = float(np.asarray(result.cov_re)[0, 0])
    fit.participant_variance, fit.residual_variance = participant_var, float(result.scale)
    # statsmodels also warns "may be on the boundary" when the variance is well away from it: only
    # the estimate itself and a failed convergence count
    trouble = [str(w.message).splitlines()[0] for w in caught if "failed to converge" in str(w.message)]
    if participant_var <= 1e-6 * max(float(result.scale), 1e-12):
        fit.status, fit.why = "singular fit", "the participants' variance is estimated at zero"
    elif not result.converged or trouble or not np.all(np.isfinite(np.diag(cov))):
        fit.status, fit.why = "singular fit", "the fit did not converge" + (f" ({trouble[0]})" if trouble else "")
    if not fit.fitted:
        return
    from scipy import stats

    se = np.sqrt(np.diag(cov))
    z = float(stats.norm.ppf(0.975))
    for j, (term, lv, g) in enumerate(cols):
        p = float(2 * stats.norm.sf(abs(beta[j] / se[j]))) if se[j] > 0 else float("nan")
        fit.effects.append(Effect(term, lv, g, float(beta[j]), float(se[j]),
                                  (float(beta[j] - z * se[j]), float(beta[j] + z * se[j])), p))
    for level, group in cells:   # the model's estimate for each expertise group × level with sessions
        row = np.array(_row(level, group, cols))
        est, half = float(row @ beta), z * math.sqrt(float(row @ cov @ row))
        fit.cells.append({"group": group, "level": level, "estimate": est, "ci": (est - half, est + half)})


# --------------------------------------------------------------------------- paired differences


def paired(obs: Sequence[Observation], *, measure: str, label: str,
           level_order: Sequence[str]) -> list[PairedDifference]:
    """Every pair of levels (in the spec's order): a − b within each participant; Holm over the pairs."""
    per: dict[tuple[str, str], list[float]] = {}
    for o in obs:
        per.setdefault((o.participant, o.level), []).append(o.value)
    means = {k: float(np.mean(v)) for k, v in per.items()}
    people = sorted({p for p, _ in means})
    levels = [lv for lv in level_order if any(lv == lev for _, lev in means)]
    out = []
    for a, b in itertools.combinations(levels, 2):
        diffs = [means[(p, a)] - means[(p, b)] for p in people if (p, a) in means and (p, b) in means]
        out.append(_paired_one(np.array(diffs), measure, label, a, b))
    holm(out)
    return out


def _paired_one(d: np.ndarray, measure: str, label: str, a: str, b: str) -> PairedDifference:
    from scipy import stats

    if d.size < 2:
        return PairedDifference(measure, label, a, b, int(d.size), None, None, None, None)
    mean, sd = float(d.mean()), float(d.std(ddof=1))
    if sd <= 1e-12 * max(1.0, abs(mean)):
        return PairedDifference(measure, label, a, b, int(d.size), mean, 0.0, (mean, mean), None)
    half = float(stats.t.ppf(0.975, d.size - 1)) * sd / math.sqrt(d.size)
    p = float(stats.ttest_1samp(d, 0.0).pvalue)
    return PairedDifference(measure, label, a, b, int(d.size), mean, sd, (mean - half, mean + half), p)


def holm(family: Sequence[PairedDifference]) -> None:
    """Set `p_holm` on each member of one family that has a p-value (engine.study.comparisons.holm_adjust)."""
    tested = [c for c in family if c.p_value is not None]
    for c, p in zip(tested, holm_adjust([c.p_value for c in tested if c.p_value is not None]), strict=True):
        c.p_holm = p


# --------------------------------------------------------------------------- the whole analysis


def analyse(rows: Sequence[dict[str, Any]], *, level_order: Sequence[str], group_order: Sequence[str],
            scale_questions: Sequence[str] = ()) -> dict[str, Any]:
    """The model and the paired table for every measure of a study with people (session rows of
    engine.study.people_report)."""
    out: dict[str, Any] = {"model_method": MODEL_METHOD, "paired_method": PAIRED_METHOD,
                           "min_participants": MIN_PARTICIPANTS, "measures": []}
    for measure, label in measures(rows, scale_questions).items():
        obs = observations(rows, measure)
        fit = fit_model(obs, measure=measure, label=label, level_order=level_order, group_order=group_order)
        pairs = paired(obs, measure=measure, label=label, level_order=level_order)
        out["measures"].append({"measure": measure, "label": label, "model": fit.to_json(),
                                "paired": [p.to_json() for p in pairs],
                                "fallback": None if fit.fitted else f"{fit.why}: {FALLBACK}" if pairs else fit.why})
    return out
