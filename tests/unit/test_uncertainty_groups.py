"""The gap's interval that can say "fair", the signed differences and the test of equal group AUCs
(engine.measures.uncertainty, issue 34): coverage on the binormal simulation with a fixed seed,
the stored fields, old summaries still read, and the words a node's screen shows."""
from __future__ import annotations

import numpy as np
import pytest

from engine.evaluation.metrics import compute_metrics
from engine.measures.uncertainty import (
    GROUP_TEST, METHOD_ID, METHODS, N_RESAMPLES, Strata, group_differences, replicates, shared_counts,
)
from engine.session import figure_text
from engine.session.views import group_tests
from tests.uncertainty_coverage import binormal_coverage
from engine.measures.summary import EvaluationSummary

S = EvaluationSummary.from_payload

GROUPS = ("group_0", "group_1", "group_2")
DDI_TEST = ((208, 49), (241, 74), (207, 48))


def _data(seed: int, separation: tuple[float, float, float], sizes=DDI_TEST):
    rng = np.random.default_rng(seed)
    y, s, g = [], [], []
    for (n, k), shift, group in zip(sizes, separation, GROUPS, strict=True):
        y += [1] * k + [0] * (n - k)
        s += list(rng.normal(shift, 1, k)) + list(rng.normal(0, 1, n - k))
        g += [group] * n
    return np.array(y), 1 / (1 + np.exp(-np.array(s))), np.array(g, dtype=object)


def test_the_gap_interval_holds_small_and_large_true_gaps_where_the_percentile_one_cannot():
    rows = binormal_coverage(gaps=(0.0, 0.03, 0.12), data_sets=120, seed=3, n_resamples=500)
    for row in rows:
        assert row["gap_coverage"] >= 0.9, row
        assert row["dark − light_coverage"] >= 0.9 and row["dark − medium_coverage"] >= 0.9, row
    # v1's percentile interval of max − min never holds a true gap of 0 (every resample's max − min > 0)
    assert rows[0]["percentile_coverage"] == 0.0
    assert rows[0]["mean_estimate"] > 0.02     # the MEDFAIR gap's upward bias, which the new interval survives


def test_summary_stores_signed_differences_and_the_test_with_its_method():
    y, s, g = _data(0, (1.0, 0.8, 0.3))
    summary = compute_metrics(y, s, g, intervals=True).summary()
    assert summary["ci_method"] == METHOD_ID == f"stratified-bootstrap-{N_RESAMPLES}-v2"
    assert "max-t" in METHODS[METHOD_ID] and "percentile" in METHODS[f"stratified-bootstrap-{N_RESAMPLES}-v1"]
    aucs = summary["group_auc"]
    assert len(summary["signed"]) == 9               # [diff, low, high] per pair, compact
    (light, medium, third) = group_tests.signed(S(summary))
    assert third.pair == "medium − light"
    assert (light.pair, light.groups) == ("dark − light", ("group_2", "group_0"))
    assert (medium.pair, medium.groups) == ("dark − medium", ("group_2", "group_1"))
    for row, other in ((light, "group_0"), (medium, "group_1")):
        assert row.diff == pytest.approx(aucs["group_2"] - aucs[other], abs=1e-4)
        assert row.low <= row.diff <= row.high
    test = summary["groups_apart"]
    assert test["apart"] is True and test["p"] <= 0.05
    assert GROUP_TEST == "bootstrap max-t test of equal skin-tone group AUCs" and GROUP_TEST in METHODS[METHOD_ID]
    lo, hi = figure_text.interval(S(summary), "auc_gap")
    assert lo <= summary["auc_gap"] <= hi and lo > 0       # told apart: the gap's interval excludes 0


def test_groups_alike_cannot_be_told_apart_and_their_gap_interval_reaches_zero():
    y, s, g = _data(2, (1.2, 1.2, 1.2))   # (seed 1 is among the 5 % the test calls apart: p = .047)
    summary = compute_metrics(y, s, g, intervals=True).summary()
    assert summary["auc_gap"] > 0                          # max − min of noisy AUCs is never 0
    assert summary["groups_apart"]["apart"] is False and summary["groups_apart"]["p"] > 0.05
    assert all(row.includes_zero for row in group_tests.signed(S(summary)))
    assert figure_text.interval(S(summary), "auc_gap")[0] == 0.0


