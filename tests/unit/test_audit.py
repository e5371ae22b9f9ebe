"""Audit: static reading of pipelines, and claimed vs measured metrics."""
from __future__ import annotations

import json
import textwrap

import pytest

from engine.evaluation.audit import FLAGS, audit_code, check_claim, parse_claimed_metric

PLAIN = '''
"""Train a classifier. Note: we ignore skin_tone on purpose."""
import pandas as pd
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import GroupKFold

df = pd.read_csv("input/train.csv")
df["y"] = (df["label"] == "malignant").astype(int)
print("columns: skin_tone")
print(f"skin_tone is not used ({len(df)} rows)")
for fold, (tr, va) in enumerate(GroupKFold(5).split(df, groups=df["image_name"])):
    auc = roc_auc_score(df.y.iloc[va], df.y.iloc[va])
print(f"Validation AUC: {auc:.4f}")
'''

CASES = {
    "reads_skin_tone": [
        'import pandas as pd\ndf = pd.read_csv("x.csv")\ntones = df["skin_tone"].values\n',
        'df = load()\nx = df.fitzpatrick_scale\n',
        'SENS = "alternative_skin_tone"\ncols = [SENS, "label"]\n',
        'stats = df.groupby("fitzpatrick")["y"].mean()\n',
    ],
    "per_group_metric": [
        textwrap.dedent('''
        from sklearn.metrics import roc_auc_score
        for tone in sorted(val["skin_tone"].unique()):
            m = val["skin_tone"] == tone
            print(tone, roc_auc_score(val.y[m], val.p[m]))
        '''),
        'aucs = {g: roc_auc_score(d.y, d.p) for g, d in val.groupby("group")}\n',
        'res = val.groupby("skin_tone").apply(lambda d: roc_auc_score(d.y, d.p))\n',
        'from fairlearn.metrics import MetricFrame\n'
        'mf = MetricFrame(metrics=f, y_true=y, y_pred=p, sensitive_features=s)\n',
    ],
    "reweighting": [
        'w = 1.0 / df["skin_tone"].map(df["skin_tone"].value_counts())\nmodel.fit(X, y, sample_weight=w)\n',
        'sw = train["fitzpatrick_scale"].map({5: 3.0, 6: 3.0}).fillna(1.0)\nclf.fit(X, y, sample_weight=sw.values)\n',
        'w = torch.tensor(1.0 / df.skin_tone.map(df.skin_tone.value_counts()).values)\n'
        'loss = (F.binary_cross_entropy_with_logits(z, y, reduction="none") * w[idx]).mean()\n',
        'criterion = nn.CrossEntropyLoss(weight=group_w)\n',
    ],
    "upsampling": [
        'from sklearn.utils import resample\ndark = train[train.skin_tone >= 5]\n'
        'up = resample(dark, replace=True, n_samples=500)\n',
        'dark = df[df["fitzpatrick_scale"] >= 5]\nextra = dark.sample(n=400, replace=True, random_state=0)\n',
        'dark = train[train.skin_tone >= 5]\ntrain = pd.concat([train, dark, dark, dark])\n',
        'dark_df = train[train.skin_tone.isin([5, 6])]\ntrain = pd.concat([train] + [dark_df] * 3)\n',
        'w = 1.0 / df.skin_tone.map(df.skin_tone.value_counts())\nsampler = WeightedRandomSampler(w.values, len(w))\n',
    ],
    "filtering": [
        'df = df[df["label"] != "non-neoplastic"]\n',
        'df = df.loc[df.skin_tone <= 4]\n',
        'df = df.query("label != \'non-neoplastic\'")\n',
        'df = df[~df["fitzpatrick_scale"].isin([1, 2])]\n',
        'df = df[df["label"].isin(["benign", "malignant"])].reset_index(drop=True)\n',
    ],
    "pareto_selection": [
        textwrap.dedent('''
        group_aucs = {g: roc_auc_score(d.y, d.p) for g, d in val.groupby("skin_tone")}
        worst = min(group_aucs.values())
        if worst > best_worst:
            best_worst = worst
            torch.save(model.state_dict(), "working/best.pt")
        '''),
        'if worst_group_auc > best_score:\n    save()\n',
        'best = max(candidates, key=lambda c: c.pareto_rank)\n',
    ],
}


def test_plain_pipeline_has_no_flags():
    r = audit_code(PLAIN)
    assert r.flags == {f: False for f in FLAGS}, r.evidence
    assert r.evidence == {} and r.note is None


