"""engine.study.aggregate: the study's long table (mean, std, ci95_hi, ci95_lo per model × prompt)."""
from __future__ import annotations

import csv
import math
import statistics

import pytest

from engine.study.aggregate import (AUC_GAP, METRIC_COLUMNS, OVERALL_AUC, STATISTICS, aggregate, describe,
                                    sizes, statistic, write_csv)

# The "Be Fair!" study's seven AIDE basic_prompt runs (Test Overall AUC) and its published aggregate
# (anna-richter/be-fair, evaluation/MEDFAIR_evaluations/individual_runs_AIDE_MLZero.csv and
# AIDE_MLZero_Baseline_Human_aggregated.csv): checks the formula, not our data.
AIDE_BASIC_AUC = [0.6073792729245795, 0.5500090432266231, 0.625875685778019, 0.6808705612829324,
                  0.615578465063001, 0.603195273406885, 0.6075601374570447]
PUBLISHED = {"mean": 0.612924062734155, "std": 0.0385226826386114,
             "ci95_hi": 0.6414620654012678, "ci95_lo": 0.5843860600670422}


def test_columns_are_the_studys():
    assert len(METRIC_COLUMNS) == 42 and len(set(METRIC_COLUMNS)) == 42
    assert METRIC_COLUMNS[0] == "Test Overall AUC" and METRIC_COLUMNS[-1] == "Test FNR-group_2"
    assert OVERALL_AUC in METRIC_COLUMNS and AUC_GAP in METRIC_COLUMNS
    assert STATISTICS == ("mean", "std", "ci95_hi", "ci95_lo")


def test_reproduces_the_published_aggregate_of_seven_runs():
    rows = [{"model": "AIDE", "prompt": "basic_prompt", OVERALL_AUC: v} for v in AIDE_BASIC_AUC]
    table = aggregate(rows, metrics=[OVERALL_AUC])
    assert [r["statistic"] for r in table] == list(STATISTICS)
    for r in table:
        assert r[OVERALL_AUC] == pytest.approx(PUBLISHED[r["statistic"]], abs=1e-12)


def test_hand_computation_groups_and_order():
    rows = [
        {"model": "offline", "prompt": "fairness-methods", OVERALL_AUC: 0.7, AUC_GAP: 0.1},
        {"model": "offline", "prompt": "base", OVERALL_AUC: 0.6, AUC_GAP: 0.2},
        {"model": "offline", "prompt": "base", OVERALL_AUC: 0.8, AUC_GAP: None},
        {"model": "offline", "prompt": "base", OVERALL_AUC: 0.7, AUC_GAP: float("nan")},
        {"model": "offline", "prompt": "fairness-methods", OVERALL_AUC: 0.9, AUC_GAP: 0.3},
        {"model": "llm", "prompt": "base", OVERALL_AUC: 0.5},
    ]
    table = aggregate(rows, metrics=[OVERALL_AUC, AUC_GAP])
    keys = [(r["model"], r["prompt"]) for r in table[::4]]
    assert keys == [("offline", "base"), ("offline", "fairness-methods"), ("llm", "base")]
    std = statistics.stdev([0.6, 0.8, 0.7])
    assert statistic(table, "offline", "base", "mean", OVERALL_AUC) == pytest.approx(0.7)
    assert statistic(table, "offline", "base", "std", OVERALL_AUC) == pytest.approx(std)
    assert statistic(table, "offline", "base", "ci95_lo", OVERALL_AUC) == pytest.approx(0.7 - 1.96 * std / math.sqrt(3))
    # one gap value only: a mean, no spread
    assert statistic(table, "offline", "base", "mean", AUC_GAP) == pytest.approx(0.2)
    assert statistic(table, "offline", "base", "std", AUC_GAP) is None
    assert statistic(table, "llm", "base", "mean", AUC_GAP) is None
    ordered = aggregate(rows, metrics=[OVERALL_AUC], prompt_order=["fairness-methods", "base"])
    assert [r["prompt"] for r in ordered[::4]] == ["fairness-methods", "base", "base"]
    assert sizes(rows) == {("offline", "fairness-methods"): 2, ("offline", "base"): 3, ("llm", "base"): 1}


def test_describe_edge_cases_and_bad_values():
    assert describe([]) == {"mean": None, "std": None, "ci95_hi": None, "ci95_lo": None}
    assert describe([0.5])["std"] is None
    with pytest.raises(ValueError, match="not a number"):
        aggregate([{"model": "a", "prompt": "b", OVERALL_AUC: "auc-group_1"}], metrics=[OVERALL_AUC])


def test_csv_has_the_published_layout(tmp_path):
    rows = [{"model": "AIDE", "prompt": "basic_prompt", OVERALL_AUC: v} for v in AIDE_BASIC_AUC]
    path = write_csv(aggregate(rows), tmp_path / "agg.csv")
    with path.open() as fh:
        got = list(csv.reader(fh))
    assert got[0] == ["", "statistic", "model", "prompt", *METRIC_COLUMNS]
    assert got[1][:4] == ["0", "mean", "AIDE", "basic_prompt"]
    assert float(got[1][4]) == pytest.approx(PUBLISHED["mean"], abs=1e-12)
    assert got[1][5] == ""  # no accuracy given: empty, as pandas writes NaN
