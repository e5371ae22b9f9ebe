"""The operating point (engine.measures.operating_point) against sklearn and scipy on generated data:
the cut-off that reaches a sensitivity, the counts at it, Wilson intervals, Brier score and the
calibration slope; the setting's parsing; the stored block read back."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
from scipy.stats import binomtest
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import brier_score_loss, confusion_matrix, roc_curve

from engine.agent.session_config import SessionConfig
from engine.measures import operating_point as op
from engine.measures.summary import EvaluationSummary

GROUPS = ("group_0", "group_1", "group_2")


def _data(seed: int, n: int = 656, ties: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Binormal scores squashed to probabilities, overconfident (scale 2) and worse on group_2."""
    rng = np.random.default_rng(seed)
    groups = rng.choice(GROUPS, size=n, p=[.32, .37, .31])
    labels = (rng.random(n) < 0.26).astype(int)
    separation = np.where(groups == "group_2", 0.6, 1.4)
    logits = 2.0 * (rng.normal(0, 1, n) + labels * separation - 0.8)
    scores = 1 / (1 + np.exp(-logits))
    return labels, (np.round(scores, 2) if ties else scores), groups


@pytest.mark.parametrize("seed, ties, target", [(1, False, 0.9), (2, True, 0.9), (3, True, 0.95), (4, False, 0.8),
                                                (5, True, 1.0)])
def test_the_cut_off_is_the_highest_roc_threshold_reaching_the_sensitivity(seed, ties, target):
    labels, scores, _ = _data(seed, ties=ties)
    fpr, tpr, thresholds = roc_curve(labels, scores, drop_intermediate=False)
    expected = max(t for t, r in zip(thresholds, tpr, strict=True) if r >= target - 1e-12)
    threshold = op.sensitivity_threshold(labels, scores, target)
    assert threshold == pytest.approx(expected)
    caught = (scores >= threshold)[labels == 1].mean()
    assert caught >= target
    above = np.unique(scores[scores > threshold])
    if above.size:  # the next cut-off up loses it
        assert (scores >= above[0])[labels == 1].mean() < target


def test_the_cut_off_needs_a_malignant_case_and_a_sensitivity_of_90_percent_is_not_rounded_away():
    assert op.sensitivity_threshold([0, 0, 0], [.1, .2, .3], 0.9) is None
    labels = np.array([1] * 50)
    scores = np.linspace(0.01, 0.99, 50)
    # 0.9 × 50 is 45.000000000000004 in floating point: still the 45th highest score
    assert op.sensitivity_threshold(labels, scores, 0.9) == pytest.approx(np.sort(scores)[::-1][44])


@pytest.mark.parametrize("seed", [11, 12])
def test_counts_and_intervals_per_group_match_sklearn_and_scipy(seed):
    labels, scores, groups = _data(seed)
    setting = op.Setting.parse("sensitivity:0.90")
    threshold, reason = op.choose_threshold(setting, (labels, scores))
    assert reason is None
    stored = json.loads(json.dumps({op.KEY: op.block(setting, threshold, labels, scores, groups, GROUPS)}))
    found = op.OperatingPoint.of(stored[op.KEY])
    assert found is not None and found.threshold == pytest.approx(threshold, abs=1e-6)
    assert found.overall.sensitivity[0] >= 0.9
    for name in GROUPS:
        idx = groups == name
        tn, fp, fn, tp = confusion_matrix(labels[idx], (scores[idx] >= threshold).astype(int)).ravel()
        g = found.group(name)
        assert (g.n, g.malignant, g.benign, g.caught, g.cleared, g.missed) == (idx.sum(), tp + fn, tn + fp, tp, tn, fn)
        sensitivity, sensitivity_ci = g.sensitivity
        wilson = binomtest(int(tp), int(tp + fn)).proportion_ci(method="wilson")
        assert sensitivity == pytest.approx(tp / (tp + fn))
        assert sensitivity_ci == pytest.approx([wilson.low, wilson.high], abs=1e-4)
        specificity, specificity_ci = g.specificity
        wilson = binomtest(int(tn), int(tn + fp)).proportion_ci(method="wilson")
        assert specificity == pytest.approx(tn / (tn + fp))
        assert specificity_ci == pytest.approx([wilson.low, wilson.high], abs=1e-4)
        per_100, per_100_ci = g.missed_per_100
        wilson = binomtest(int(fn), int(tp + fn)).proportion_ci(method="wilson")
        assert per_100 == pytest.approx(100 * fn / (tp + fn))
        assert per_100_ci == pytest.approx([100 * wilson.low, 100 * wilson.high], abs=1e-2)
        assert g.brier[0] == pytest.approx(brier_score_loss(labels[idx], scores[idx]), abs=1e-4)


