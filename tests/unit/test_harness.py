"""The evaluation harness: a node's predict runs in its own process; every failure is a verdict."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.processes import running_with

from engine.evaluation.harness import evaluate, score_predictions

N = 12  # 4 per group, 2 malignant each


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    """Tiny held-out set in the workspace layout: images/ and a sibling labels.csv."""
    from PIL import Image

    root = tmp_path_factory.mktemp("heldout")
    images = root / "images"
    images.mkdir()
    rows = []
    for i in range(N):
        label = int(i % 4 < 2)
        value = 200 if label else 60  # malignant images are bright: a learnable cue
        Image.new("RGB", (8, 8), (value, value // 2, 40 + i)).save(images / f"img_{i:03d}.png")
        rows.append({"file": f"img_{i:03d}.png", "label": label, "group": f"group_{i % 3}", "skin_tone": 12})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)
    return images, root / "labels.csv"


def _node(tmp_path: Path, body: str) -> Path:
    node = tmp_path / "node"
    (node / "input").mkdir(parents=True)
    (node / "working").mkdir()
    (node / "solution.py").write_text(textwrap.dedent(body))
    return node


def _eval(node, heldout, **kw):
    images, labels = heldout
    return evaluate(node, "solution.py", images, labels, **kw)


GOOD = '''
import json, os
import numpy as np
from PIL import Image

MODEL = os.path.join("working", "model.json")

def _brightness(path):
    return float(np.asarray(Image.open(path).convert("L"), dtype=float).mean()) / 255.0

def predict(folder):
    with open(MODEL) as fh:
        scale = json.load(fh)["scale"]
    names = sorted(f for f in os.listdir(folder) if f.endswith(".png"))
    assert not any(f.endswith(".csv") for f in os.listdir(folder)), "labels leaked"
    assert not os.path.exists(os.path.join(folder, "..", "labels.csv")), "labels leaked"
    return {n: min(1.0, _brightness(os.path.join(folder, n)) * scale) for n in names}

if __name__ == "__main__":
    with open(MODEL, "w") as fh:
        json.dump({"scale": 1.5}, fh)
    open(os.path.join("working", "trained.flag"), "w").close()
    print("Validation AUC: 0.99")
'''


def test_good_solution_trains_as_script_and_is_scored(tmp_path, heldout):
    node = _node(tmp_path, GOOD)
    subprocess.run([sys.executable, "solution.py"], cwd=node, check=True, capture_output=True)
    assert (node / "working" / "model.json").exists()
    (node / "working" / "trained.flag").unlink()

    out = _eval(node, heldout, timeout=60)
    assert out.ok and out.verdict == "ok", out.reason
    assert not (node / "working" / "trained.flag").exists()  # imported, not run as __main__
    assert set(out.predictions) == {f"img_{i:03d}.png" for i in range(N)}
    assert out.summary["auc"] == 1.0 and out.summary["n"] == N
    assert set(out.summary["group_auc"]) == {"group_0", "group_1", "group_2"}
    assert out.medfair["Overall AUC"] == 1.0 and "Overall AUC" in out.medfair
    assert out.verdict == "ok" and out.summary["auc_gap"] == 0.0
    assert out.elapsed > 0


BAD = {
    "no_predict": "def train():\n    pass\n",
    "import_error": "import json\nraise RuntimeError('boom at import')\n",
    "exception": "def predict(folder):\n    raise ValueError('cannot read images')\n",
    "missing_files": "import os\ndef predict(folder):\n    return {f: 0.5 for f in sorted(os.listdir(folder))[1:]}\n",
    "extra_files": ("import os\ndef predict(folder):\n    d = {f: 0.5 for f in os.listdir(folder)}\n"
                    "    d['ghost.png'] = 0.1\n    return d\n"),
    "nan": "import os\ndef predict(folder):\n    return {f: float('nan') for f in os.listdir(folder)}\n",
    "out_of_range": "import os\ndef predict(folder):\n    return {f: 1.5 for f in os.listdir(folder)}\n",
    "wrong_type": "import os\ndef predict(folder):\n    return [0.5 for f in os.listdir(folder)]\n",
}


@pytest.mark.parametrize("verdict", sorted(BAD))
def test_bad_solutions_get_a_verdict(tmp_path, heldout, verdict):
    out = _eval(_node(tmp_path, BAD[verdict]), heldout, timeout=60)
    assert not out.ok
    assert out.verdict == verdict, (out.verdict, out.reason)
    assert out.reason and len(out.reason) < 400
    assert out.summary == {} and out.medfair == {}


def test_reasons_name_the_problem(tmp_path, heldout):
    out = _eval(_node(tmp_path, BAD["import_error"]), heldout)
    assert "boom at import" in out.reason
    out = _eval(_node(tmp_path / "b", BAD["missing_files"]), heldout)
    assert "img_000.png" in out.reason and "1 of 12" in out.reason


def test_timeout_kills_the_process_group(tmp_path, heldout):
    import time
    import uuid

    marker = f"befair-test-{uuid.uuid4().hex}"
    body = f'''
    import subprocess, sys, time
    def predict(folder):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "{marker}"], start_new_session=True)
        time.sleep(60)
    '''
    node = _node(tmp_path, body)
    out = _eval(node, heldout, timeout=3)
    assert out.verdict == "timeout" and out.elapsed < 30
    for _ in range(50):  # the grandchild (in a session of its own) dies with the sandbox
        if not running_with(marker):
            break
        time.sleep(0.1)
    assert not running_with(marker)

def test_dataframe_and_numpy_values_are_accepted(tmp_path, heldout):
    body = '''
    import os
    import numpy as np
    import pandas as pd
    def predict(folder):
        files = sorted(os.listdir(folder))
        return pd.DataFrame({"filename": files, "probability": np.linspace(0.1, 0.9, len(files)).astype(np.float32)})
    '''
    out = _eval(_node(tmp_path, body), heldout)
    assert out.ok, out.reason
    assert out.predictions["img_000.png"] == pytest.approx(0.1)


def test_solution_prints_do_not_break_the_channel(tmp_path, heldout):
    body = '''
    import os
    print("loading model...")
    def predict(folder):
        print("predicting", folder)
        return {os.path.join(folder, f): 0.5 for f in os.listdir(folder)}  # full paths are fine
    '''
    out = _eval(_node(tmp_path, body), heldout)
    assert out.ok, out.reason
    assert "loading model" in out.log_tail


def test_score_predictions_directly(heldout):
    _, labels = heldout
    df = pd.read_csv(labels)
    preds = dict(zip(df["file"], np.where(df["label"] == 1, 0.8, 0.3), strict=True))
    verdict, reason, metrics = score_predictions(preds, labels)
    assert verdict == "ok" and reason is None and metrics.auc == 1.0
    frame = pd.DataFrame({"file": list(preds), "prob": list(preds.values())})
    assert score_predictions(frame, labels)[0] == "ok"
    assert score_predictions({**preds, df["file"][0]: "high"}, labels)[0] == "wrong_type"
    assert score_predictions({k: -0.1 for k in preds}, labels)[0] == "out_of_range"
    assert score_predictions(None, labels)[0] == "wrong_type"


def test_on_a_prepared_workspace(request, tmp_path):
    """The real layout: WORKSPACE/heldout/validation/{images,labels.csv} (generated data)."""
    pytest.importorskip("engine.data.agent_workspace", reason="the workspace builder is not there yet")
    workspace = request.getfixturevalue("workspace")
    if hasattr(workspace, "validation_images"):
        images, labels = Path(workspace.validation_images), Path(workspace.validation_labels)
    else:
        root = Path(getattr(workspace, "root", workspace))
        images, labels = root / "heldout/validation/images", root / "heldout/validation/labels.csv"
    body = '''
    import os
    def predict(folder):
        return {f: (hash(f) % 100) / 100 for f in os.listdir(folder)}
    '''
    out = evaluate(_node(tmp_path, body), "solution.py", images, labels, timeout=60)
    assert out.ok, out.reason
    assert out.summary["n"] == len(pd.read_csv(labels))
    assert set(out.summary["group_auc"]) == {"group_0", "group_1", "group_2"}


COUNTS_IMPORTS = GOOD.replace(
    'MODEL = os.path.join("working", "model.json")',
    'MODEL = os.path.join("working", "model.json")\n'
    'import sys as _sys\n'
    'print("IMPORTED-SOLUTION", file=_sys.stderr)\n'
    'import time as _time\n'
    '_calls = []\n',
).replace(
    "def predict(folder):\n",
    "def predict(folder):\n"
    "    _calls.append(folder)\n"
    "    if len(_calls) == 2 and os.path.exists(os.path.join('working', 'slow_second')):\n"
    "        _time.sleep(30)\n",
)


def test_several_splits_share_one_import_and_keep_finished_results(tmp_path, heldout):
    from engine.evaluation.harness import evaluate_splits

    node = _node(tmp_path, COUNTS_IMPORTS)
    subprocess.run([sys.executable, "solution.py"], cwd=node, check=True, capture_output=True)
    images, labels = heldout
    outcomes = evaluate_splits(node, "solution.py", {"validation": (images, labels), "test": (images, labels)})
    assert [o.verdict for o in outcomes.values()] == ["ok", "ok"]
    assert outcomes["validation"].summary == outcomes["test"].summary
    assert outcomes["validation"].log_tail.count("IMPORTED-SOLUTION") == 1

    # A timeout in the second split keeps the first split's result.
    (node / "working" / "slow_second").write_text("1")
    outcomes = evaluate_splits(node, "solution.py", {"validation": (images, labels), "test": (images, labels)},
                               timeout=8)
    assert outcomes["validation"].verdict == "ok" and outcomes["validation"].summary["auc"] is not None
    assert outcomes["test"].verdict == "timeout"
