"""The operating point a clinician uses: one cut-off, chosen on validation, read per skin-tone group.

A probability of 0.5 means nothing for an uncalibrated model: it can miss every dark-skin melanoma
at 0.5 and none at 0.3. A dermatologist using a model for triage fixes the cut-off by sensitivity
instead ("catch 9 of 10 melanomas"), then asks what that cut-off means for each skin tone.

The setting (`Setting`, a session's `operating_point`):
- "sensitivity:0.90" (the default): the highest cut-off at which the node, on its own validation
  predictions with every skin-tone group pooled, calls at least 90 % of the malignant lesions
  malignant. A lesion is called malignant when its probability is at or above the cut-off (as
  MEDFAIR's figures at 0.5). Test uses the cut-off chosen on validation, never one of its own.
- "probability:0.3": a fixed cut-off.

At that cut-off, per group and pooled, on validation and test (`GroupAtPoint`):
- sensitivity (malignant called malignant) and specificity (benign called benign), each with a
  Wilson score interval; melanomas missed per 100 malignant, 100 × (1 − sensitivity), with the
  Wilson interval of the missed share × 100;
- calibration, which does not depend on the cut-off: the Brier score (mean squared difference
  between probability and label) with a normal interval whose variance is stratified by label,
  as the stratified bootstrap of engine.measures.uncertainty resamples; and the calibration
  slope (Cox 1958): the slope of a logistic regression of the label on logit(probability), 1 for
  a calibrated model, below 1 when its probabilities are too extreme, with a Wald interval. A
  group with one class only, or whose classes the probabilities separate perfectly, has none.

The `evaluated` summary keeps the counts (`block`); the intervals are computed when read
(`OperatingPoint.of`, through engine.measures.summary), as engine.measures.uncertainty.missed_interval does. Pure numpy.
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.measures.uncertainty import CI_LEVEL, DIGITS, wilson

KEY = "operating_point"            # the summary's key
DEFAULT = "sensitivity:0.90"
KINDS = ("sensitivity", "probability")
METHOD_ID = "operating-point-v1"
METHOD = ("cut-off chosen on validation (all groups pooled) unless fixed; called malignant at or above it; "
          "sensitivity, specificity and melanomas missed per 100: Wilson score intervals; Brier score: normal "
          "interval, variance stratified by label; calibration slope: logistic regression of the label on "
          "logit(probability) (Cox 1958), Wald interval")
METHODS = {METHOD_ID: METHOD}
EXAMPLES = '"sensitivity:0.90", "sensitivity:95%" or "probability:0.3"'
_EPS = 1e-6        # probabilities are kept this far from 0 and 1 before their logit
_MAX_SLOPE = 1e3   # a fitted slope beyond this is a separation, not an estimate
_Z = 1.959963984540054

Triple = list[float]   # [estimate, lo, hi]


# --------------------------------------------------------------------------- the setting


def _number(value: float) -> str:
    return f"{value:.2f}" if round(value, 2) == value else f"{value:g}"


@dataclass(frozen=True)
class Setting:
    """Where a lesion is called malignant: at the cut-off that reaches a sensitivity on validation,
    or at a fixed probability."""

    kind: str       # "sensitivity" | "probability"
    value: float

    @classmethod
    def parse(cls, text: str | None) -> Setting:
        """"sensitivity:0.90", "sensitivity:90%", "probability:0.3"; ValueError saying what is allowed."""
        raw = (text if text is not None else DEFAULT).strip()
        kind, sep, number = raw.partition(":")
        kind = kind.strip().lower()
        if not sep or kind not in KINDS:
            raise ValueError(f"the operating point must be a sensitivity or a probability, as {EXAMPLES}; "
                             f"not {raw!r}")
        number = number.strip()
        try:
            value = float(number[:-1]) / 100 if number.endswith("%") else float(number)
        except ValueError:
            raise ValueError(f"the operating point's {kind} must be a number, as {EXAMPLES}; not {number!r}") from None
        if kind == "sensitivity" and not 0 < value <= 1:
            raise ValueError(f"the sensitivity to reach must be above 0 and at most 1 (0.90 or 90%), not {number!r}")
        if kind == "probability" and not 0 < value < 1:
            raise ValueError(f"the cut-off probability must be between 0 and 1 (as 0.3), not {number!r}")
        return cls(kind, value)

    def __str__(self) -> str:
        return f"{self.kind}:{_number(self.value)}"

    @property
    def words(self) -> str:
        """What the cut-off is, in a clinician's words."""
        if self.kind == "sensitivity":
            return f"set to catch {self.value * 100:g} % of malignant lesions on validation, all skin tones pooled"
        return f"fixed: a probability of {_number(self.value)} or more is called malignant"


def canonical(text: str | None) -> str:
    """The setting as stored: "sensitivity:0.90"; ValueError for a setting that is not one."""
    return str(Setting.parse(text))


# --------------------------------------------------------------------------- computing it