@pytest.mark.parametrize("flag,code", [(f, c) for f, codes in CASES.items() for c in codes])
def test_each_case_is_flagged_with_evidence(flag, code):
    r = audit_code(code)
    assert r.flags[flag], (flag, code)
    assert r.evidence[flag].startswith("line ")
    line = int(r.evidence[flag].split(":")[0].split()[1])
    assert r.evidence[flag].split(": ", 1)[1] == code.splitlines()[line - 1].strip()


def test_interventions_are_not_confused():
    assert not audit_code(CASES["reweighting"][0]).flags["upsampling"]
    assert not audit_code(CASES["upsampling"][2]).flags["reweighting"]
    assert not audit_code(CASES["upsampling"][4]).flags["reweighting"]  # a skin-tone sampler upsamples
    # class balancing is not a skin-tone intervention
    assert not audit_code('clf = LogisticRegression(class_weight="balanced")\n').flags["reweighting"]
    assert not audit_code('crit = nn.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0]))\n').flags["reweighting"]
    class_sampler = ('cw = train.target.map(1.0 / train.target.value_counts())\n'
                     'sampler = WeightedRandomSampler(cw.values, len(cw))\n')
    assert not any(audit_code(class_sampler).flags[f] for f in ("reweighting", "upsampling"))
    minority = 'minority = train[train.target == 1]\nup = resample(minority, replace=True, n_samples=500)\n'
    assert not audit_code(minority).flags["upsampling"]
    assert not audit_code('X_res, y_res = SMOTE().fit_resample(X, y)\n').flags["upsampling"]
    # computing the worst-group AUROC is monitoring; choosing on it is selection
    monitor = ('aucs = {g: roc_auc_score(d.y, d.p) for g, d in val.groupby("skin_tone")}\n'
               'worst = min(aucs.values())\nif auc > best_auc:\n    best_auc = auc\n')
    assert not audit_code(monitor).flags["pareto_selection"]
    assert audit_code(monitor.replace("if auc > best_auc:\n    best_auc = auc", "if worst > best:\n    best = worst"))\
        .flags["pareto_selection"]
    # a group's rows taken out to evaluate it are not a filter
    assert not audit_code('dark = val[val.skin_tone >= 5]\nauc = roc_auc_score(dark.y, dark.p)\n').flags["filtering"]
    assert not audit_code('df = df[df.label.isin(["malignant", "benign", "non-neoplastic"])]\n').flags["filtering"]
    assert not audit_code('df = df[df["label"] == "malignant"]\n').flags["filtering"]
    assert not audit_code('m = LogisticRegression(class_weight=None)\n').flags["reweighting"]
    assert not audit_code('s = df.sample(frac=1.0, random_state=0)\n').flags["upsampling"]
    assert not audit_code('best = min(val_losses)\n').flags["pareto_selection"]


def test_syntax_error_gives_a_note():
    r = audit_code("def f(:\n  pass\n")
    assert not any(r.flags.values())
    assert r.note and "syntax error" in r.note and "line 1" in r.note
    d = r.to_dict()
    json.dumps(d)


@pytest.mark.parametrize("text,value", [
    ("Validation AUC: 0.81", 0.81),
    ("val_auc=0.8", 0.8),
    ("AUROC: 0.79", 0.79),
    ("Final Validation AUROC: 0.8123", 0.8123),
    ("Epoch 1 Validation AUC: 0.70\nEpoch 2 Validation AUC: 0.74\n", 0.74),
    ("Validation ROC-AUC score: 0.66", 0.66),
    ("Validation TTA AUROC with Mixup + RandomErasing: 0.9145", 0.9145),
    ("Mean CV AUC: 0.84 (+/- 0.02)", 0.84),
    ("Validation AUC (5-fold): 0.83", 0.83),
    ("ROC AUC is 81.2%", 0.812),
    ("Validation AUC: 0.80\nAUC group_0: 0.9\nAUC gap: 0.1\nworst-group AUC: 0.7\n", 0.80),
    ("loss: 0.3\naccuracy: 0.9\n", None),
    ("", None),
    ("<OMITTED>", None),
    (["Validation AUC", ": 0.77\n"], 0.77),
    (None, None),
])
def test_parse_claimed_metric(text, value):
    got = parse_claimed_metric(text)
    assert got == (pytest.approx(value) if value is not None else None)


