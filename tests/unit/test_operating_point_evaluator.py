"""A node's evaluation carries the operating point: the cut-off chosen on its own validation
predictions, applied unchanged to test; a fixed probability; no validation set, said in words."""
from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from engine.measures import operating_point as op
from engine.evaluation.evaluator import NodeEvaluator, add_operating_point
from engine.evaluation.harness import EvalOutcome
from engine.evaluation.heldout import score_predictions
from engine.execution.sandbox import Sandbox

N = 90   # 30 per group, 10 of them malignant


def _split(root: Path, name: str, seed: int) -> tuple[Path, Path]:
    """A held-out split: images (their file names carry the score the node will give) and labels."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    images = root / name / "images"
    images.mkdir(parents=True)
    rows = []
    for i in range(N):
        label = int(i % 3 == 0)
        score = float(np.clip(rng.normal(0.35 + 0.25 * label, 0.15), .01, .99))
        file = f"img_{i:03d}_{int(score * 1000):03d}.png"
        Image.new("RGB", (4, 4), (i, i, i)).save(images / file)
        rows.append({"file": file, "label": label, "group": f"group_{(i // 3) % 3}"})
    pd.DataFrame(rows).to_csv(root / name / "labels.csv", index=False)
    return images, root / name / "labels.csv"


SOLUTION = '''
import os
def predict(folder):
    return {f: int(f.split("_")[2][:3]) / 1000 for f in os.listdir(folder)}
'''


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    root = tmp_path_factory.mktemp("ws")
    val_images, val_labels = _split(root, "validation", 1)
    test_images, test_labels = _split(root, "test", 2)
    return SimpleNamespace(root=root, validation_images=val_images, validation_labels=val_labels,
                           test_images=test_images, test_labels=test_labels)


def _scores(labels: Path) -> tuple[np.ndarray, np.ndarray]:
    table = pd.read_csv(labels)
    return table["label"].to_numpy(), np.array([int(f.split("_")[2][:3]) / 1000 for f in table["file"]])


def test_a_real_evaluation_chooses_the_cut_off_on_validation_and_applies_it_to_test(workspace, tmp_path):
    node = tmp_path / "node"
    node.mkdir()
    (node / "solution.py").write_text(textwrap.dedent(SOLUTION))
    outcomes = NodeEvaluator(workspace, sandbox=Sandbox.create("auto"), timeout=120).evaluate(node)
    assert [o.verdict for o in outcomes.values()] == ["ok", "ok"]
    labels, scores = _scores(workspace.validation_labels)
    expected = op.sensitivity_threshold(labels, scores, 0.9)
    blocks = {split: json.loads(json.dumps(o.summary[op.KEY])) for split, o in outcomes.items()}
    assert blocks["validation"]["threshold"] == blocks["test"]["threshold"] == pytest.approx(expected, abs=1e-6)
    assert blocks["validation"]["setting"] == "sensitivity:0.90"
    validation = op.OperatingPoint.of(outcomes["validation"].summary[op.KEY])
    assert validation.overall.sensitivity[0] >= 0.9
    test_labels, test_scores = _scores(workspace.test_labels)
    test = op.OperatingPoint.of(outcomes["test"].summary[op.KEY])
    assert test.overall.caught == int(((test_scores >= expected) & (test_labels == 1)).sum())
    assert outcomes["test"].summary["group_auc"] and "ci" in outcomes["test"].summary   # the old fields stay


def _outcome(labels: Path, scores: np.ndarray | None = None, verdict: str = "ok") -> EvalOutcome:
    table = pd.read_csv(labels)
    if verdict != "ok":
        return EvalOutcome(ok=False, verdict=verdict, reason="boom")
    _, _, metrics = score_predictions(dict(zip(table["file"], scores, strict=True)), labels)
    return EvalOutcome(ok=True, verdict="ok", summary=metrics.summary(), metrics=metrics)


def test_a_fixed_probability_needs_no_validation_and_a_failed_validation_is_said(workspace):
    val = _scores(workspace.validation_labels)[1]
    test = _scores(workspace.test_labels)[1]
    outcomes = {"validation": _outcome(workspace.validation_labels, verdict="timeout"),
                "test": _outcome(workspace.test_labels, test)}
    add_operating_point(outcomes, op.Setting.parse("sensitivity:0.95"))
    block = outcomes["test"].summary[op.KEY]
    assert block["threshold"] is None and "validation split was not measured (timeout)" in block["reason"]
    assert op.KEY not in outcomes["validation"].summary

    outcomes = {"validation": _outcome(workspace.validation_labels, val), "test": _outcome(workspace.test_labels, test)}
    add_operating_point(outcomes, op.Setting.parse("probability:0.4"))
    assert {o.summary[op.KEY]["threshold"] for o in outcomes.values()} == {0.4}
    assert {o.summary[op.KEY]["chosen_on"] for o in outcomes.values()} == {"fixed"}

    outcomes = {"test": _outcome(workspace.test_labels, test)}   # a be-fair workspace: test only
    add_operating_point(outcomes, op.Setting.parse(op.DEFAULT))
    assert "withholds no validation set" in outcomes["test"].summary[op.KEY]["reason"]