def sensitivity_threshold(labels: Sequence[int] | np.ndarray, scores: Sequence[float] | np.ndarray,
                          target: float) -> float | None:
    """The highest cut-off at which at least `target` of the malignant cases score at or above it:
    the k-th highest malignant score, k = ⌈target × malignant⌉. None without a malignant case."""
    y, s = np.asarray(labels), np.asarray(scores, dtype=float)
    positives = np.sort(s[y == 1])[::-1]
    if positives.size == 0:
        return None
    k = min(positives.size, max(1, math.ceil(target * positives.size - 1e-9)))
    return float(positives[k - 1])


def brier(labels: np.ndarray, scores: np.ndarray) -> Triple | None:
    """Brier score with a normal interval; its variance is that of a mean taken within each label
    (the cells' sizes fixed, as the stratified bootstrap keeps them)."""
    if labels.size == 0:
        return None
    errors = (scores - labels) ** 2
    variance = 0.0
    for cell in (errors[labels == 0], errors[labels == 1]):
        if cell.size > 1:
            variance += cell.size * float(np.var(cell, ddof=1))
    estimate = float(errors.mean())
    half = _Z * math.sqrt(variance) / labels.size
    return [estimate, max(0.0, estimate - half), min(1.0, estimate + half)]


def _expit(eta: np.ndarray) -> np.ndarray:
    out: np.ndarray = 0.5 * (1.0 + np.tanh(0.5 * eta))   # 1 / (1 + e^-eta), without overflow
    return out


def calibration_slope(labels: np.ndarray, scores: np.ndarray) -> Triple | None:
    """The slope of logit P(malignant) = a + b·logit(probability), by Newton's method, with its
    Wald interval; None for one class, constant probabilities or perfectly separated classes."""
    y = labels.astype(float)
    if y.size < 3 or y.min() == y.max():
        return None
    p = np.clip(scores, _EPS, 1 - _EPS)
    x = np.log(p / (1 - p))
    if float(np.ptp(x)) < 1e-9:
        return None
    design = np.column_stack([np.ones_like(x), x])
    beta = np.zeros(2)
    for _ in range(100):
        mu = _expit(design @ beta)
        information = design.T @ (design * (mu * (1 - mu))[:, None])
        try:
            step = np.linalg.solve(information, design.T @ (y - mu))
        except np.linalg.LinAlgError:
            return None
        beta = beta + step
        if not np.all(np.isfinite(beta)) or abs(beta[1]) > _MAX_SLOPE:
            return None
        if float(np.max(np.abs(step))) < 1e-10:
            break
    else:
        return None   # never settled: the classes are (nearly) separated
    mu = _expit(design @ beta)
    try:
        covariance = np.linalg.inv(design.T @ (design * (mu * (1 - mu))[:, None]))
    except np.linalg.LinAlgError:
        return None
    half = _Z * math.sqrt(max(float(covariance[1, 1]), 0.0))
    slope = float(beta[1])
    return [slope, slope - half, slope + half]


def _rounded(triple: Triple | None) -> Triple | None:
    return None if triple is None else [round(v, DIGITS) for v in triple]


def _entry(labels: np.ndarray, scores: np.ndarray, threshold: float | None) -> dict[str, Any]:
    """One group's (or the pool's) counts at the cut-off and its calibration, as stored."""
    malignant = int(labels.sum())
    called = scores >= threshold if threshold is not None else None
    return {
        "n": int(labels.size), "malignant": malignant, "benign": int(labels.size) - malignant,
        "caught": int((called & (labels == 1)).sum()) if called is not None else None,
        "cleared": int((~called & (labels == 0)).sum()) if called is not None else None,
        "brier": _rounded(brier(labels, scores)), "slope": _rounded(calibration_slope(labels, scores)),
    }


def block(setting: Setting, threshold: float | None, labels: Sequence[int] | np.ndarray,
          scores: Sequence[float] | np.ndarray, groups: Sequence[str] | np.ndarray, names: Sequence[str], *,
          reason: str | None = None) -> dict[str, Any]:
    """What an `evaluated` summary keeps under KEY for one split: the setting, the cut-off (None
    when it could not be chosen: `reason` says why) and, per group and pooled, the counts at it
    (n, malignant, benign, caught, cleared) and the calibration ([estimate, lo, hi])."""
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)
    g = np.asarray([str(x) for x in groups], dtype=object)
    out: dict[str, Any] = {
        "setting": str(setting), "threshold": None if threshold is None else round(float(threshold), 6),
        "chosen_on": "validation" if setting.kind == "sensitivity" else "fixed", "method": METHOD_ID,
        "overall": _entry(y, s, threshold),
        "groups": {name: _entry(y[g == name], s[g == name], threshold) for name in names},
    }
    if reason:
        out["reason"] = reason
    return out


def choose_threshold(setting: Setting, validation: tuple[np.ndarray, np.ndarray] | None,
                     why_not: str = "the validation split was not measured") -> tuple[float | None, str | None]:
    """(cut-off, None) or (None, why it cannot be chosen). `validation`: (labels, scores)."""
    if setting.kind == "probability":
        return setting.value, None
    if validation is None:
        return None, f"{why_not}: no cut-off chosen"
    threshold = sensitivity_threshold(validation[0], validation[1], setting.value)
    if threshold is None:
        return None, "the validation split has no malignant case: no cut-off chosen"
    return threshold, None


