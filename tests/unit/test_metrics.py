"""MEDFAIR metrics: parity with the study's published run, degenerate groups, cross-checks."""
from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from engine.evaluation.metrics import _interp_linear, bce, compute_metrics, ece
from engine.task import DDI_SKIN_TONE_TO_GROUP, GROUPS

RUN = "befair_run_example"
# Values the study stored rounded to 4 decimals (MEDFAIR's calculate_FPR_FNR rounds them).
ROUNDED = {f"Test {m}-{g}" for m in ("FPR", "FNR") for g in GROUPS}
EXACT = {  # to 1e-9
    "Test Overall AUC", "Test worst_auc", "Test best_auc", "Test auc_gap", "Test Overall ECE",
    *(f"Test auc-{g}" for g in GROUPS), *(f"Test ECE-{g}" for g in GROUPS),
}
LABELS = {"Test worst_group", "Test best_group"}


def _random(n=300, seed=0):
    rng = np.random.default_rng(seed)
    groups = rng.integers(0, 3, n)
    labels = (rng.random(n) < 0.3).astype(int)
    scores = np.clip(0.25 * labels + 0.1 * groups + rng.random(n) * 0.6, 0, 1)
    return labels, scores, groups


@pytest.fixture(scope="module")
def run5(shared_data):
    preds = pd.read_csv(shared_data / RUN / "5-basic_prompt_DDI_predictions.csv")
    meta = pd.read_csv(shared_data / "ddi_metadata.csv")
    df = preds.merge(meta, on="DDI_file", validate="one_to_one")
    assert len(df) == 656
    expected = pd.read_csv(shared_data / RUN / "expected_metrics_aide_run5.csv").iloc[0]
    return df, expected.drop(["model", "id", "prompt"])


def test_reproduces_the_published_run(run5):
    df, expected = run5
    m = compute_metrics(df["malignant"].astype(int), df["predicted_probability"],
                        df["skin_tone"].map(DDI_SKIN_TONE_TO_GROUP))
    got = m.medfair(prefix="Test ")
    # the same columns, in the same order (47 in the CSV minus model, id, prompt)
    assert list(got) == list(expected.index)
    assert len(got) == 44
    worst: dict[str, float] = {"exact": 0.0, "threshold": 0.0, "rounded": 0.0}
    for key, want in expected.items():
        have = got[key]
        if key in LABELS:
            assert have == want, key
        elif key in ROUNDED:
            # stored at 4 decimals: compare at the printed precision
            assert round(have, 4) == pytest.approx(float(want), abs=1e-12), key
            worst["rounded"] = max(worst["rounded"], abs(have - float(want)))
        elif key in EXACT:
            assert have == pytest.approx(float(want), abs=1e-9), key
            worst["exact"] = max(worst["exact"], abs(have - float(want)))
        else:
            assert have == pytest.approx(float(want), abs=1e-6), key
            worst["threshold"] = max(worst["threshold"], abs(have - float(want)))
    print("max abs diff per metric group:", worst)


def test_summary_matches_the_evaluated_event(run5):
    df, expected = run5
    m = compute_metrics(df["malignant"], df["predicted_probability"], df["skin_tone"].map(DDI_SKIN_TONE_TO_GROUP))
    s = m.summary()
    assert set(s) == {"auc", "worst_auc", "best_auc", "auc_gap", "group_auc", "group_auc_reason", "n"}
    assert s["n"] == 656 and s["group_auc_reason"] == {}
    assert s["group_auc"]["group_2"] == pytest.approx(expected["Test auc-group_2"], abs=1e-9)
    assert s["auc_gap"] == pytest.approx(s["best_auc"] - s["worst_auc"])
    json.dumps(s)  # plain JSON