def test_check_claim():
    ok = check_claim(0.81, 0.75, ran_ok=True, output="Validation AUC: 0.81\n")
    assert ok["unsupported"] is False and ok["difference"] == pytest.approx(0.06)
    assert "claimed 0.810" in ok["reason"]
    crashed = check_claim(0.9, None, ran_ok=False, output="Traceback ...\nKeyError: 'label'")
    assert crashed["unsupported"] is True and "crashed" in crashed["reason"]
    silent = check_claim(0.9, 0.6, ran_ok=True, output="")
    assert silent["unsupported"] is True and "no output" in silent["reason"]
    unbacked = check_claim(0.9, 0.6, ran_ok=True, output="training done\n")
    assert unbacked["unsupported"] is True and "never prints" in unbacked["reason"]
    none = check_claim(None, 0.7, ran_ok=True, output="done")
    assert none == {"claimed": None, "measured": 0.7, "difference": None, "unsupported": False,
                    "reason": "no metric claimed"}
    assert check_claim(0.8, 0.79, ran_ok=True, output="AUC: 0.8")["reason"] is None


def test_aide_journal_example(shared_data):
    path = shared_data / "aide_journal_example" / "journal.json"
    if not path.exists():
        pytest.skip("no AIDE journal example")
    nodes = json.loads(path.read_text())["nodes"]
    assert len(nodes) == 20
    parsed = 0
    for node in nodes:
        r = audit_code(node["code"])
        assert r.flags["reads_skin_tone"] is False, (node["step"], r.evidence)
        assert r.flags["per_group_metric"] is False and r.flags["pareto_selection"] is False
        out = node.get("_term_out")
        claimed = parse_claimed_metric(out)
        metric = (node.get("metric") or {}).get("value")
        if claimed is not None:
            parsed += 1
            # AIDE's own reviewer recorded the same number it printed
            assert metric is None or claimed == pytest.approx(metric, abs=1e-4), node["step"]
        claim = check_claim(metric, None, ran_ok=not node.get("is_buggy"), output=out)
        if metric is not None and node.get("is_buggy"):
            assert claim["unsupported"]
    assert parsed >= 10


@pytest.mark.parametrize("code", [
    'df = df.loc[df.skin_tone != -1]\n',
    'df = df[~df["fitzpatrick_scale"].isin([-1])]\n',
    'df = df.query("skin_tone != -1")\n',
    'df = df[df["skin_tone"].notna()]\n',
])
def test_dropping_unknown_skin_tone_is_preprocessing_not_filtering(code):
    result = audit_code(code)
    assert not result.flags["filtering"]
    assert result.flags["reads_skin_tone"] or "query" in code  # a query string names no column key


@pytest.mark.parametrize("claimed,output,ran_ok,unsupported", [
    (0.8874, "Validation AUROC: 0.8874\n", True, False),
    (0.887, "Validation TTA AUROC with EfficientNet-B0 + Mixup + RandomErasing: 0.8870\n", True, False),
    (0.9145, "Validation AUROC: 91.45%\n", True, False),               # percent form
    (0.9145, "val_auc=0.91\n", True, False),                            # printed at 2 decimals
    (0.91, "AUROC: 0.9145\n", True, False),                             # the claim rounded
    (91.2, "AUROC: 0.912\n", True, False),                              # a claim in percent
    (0.8874, "auc 8.874e-01\n", True, False),                           # scientific notation
    (0.88, "Validation AUROC: 0.8800\nTraceback ...\nOSError: x\n", False, False),  # crashed after printing
    (0.93, "loss 0.4123\nValidation AUROC: 0.8874\n", True, True),     # appears nowhere
    (0.9, "Epoch 90/100\nAUROC: 0.8\n", True, True),                   # 90 is not 90%
    (0.95, "Traceback (most recent call last):\nKeyError: 'label'\n", False, True),
    (0.9, "<OMITTED>", True, False),                                    # nothing to check against
    (0.9, "<OMITTED>", False, True),                                    # crashed: the current rule
])
def test_claim_is_unsupported_only_when_the_number_is_not_printed(claimed, output, ran_ok, unsupported):
    got = check_claim(claimed, None, ran_ok=ran_ok, output=output)
    assert got["unsupported"] is unsupported, got
    assert (got["reason"] is not None) or not unsupported


def test_parse_claimed_metric_reads_digits_inside_words():
    assert parse_claimed_metric("Validation TTA AUROC with EfficientNet-B0 + Mixup: 0.8870") == pytest.approx(0.887)
    assert parse_claimed_metric("ResNet50 AUROC: 0.81") == pytest.approx(0.81)
    assert parse_claimed_metric("AUC 0.81, loss: 0.3") is None  # the number after "loss:" is not an AUC
