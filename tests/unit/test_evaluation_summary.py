"""EvaluationSummary (engine.measures.summary) reads every stored form of an `evaluated` summary:
v0 (no intervals), v1 (intervals spelled out), v2 (compact), v3 (with the group differences), the
operating point's block in any; and a summary round-trips to the payload it was read from."""
from __future__ import annotations

import json

import numpy as np

from engine.evaluation.metrics import compute_metrics
from engine.measures import operating_point as op
from engine.measures.summary import EvaluationSummary
from engine.session import figure_text
from engine.session.views import group_tests

GROUPS = ("group_0", "group_1", "group_2")


def _scored(seed: int = 3):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.array(GROUPS), [120, 100, 80])
    y = (rng.random(g.size) < 0.3).astype(int)
    s = np.clip(0.5 * y + rng.normal(0.3, 0.2, g.size), 0, 1)
    return y, s, g


def test_v0_has_figures_and_no_intervals():
    v0 = {"auc": 0.8, "worst_auc": 0.7, "best_auc": 0.9, "auc_gap": 0.2,
          "group_auc": {"group_0": 0.9, "group_1": 0.8, "group_2": 0.7}, "group_auc_reason": {}, "n": 300}
    s = EvaluationSummary.from_payload(v0)
    assert (s.auc, s.worst_auc, s.best_auc, s.auc_gap, s.n) == (0.8, 0.7, 0.9, 0.2, 300)
    assert s.group_auc["group_2"] == 0.7
    assert s.intervals is None and s.operating_point is None and s.signed is None and s.groups_apart is None
    assert figure_text.compact(s) == ".800 / .200"
    assert figure_text.public(s)["interval"] == figure_text.NO_INTERVAL
    assert s.to_payload() == v0


def test_v1_spelled_out_intervals_read_as_the_compact_ones():
    v1 = {"auc": 0.8, "worst_auc": 0.7, "auc_gap": 0.2, "group_auc": {"group_0": 0.9, "group_2": 0.7}, "n": 300,
          "auc_ci": [0.75, 0.85], "worst_auc_ci": [0.6, 0.8], "auc_gap_ci": [0.05, 0.35],
          "group_auc_ci": {"group_0": [0.85, 0.95], "group_2": [0.6, 0.8]},
          "group_n": {"group_0": 120, "group_2": 80}, "group_positives": {"group_0": 30, "group_2": 20},
          "group_missed": {"group_0": 3, "group_2": 6}, "ci_method": "stratified-bootstrap-2000-v1"}
    s = EvaluationSummary.from_payload(v1)
    assert s.intervals is not None
    assert (s.intervals.auc, s.intervals.worst, s.intervals.gap) == ([0.75, 0.85], [0.6, 0.8], [0.05, 0.35])
    assert s.intervals.group("group_2") == [0.6, 0.8] and s.intervals.counts("group_2") == (80, 20, 6)
    assert s.intervals.method == "stratified-bootstrap-2000-v1"
    assert figure_text.interval(s, "auc_gap") == [0.05, 0.35]
    dark = next(g for g in figure_text.groups(s) if g.key == "56")
    assert (dark.n, dark.malignant, dark.missed) == (80, 20, 6)


def test_v3_as_recorded_today_reads_back_every_part():
    y, s, g = _scored()
    metrics = compute_metrics(y, s, g, intervals=True)
    setting = op.Setting.parse(op.DEFAULT)
    threshold, _ = op.choose_threshold(setting, (y, s))
    payload = json.loads(json.dumps({**metrics.summary(), op.KEY: op.block(setting, threshold, y, s, g, GROUPS)}))
    read = EvaluationSummary.from_payload(payload)
    assert read.auc == metrics.auc and read.auc_gap == metrics.auc_gap and dict(read.group_auc) == metrics.group_auc
    assert read.intervals is not None and read.intervals.method == payload["ci_method"]
    assert read.signed == payload["signed"] and read.groups_apart.apart == payload["groups_apart"]["apart"]
    assert read.operating_point is not None and read.operating_point.threshold == round(threshold, 6)
    assert group_tests.words(read) is not None
    assert read.to_payload() == payload                      # nothing lost, nothing added


def test_only_keeps_the_named_figures_and_damaged_values_read_as_missing():
    s = EvaluationSummary.from_payload({"auc": 0.8, "auc_gap": 0.1, "group_auc": {"group_0": 0.9}, "ci": [0.7]})
    assert s.only(frozenset({"auc"})).to_payload() == {"auc": 0.8}
    assert s.only(frozenset()) is None
    odd = EvaluationSummary.from_payload({"auc": "high", "n": True, "group_auc": [1], "signed": "x",
                                          "groups_apart": 3, op.KEY: "?"})
    assert (odd.auc, odd.n, dict(odd.group_auc), odd.signed, odd.groups_apart, odd.operating_point) == \
        (None, None, {}, None, None, None)
    assert EvaluationSummary.from_payload(None) is None