def test_the_brier_interval_matches_a_bootstrap_stratified_by_label():
    labels, scores, _ = _data(21, n=400)
    estimate, lo, hi = op.brier(labels, scores)
    rng = np.random.default_rng(0)
    errors = (scores - labels) ** 2
    sums = sum(errors[cell][rng.integers(0, cell.size, size=(4000, cell.size))].sum(axis=1)
               for cell in (np.flatnonzero(labels == k) for k in (0, 1)))
    resampled = sums / labels.size   # each resample's Brier score, both labels' cells kept at their size
    assert brier_score_loss(labels, scores) == pytest.approx(estimate)
    assert (hi - lo) / 2 == pytest.approx(1.96 * np.std(resampled), rel=0.1)
    assert lo < estimate < hi


@pytest.mark.parametrize("seed", [31, 32, 33])
def test_the_calibration_slope_matches_sklearn_logistic_regression(seed):
    labels, scores, _ = _data(seed, n=300)
    slope, lo, hi = op.calibration_slope(labels, scores)
    x = np.log(scores / (1 - scores)).reshape(-1, 1)
    model = LogisticRegression(C=np.inf, tol=1e-10, max_iter=10_000).fit(x, labels)
    assert slope == pytest.approx(model.coef_[0, 0], rel=1e-4)
    # the Wald interval from sklearn's own fitted probabilities
    p = model.predict_proba(x)[:, 1]
    design = np.column_stack([np.ones(len(x)), x[:, 0]])
    se = math.sqrt(np.linalg.inv(design.T @ (design * (p * (1 - p))[:, None]))[1, 1])
    assert [lo, hi] == pytest.approx([slope - 1.96 * se, slope + 1.96 * se], rel=1e-3)
    assert slope < 1   # the generator's probabilities are twice too extreme: a slope near 0.5


def test_no_slope_without_both_classes_constant_probabilities_or_separated_classes():
    assert op.calibration_slope(np.array([0, 0, 0, 0]), np.array([.1, .2, .3, .4])) is None
    assert op.calibration_slope(np.array([0, 1, 0, 1]), np.full(4, .3)) is None
    assert op.calibration_slope(np.array([0, 0, 1, 1]), np.array([.1, .2, .8, .9])) is None
    assert op.brier(np.array([], dtype=int), np.array([])) is None


def test_a_group_without_malignant_cases_has_no_sensitivity_and_a_fixed_cut_off_needs_no_validation():
    setting = op.Setting.parse("probability:0.3")
    threshold, reason = op.choose_threshold(setting, None)
    assert (threshold, reason) == (0.3, None)
    labels = np.array([0, 0, 0, 1, 0, 1])
    scores = np.array([.1, .4, .2, .5, .35, .2])
    groups = np.array(["group_0"] * 3 + ["group_1"] * 3)
    found = op.OperatingPoint.of(op.block(setting, threshold, labels, scores, groups, GROUPS))
    g0, g1, g2 = (found.group(name) for name in GROUPS)
    assert g0.sensitivity == (None, None) and g0.missed_per_100 == (None, None)
    assert g0.specificity[0] == pytest.approx(2 / 3)
    assert (g1.caught, g1.cleared, g1.missed) == (1, 0, 1)
    assert g2.n == 0 and g2.brier is None
    assert found.chosen_on == "fixed" and "0.30 or more" in found.words


