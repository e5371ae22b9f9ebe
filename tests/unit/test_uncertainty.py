"""Intervals on measured figures (engine.measures.uncertainty): the resampled AUC is sklearn's AUC
of the resampled images, the intervals agree with scipy.stats.bootstrap's, the same predictions
always give the same intervals, and the paired comparison tells apart what differs."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import roc_auc_score

from engine.evaluation.metrics import compute_metrics
from engine.measures.summary import EvaluationSummary
from engine.measures.uncertainty import (
    MIN_CASES, N_RESAMPLES, Strata, difference, logit_interval, missed_interval, percentile, replicates,
    too_few, weighted_auc, wilson,
)

S = EvaluationSummary.from_payload

GROUPS = ("group_0", "group_1", "group_2")


def _data(seed: int = 0, sizes=((208, 49), (241, 74), (207, 48)), separation=(1.0, 0.8, 0.3), ties: bool = False):
    rng = np.random.default_rng(seed)
    labels, scores, groups = [], [], []
    for (n, positives), shift, group in zip(sizes, separation, GROUPS, strict=True):
        raw = np.concatenate([rng.normal(shift, 1, positives), rng.normal(0, 1, n - positives)])
        labels += [1] * positives + [0] * (n - positives)
        scores += list(1 / (1 + np.exp(-raw)))
        groups += [group] * n
    scores = np.round(scores, 1) if ties else np.array(scores)
    return np.array(labels), np.asarray(scores, dtype=float), np.array(groups, dtype=object)


@pytest.mark.parametrize("ties", [False, True])
def test_a_weighted_auc_is_sklearns_auc_of_the_resampled_images(ties):
    y, s, _ = _data(1, ties=ties)
    rng = np.random.default_rng(5)
    for _ in range(5):
        drawn = rng.integers(0, y.size, y.size)
        counts = np.bincount(drawn, minlength=y.size).astype(np.float32)[:, None]
        ours = weighted_auc(s, y, counts)[0]
        assert ours == pytest.approx(roc_auc_score(y[drawn], s[drawn]), abs=1e-12)


def test_every_resample_keeps_each_cell_its_size():
    y, _, g = _data(2)
    strata = Strata.of(y, g, GROUPS)
    counts = strata.counts(200)
    for cell in strata.cells:
        assert np.all(counts[cell].sum(axis=0) == cell.size)


def test_intervals_contain_the_estimate_and_are_deterministic():
    y, s, g = _data(3)
    metrics = compute_metrics(y, s, g, intervals=True)
    summary = metrics.summary()
    found = S(summary).intervals
    for ci, point in ((found.auc, "auc"), (found.worst, "worst_auc"), (found.gap, "auc_gap")):
        lo, hi = ci
        assert lo <= summary[point] <= hi, point
    for group in GROUPS:
        lo, hi = found.group(group)
        assert lo <= summary["group_auc"][group] <= hi
    assert [found.counts(g)[:2] for g in GROUPS] == [(208, 49), (241, 74), (207, 48)]
    assert "ci_groups" not in summary   # the three skin-tone groups: their order goes without saying
    assert compute_metrics(y, s, g, intervals=True).summary() == summary
    assert summary["ci_method"] == f"stratified-bootstrap-{N_RESAMPLES}-v2"


def test_the_resampling_agrees_with_scipy_bootstrap():
    """scipy.stats.bootstrap resamples each (group x label) cell as its own sample: the same design,
    so the percentiles of our resampled group AUCs match its percentile interval."""
    y, s, g = _data(4, sizes=((120, 30), (120, 30), (120, 30)))
    idx = np.flatnonzero(g == "group_2")
    pos, neg = s[idx][y[idx] == 1], s[idx][y[idx] == 0]

    def auc(p, n, axis=-1):
        both = np.concatenate([p, n], axis=axis)
        ranks = stats.rankdata(both, axis=axis)
        k = p.shape[axis]
        return (ranks[..., :k].sum(axis=axis) - k * (k + 1) / 2) / (k * n.shape[axis])

    theirs = stats.bootstrap((pos, neg), auc, n_resamples=4000, method="percentile", vectorized=True,
                             random_state=np.random.default_rng(0)).confidence_interval
    strata = Strata.of(y, g, GROUPS)
    ours = percentile(replicates(s, strata, strata.counts()).group_auc["group_2"])
    assert ours[0] == pytest.approx(theirs.low, abs=0.02) and ours[1] == pytest.approx(theirs.high, abs=0.02)


def test_auc_intervals_are_logit_intervals_of_the_resamples():
    y, s, g = _data(8)
    strata = Strata.of(y, g, GROUPS)
    summary = compute_metrics(y, s, g, intervals=True).summary()
    rep = replicates(s, strata, strata.counts())
    spread = np.std(np.log(rep.auc / (1 - rep.auc)), ddof=1)
    centre = np.log(summary["auc"] / (1 - summary["auc"]))
    expected = 1 / (1 + np.exp(-(centre + np.array([-1, 1]) * 1.959964 * spread)))
    assert S(summary).intervals.auc == pytest.approx(expected.tolist(), abs=6e-5)   # stored to 4 decimals
    lo, hi = logit_interval(np.array([1.0, 1.0, 0.98]), 1.0)   # a perfect group stays within [0, 1]
    assert 0 < lo < hi <= 1


def test_a_group_with_one_class_has_no_interval_and_the_others_still_do():
    y, s, g = _data(5)
    keep = ~((g == "group_2") & (y == 1))
    summary = compute_metrics(y[keep], s[keep], g[keep], intervals=True).summary()
    found = S(summary).intervals
    assert found.group("group_2") is None and summary["group_auc"]["group_2"] is None
    assert found.group("group_0") and found.group("group_1") and found.gap is not None
    assert found.counts("group_2")[1] == 0 and missed_interval(0, 0) is None


def test_missed_malignant_cases_and_their_wilson_interval():
    y, s, g = _data(6)
    summary = compute_metrics(y, s, g, intervals=True).summary()
    idx = (g == "group_2") & (y == 1)
    missed = int((s[idx] < 0.5).sum())
    n, positives, counted = S(summary).intervals.counts("group_2")
    assert counted == missed and positives == idx.sum()
    lo, hi = missed_interval(counted, positives)
    assert lo <= missed / idx.sum() <= hi
    lo, hi = wilson(0, 10)   # no miss among 10: not [0, 0]
    assert lo == pytest.approx(0.0, abs=1e-12) and hi == pytest.approx(0.2775, abs=1e-3)
    assert wilson(0, 0) is None


def test_too_few_to_judge():
    assert too_few(MIN_CASES - 1, 100) and too_few(30, 30 + MIN_CASES - 1)
    assert not too_few(MIN_CASES, 2 * MIN_CASES) and not too_few(None, None)


def test_paired_difference_tells_apart_a_better_node_and_not_a_copy():
    y, s, g = _data(7)
    strata = Strata.of(y, g, GROUPS)
    counts = strata.counts()
    rng = np.random.default_rng(1)
    better = np.clip(s + 0.25 * y + rng.normal(0, 0.02, s.size), 0, 1)
    same = np.clip(s + rng.normal(0, 1e-4, s.size), 0, 1)
    base = replicates(s, strata, counts)
    lo, hi = difference(replicates(better, strata, counts), base, "auc")
    assert lo > 0
    lo, hi = difference(replicates(same, strata, counts), base, "auc")
    assert lo <= 0 <= hi
    assert difference(base, base, "worst_auc") == (0.0, 0.0)