def test_fairlearn_metricframe_agrees(run5):
    from fairlearn.metrics import MetricFrame
    from sklearn.metrics import roc_auc_score

    for y, s, g in [
        (run5[0]["malignant"].astype(int).to_numpy(), run5[0]["predicted_probability"].to_numpy(),
         run5[0]["skin_tone"].map(DDI_SKIN_TONE_TO_GROUP).to_numpy()),
        _random(),
    ]:
        mf = MetricFrame(metrics=roc_auc_score, y_true=y, y_pred=s, sensitive_features=g)
        ours = compute_metrics(y, s, g)
        for group, value in mf.by_group.items():
            name = group if isinstance(group, str) else f"group_{group}"
            assert ours.group_auc[name] == pytest.approx(value, abs=1e-12)
        assert ours.auc_gap == pytest.approx(mf.difference(method="between_groups"), abs=1e-12)
        assert ours.worst_auc == pytest.approx(mf.group_min(), abs=1e-12)


def test_int_and_string_groups_are_the_same():
    y, s, g = _random()
    a = compute_metrics(y, s, g).medfair()
    b = compute_metrics(y, s, [f"group_{i}" for i in g]).medfair()
    assert a == b


def test_single_class_group_has_no_auc_and_a_reason():
    y, s, g = _random()
    y = y.copy()
    y[g == 1] = 0  # group_1: only benign
    m = compute_metrics(y, s, g)
    n1 = int((g == 1).sum())
    assert m.group_auc["group_1"] is None
    assert m.group_auc_reason == {"group_1": f"only benign cases (n={n1})"}
    assert m.worst_auc == min(m.group_auc["group_0"], m.group_auc["group_2"])
    assert m.best_auc == max(m.group_auc["group_0"], m.group_auc["group_2"])
    med = m.medfair()
    assert med["auc-group_1"] is None and med["tpr_at_tnr_1"] is None
    assert med["recall_at_thres-group_1"] is None and med["specificity_at_thres-group_1"] is not None
    json.dumps(med, allow_nan=False)  # no NaN anywhere


def test_absent_and_all_single_class():
    m = compute_metrics([0, 1, 0, 1], [0.1, 0.9, 0.2, 0.8], ["group_0"] * 4)
    assert m.group_auc == {"group_0": 1.0, "group_1": None, "group_2": None}
    assert m.group_auc_reason["group_2"] == "no cases (n=0)"
    assert m.auc_gap == 0.0
    m = compute_metrics([1, 1, 1], [0.1, 0.9, 0.2], [0, 1, 2])
    assert m.auc is None and m.worst_auc is None and m.auc_gap is None
    assert m.group_auc_reason["group_0"] == "only malignant cases (n=1)"


def test_bad_input_is_rejected():
    with pytest.raises(ValueError):
        compute_metrics([0, 1], [0.1, float("nan")], [0, 1])
    with pytest.raises(ValueError):
        compute_metrics([0, 2], [0.1, 0.2], [0, 1])


def test_interpolation_matches_scipy():
    from scipy.interpolate import interp1d
    from sklearn.metrics import roc_curve

    y, s, _ = _random(200, seed=3)
    s = np.round(s, 1)  # ties -> duplicated ROC points
    fpr, tpr, _ = roc_curve(y, s)
    for spec in (0.8, 0.5, 0.95, 1.0):
        assert _interp_linear(1 - fpr, tpr, spec) == pytest.approx(float(interp1d(1 - fpr, tpr)(spec)), abs=1e-15)


def test_ece_and_bce_by_hand():
    y = np.array([0, 1, 1, 0])
    s = np.array([0.0, 1.0, 0.9, 0.1])
    # bins over [0, 1]: {0.0, 0.1} -> |0.05 - 0| ; {0.9, 1.0} -> |0.95 - 1|
    assert ece(y, s) == pytest.approx(0.05)
    import torch

    p = np.array([0.2, 0.7, 1.0, 0.0])
    t = np.array([0, 1, 0, 1])
    want = torch.nn.BCELoss()(torch.tensor(p), torch.tensor(t, dtype=torch.float64)).item()
    assert bce(t, p) == pytest.approx(want, rel=1e-12)
    assert math.isfinite(bce(t, p))
