"""Tests between levels and agents over runs (engine.study.comparisons)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from engine.study.comparisons import between_groups, compare, permutation_p


def test_a_clear_difference_is_told_apart_and_noise_is_not():
    rng = np.random.default_rng(0)
    low, high = rng.normal(0.10, 0.02, 7), rng.normal(0.25, 0.02, 7)
    clear = compare(high, low, figure="gap", within="AIDE", names=("base", "fairness-methods"))
    assert clear.told_apart and clear.ci[0] > 0 and clear.p_value < 0.01
    assert "told apart" in clear.sentence() and "cannot" not in clear.sentence()
    same = compare(rng.normal(0.15, 0.05, 6), rng.normal(0.15, 0.05, 6), figure="gap", within="AIDE",
                   names=("a", "b"))
    assert same.told_apart is False and "cannot be told apart" in same.sentence()


def test_exact_permutation_p_value_matches_scipy():
    xa, xb = np.array([0.61, 0.58, 0.66, 0.59, 0.63]), np.array([0.55, 0.57, 0.52, 0.60, 0.54])
    ours = permutation_p(xa, xb, np.random.default_rng(0))
    theirs = stats.permutation_test((xa, xb), lambda a, b: np.mean(a) - np.mean(b), permutation_type="independent",
                                    alternative="two-sided", n_resamples=np.inf).pvalue
    assert ours == pytest.approx(theirs, abs=1e-9)


def test_too_few_runs_are_not_compared():
    c = compare([0.6], [0.5, 0.55], figure="AUC", within="AIDE", names=("a", "b"))
    assert c.difference is None and c.told_apart is None and "not enough runs" in c.sentence()


def test_levels_within_agents_and_agents_within_levels():
    values = {("AIDE", "base"): [0.6, 0.62, 0.61], ("AIDE", "fairness-hint"): [0.58, 0.6, 0.59],
              ("MLZero", "base"): [0.55, 0.57, 0.56]}
    pairs = [(c.within, c.a, c.b) for c in between_groups(values, figure="AUC", level_order=["base", "fairness-hint"])]
    assert pairs == [("AIDE", "base", "fairness-hint"), ("base", "AIDE", "MLZero")]


def test_welch_interval_matches_scipy():
    from engine.study.comparisons import welch_interval

    xa, xb = np.array([0.61, 0.58, 0.66, 0.59, 0.63, 0.6]), np.array([0.55, 0.57, 0.52, 0.60, 0.54])
    ci = stats.ttest_ind(xa, xb, equal_var=False).confidence_interval(0.95)
    assert welch_interval(xa, xb) == pytest.approx((ci.low, ci.high), abs=1e-12)