def test_apart_is_exactly_some_pair_interval_excluding_zero_and_the_gap_follows_the_pairs():
    y, s, g = _data(2, (1.4, 1.0, 0.8))
    strata = Strata.of(y, g, GROUPS)
    rep = replicates(s, strata, shared_counts(strata))
    point = compute_metrics(y, s, g).group_auc
    found = group_differences(rep, point)
    excluded = (found.low > 0) | (found.high < 0)
    assert found.apart == bool(excluded.any()) == (found.p <= 0.05)
    lo, hi = found.gap()
    assert hi == pytest.approx(np.maximum(np.abs(found.low), np.abs(found.high)).max())
    assert lo == (0.0 if not excluded.any() else pytest.approx(
        np.where(found.low > 0, found.low, -found.high)[excluded].max()))
    a_b = found.pair("group_0", "group_2")
    b_a = found.pair("group_2", "group_0")
    assert a_b == pytest.approx((-b_a[0], -b_a[2], -b_a[1]))


def test_a_group_with_one_class_leaves_the_other_pair_and_one_group_leaves_none():
    y, s, g = _data(3, (1.0, 0.8, 0.3), sizes=((208, 49), (241, 74), (40, 0)))
    summary = compute_metrics(y, s, g, intervals=True).summary()
    assert summary["signed"][:6] == [None] * 6                 # no AUC in the dark group: no dark − x
    assert [row.pair for row in group_tests.signed(S(summary))] == ["medium − light"]
    assert "groups_apart" in summary and figure_text.interval(S(summary), "auc_gap") is not None
    y, s, g = _data(4, (1.0, 0.8, 0.3), sizes=((208, 49), (30, 0), (40, 0)))
    summary = compute_metrics(y, s, g, intervals=True).summary()
    assert "signed" not in summary and "groups_apart" not in summary
    assert group_tests.words(S(summary)) is None


def test_an_old_summary_still_reads_and_has_no_words():
    old = {"auc": 0.8, "auc_gap": 0.1, "group_auc": {g: 0.8 for g in GROUPS},
           "ci": [0.7, 0.9, 0.6, 0.8, 0.05, 0.2] + [0.6, 0.9] * 3, "cases": [100, 20, 5] * 3,
           "ci_method": f"stratified-bootstrap-{N_RESAMPLES}-v1"}
    assert S(old).intervals.gap == [0.05, 0.2]
    assert figure_text.public(S(old))["ci_method"] == METHODS[f"stratified-bootstrap-{N_RESAMPLES}-v1"]
    assert group_tests.words(S(old)) is None and group_tests.signed(S(old)) == []


def test_the_words_name_the_method_and_warn_when_groups_are_too_few_to_judge():
    y, s, g = _data(6, (1.2, 1.2, 1.2), sizes=((120, 30), (100, 20), (60, 6)))   # (seed 5: p = .017)
    summary = compute_metrics(y, s, g, intervals=True).summary()
    said = group_tests.words(S(summary))
    assert said.startswith(group_tests.CANNOT_TELL)
    assert "bootstrap max-t test of equal skin-tone group AUCs, p = ." in said
    assert "dark − light" in said and "too few to judge in FST V–VI (dark), so that says little" in said
    y, s, g = _data(6, (2.4, 2.2, 0.3))
    said = group_tests.words(S(compute_metrics(y, s, g, intervals=True).summary()))
    assert said.startswith(group_tests.TOLD_APART) and "p < .001" in said


def test_a_malformed_signed_entry_is_left_out_not_fatal():
    summary = {"signed": [0.1, "x", None, -0.02, -0.1, 0.06], "groups_apart": {"p": 0.5, "apart": False}}
    (only,) = group_tests.signed(S(summary))
    assert only.pair == "dark − medium" and only.includes_zero
    assert "dark − medium -.020 (-.100 to .060)" in group_tests.words(S(summary))
    assert group_tests.signed(S({"signed": "garbage"})) == [] and group_tests.words(S({"groups_apart": 3})) is None