def test_without_validation_a_sensitivity_cut_off_is_not_chosen_and_says_why():
    setting = op.Setting.parse(None)
    threshold, reason = op.choose_threshold(setting, None, "this workspace withholds no validation set")
    assert threshold is None and reason.startswith("this workspace withholds no validation set")
    labels, scores, groups = _data(41, n=60)
    stored = op.block(setting, threshold, labels, scores, groups, GROUPS, reason=reason)
    found = op.OperatingPoint.of(stored)
    assert found.reason == reason and found.overall.sensitivity == (None, None)
    assert found.overall.brier is not None   # calibration needs no cut-off


@pytest.mark.parametrize("text, stored", [
    ("sensitivity:0.90", "sensitivity:0.90"), ("sensitivity:0.9", "sensitivity:0.90"),
    ("Sensitivity: 95%", "sensitivity:0.95"), ("probability:0.3", "probability:0.30"),
    ("probability:0.125", "probability:0.125"), (None, "sensitivity:0.90")])
def test_the_setting_is_stored_in_one_spelling(text, stored):
    assert op.canonical(text) == stored


@pytest.mark.parametrize("text, says", [
    ("0.9", "a sensitivity or a probability"), ("specificity:0.9", "sensitivity or"),
    ("sensitivity:high", "must be a number"), ("sensitivity:0", "above 0"), ("sensitivity:1.5", "at most 1"),
    ("probability:1", "between 0 and 1"), ("probability:-0.2", "between 0 and 1")])
def test_a_bad_setting_says_what_is_allowed(text, says):
    with pytest.raises(ValueError, match=says):
        op.Setting.parse(text)


def test_the_session_setting_defaults_for_sessions_recorded_before_it_and_refuses_nonsense():
    assert SessionConfig().operating_point == "sensitivity:0.90"
    old = SessionConfig().to_dict()
    del old["operating_point"]
    assert SessionConfig.from_dict(old).operating_point == "sensitivity:0.90"
    assert SessionConfig(operating_point="probability:.3").operating_point == "probability:0.30"
    with pytest.raises(ValueError, match="operating point"):
        SessionConfig(operating_point="90")


def test_a_summary_recorded_before_operating_points_has_none_and_public_spells_every_interval():
    old = EvaluationSummary.from_payload({"auc": .8})
    assert old.operating_point is None and op.public(old.operating_point) is None
    labels, scores, groups = _data(51)
    setting = op.Setting.parse(op.DEFAULT)
    threshold, _ = op.choose_threshold(setting, (labels, scores))
    out = op.public(op.OperatingPoint.of(op.block(setting, threshold, labels, scores, groups, GROUPS)),
                    key={"group_0": "12", "group_1": "34", "group_2": "56"}.get)
    assert set(out["groups"]) == {"12", "34", "56"}
    dark = out["groups"]["56"]
    for figure in ("sensitivity", "specificity", "missed_per_100", "brier", "calibration_slope"):
        lo, hi = dark[f"{figure}_ci"]
        assert lo <= dark[figure] <= hi
    assert "Wilson" in out["method"] and "Cox 1958" in out["method"]


def test_the_intervals_hold_the_truth_on_test_at_a_cut_off_chosen_on_validation():
    """tests/operating_point_coverage.py with fewer repetitions (fixed seed): each group's
    sensitivity, specificity, Brier and slope intervals hold the truth ~95 % of the time."""
    from tests.operating_point_coverage import coverage

    table = coverage(reps=300, seed=1)
    for group, row in table.items():
        for figure, share in row.items():
            assert share >= 0.9, (group, figure, share)