# --------------------------------------------------------------------------- reading it back


def _triple(value: Any) -> Triple | None:
    if isinstance(value, list) and len(value) == 3 and all(isinstance(v, (int, float)) for v in value):
        return [float(v) for v in value]
    return None


def _share(successes: int | None, trials: int) -> tuple[float | None, list[float] | None]:
    if successes is None or trials <= 0:
        return None, None
    interval = wilson(successes, trials, CI_LEVEL)
    return successes / trials, None if interval is None else [round(interval[0], DIGITS), round(interval[1], DIGITS)]


@dataclass(frozen=True)
class GroupAtPoint:
    """One group's (or the pool's) figures at the operating point, with their intervals."""

    name: str
    n: int
    malignant: int
    benign: int
    caught: int | None         # malignant called malignant
    cleared: int | None        # benign called benign
    brier: Triple | None
    slope: Triple | None

    @classmethod
    def of(cls, name: str, entry: Mapping[str, Any]) -> GroupAtPoint:
        def whole(key: str) -> int | None:
            value = entry.get(key)
            return int(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None

        n, malignant = whole("n") or 0, whole("malignant") or 0
        benign = whole("benign")
        return cls(name=name, n=n, malignant=malignant, benign=n - malignant if benign is None else benign,
                   caught=whole("caught"), cleared=whole("cleared"),
                   brier=_triple(entry.get("brier")), slope=_triple(entry.get("slope")))

    @property
    def sensitivity(self) -> tuple[float | None, list[float] | None]:
        return _share(self.caught, self.malignant)

    @property
    def specificity(self) -> tuple[float | None, list[float] | None]:
        return _share(self.cleared, self.benign)

    @property
    def missed(self) -> int | None:
        return None if self.caught is None else self.malignant - self.caught

    @property
    def missed_per_100(self) -> tuple[float | None, list[float] | None]:
        """Melanomas missed per 100 malignant lesions, with the Wilson interval × 100."""
        share, interval = _share(self.missed, self.malignant)
        if share is None:
            return None, None
        return 100 * share, None if interval is None else [round(100 * v, 2) for v in interval]


@dataclass(frozen=True)
class OperatingPoint:
    """A split's operating-point block, read back (see `block`)."""

    setting: str
    threshold: float | None
    chosen_on: str
    method: str
    reason: str | None
    overall: GroupAtPoint
    groups: tuple[GroupAtPoint, ...]

    @classmethod
    def of(cls, found: Any) -> OperatingPoint | None:
        """The block as a summary stores it under KEY, read back; None for none (a summary recorded
        before operating points: its figures are at 0.5)."""
        if not isinstance(found, Mapping) or not isinstance(found.get("groups"), Mapping):
            return None
        threshold = found.get("threshold")
        return cls(setting=str(found.get("setting") or DEFAULT),
                   threshold=float(threshold) if isinstance(threshold, (int, float)) else None,
                   chosen_on=str(found.get("chosen_on") or "validation"), method=str(found.get("method") or ""),
                   reason=found.get("reason") if isinstance(found.get("reason"), str) else None,
                   overall=GroupAtPoint.of("overall", found.get("overall") or {}),
                   groups=tuple(GroupAtPoint.of(str(name), entry) for name, entry in found["groups"].items()
                                if isinstance(entry, Mapping)))

    def group(self, name: str) -> GroupAtPoint | None:
        return next((g for g in self.groups if g.name == name), None)

    @property
    def words(self) -> str:
        """The setting in a clinician's words (the stored setting's, or as recorded if unreadable)."""
        try:
            return Setting.parse(self.setting).words
        except ValueError:
            return self.setting


def public_group(g: GroupAtPoint) -> dict[str, Any]:
    sensitivity, sensitivity_ci = g.sensitivity
    specificity, specificity_ci = g.specificity
    per_100, per_100_ci = g.missed_per_100
    return {"n": g.n, "malignant": g.malignant, "benign": g.benign, "caught": g.caught, "cleared": g.cleared,
            "missed": g.missed, "sensitivity": sensitivity, "sensitivity_ci": sensitivity_ci,
            "specificity": specificity, "specificity_ci": specificity_ci, "missed_per_100": per_100,
            "missed_per_100_ci": per_100_ci, "brier": g.brier[0] if g.brier else None,
            "brier_ci": g.brier[1:] if g.brier else None, "calibration_slope": g.slope[0] if g.slope else None,
            "calibration_slope_ci": g.slope[1:] if g.slope else None}


def public(found: OperatingPoint | None, key: Callable[[str], str] = str) -> dict[str, Any] | None:
    """The block spelled out for JSON and exports: every figure with its interval, groups named by
    `key` (e.g. 12/34/56), the method in words. None without one."""
    if found is None:
        return None
    return {"setting": found.setting, "words": found.words, "threshold": found.threshold,
            "chosen_on": found.chosen_on, "reason": found.reason, "ci_level": CI_LEVEL,
            "method": METHODS.get(found.method, found.method), "method_id": found.method,
            "overall": public_group(found.overall), "groups": {key(g.name): public_group(g) for g in found.groups}}
