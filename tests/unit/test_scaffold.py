"""The scaffold (engine.coders.llm.scaffold): a small model writes features() and train(), befair the
rest. Assembly, the example-copy check, the prompts, and a scaffolded session measured end to end."""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from befair_tui.cli import main
from engine.coders.llm import prompts, scaffold
from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LlmConfig, LlmConfigError
from engine.coders.llm.prompts_be_fair import BeFairContext
from engine.coders.protocol import CoderContext, NodeView
from engine.session.store import SessionStore
from tests.fakes.chat_server import FakeChatServer, code_reply, reply, tool_review

SC = scaffold.load()
OWN_DESIGN = '''import numpy as np
from sklearn.ensemble import ExtraTreesClassifier

SIZE = 16


def colour_stats(X):
    return np.concatenate([X.mean(axis=(1, 2)), X.std(axis=(1, 2))], axis=1)


def features(X):
    """Mean and spread of each colour channel."""
    return colour_stats(X)


def train(X, y, skin_tone):
    model = ExtraTreesClassifier(n_estimators=50, class_weight="balanced", random_state=0)
    model.fit(features(X), y)
    return model
'''


def ctx(**kw) -> CoderContext:
    return CoderContext(instruction="Classify lesions.", metric_line="AUROC", data_preview="preview", step=1,
                        seed=0, **kw)


def test_the_reply_goes_into_the_scaffold_and_only_its_own_parts_are_kept():
    noisy = OWN_DESIGN + '''

def predict(folder):
    return {}


X_all = load_training_data()
train(X_all, None, None)

if __name__ == "__main__":
    print("Validation AUROC: 0.99")
'''
    code = SC.assemble(noisy)
    tree = ast.parse(code)
    defs = [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]
    assert defs == ["load_image", "load_training_data", "_one_row_per_image", "_as_predictor", "colour_stats",
                    "features", "train", "predict"]
    assert code.count("def predict(folder):") == 1 and "return {}" not in code     # the scaffold's predict
    assert "X_all" not in code and "0.99" not in code           # calls and its own __main__ left out
    assert "SIZE = 16" in code and code.index("SIZE = 16") > code.index("SIZE = 32")
    assert code.index("from sklearn.ensemble import ExtraTreesClassifier") < code.index("INPUT = ")
    assert code.count("import numpy as np") == 1                # the scaffold imports it already
    assert scaffold.MARKER not in code


def test_functions_written_in_separate_blocks_are_joined():
    from engine.coders.llm.response_parsing import extract_all_code

    split = ("Design.\n\n### Features\n```python\nimport numpy as np\n\ndef features(X):\n"
             "    return X.mean(axis=(1, 2))\n```\n\n### Train\n```python\nfrom sklearn.svm import SVC\n\n"
             "def train(X, y, skin_tone):\n"
             "    return SVC(probability=True).fit(features(X), y)\n```\n")
    code = extract_all_code(split)
    assert SC.unusable(code) is None and "import numpy as np" in code and "SVC(probability=True)" in code
    # blocks indented under a numbered list: each is read, dedented, train() included
    listed = ("1. **Features**:\n   ```python\n   def features(X):\n       return X.mean(axis=(1, 2))\n   ```\n\n"
              "2. **Train**:\n   ```python\n   def train(X, y, skin_tone):\n"
              "       return LogisticRegression().fit(X, y)\n   ```\n")
    code = extract_all_code(listed)
    assert code is not None and SC.unusable(code) is None and code.startswith("def features(X):\n    return")
    assert "def train(X, y, skin_tone):" in SC.assemble(code)


def test_features_of_any_shape_reach_the_model_as_one_flat_row_per_image(tmp_path):
    """The 1.5B model's most common failure: features() returned the images (n, 32, 32, 3) and
    scikit-learn refused 4-D input. The scaffold flattens whatever features() returns."""
    import subprocess
    import sys

    reply_code = ("import numpy as np\nfrom sklearn.linear_model import LogisticRegression\n\n"
                  "def features(X):\n    return X[:, ::4, ::4, :]\n\n"
                  "def train(X, y, skin_tone):\n    return LogisticRegression(max_iter=200).fit(features(X), y)\n")
    probe = SC.assemble(reply_code).split('if __name__ == "__main__":')[0] + (
        "\nX = np.random.default_rng(0).random((6, 32, 32, 3), dtype=np.float32)\n"
        "print(features(X).shape, train(X, np.array([0, 1] * 3), None).predict_proba(features(X)).shape)\n")
    (tmp_path / "probe.py").write_text(probe)
    out = subprocess.run([sys.executable, "probe.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["(6,", "192)", "(6,", "2)"]


FITS_AS_GIVEN = ("def features(X):\n    return X.mean(axis=(1, 2))\n\n"
                 "def train(X, y, skin_tone):\n    return LogisticRegression().fit(X, y)\n")
FEATURES_AGAIN = ("def features(X):\n    return X[:, ::8, ::8, :]\n\n"
                  "def train(X, y, skin_tone):\n    return make_pipeline(StandardScaler(), LogisticRegression())"
                  ".fit(features(X), y)\n")


@pytest.mark.parametrize("reply_code", [FITS_AS_GIVEN, FEATURES_AGAIN], ids=["fits-X-as-given", "features-again"])
def test_train_gets_the_features_and_features_of_features_are_the_same_rows(tmp_path, reply_code):
    """The 1.5B model's most common failure after flattening: train() fitted the images it was given
    (4-D) because train() got the images. Now it gets features() of them, and a train() that calls
    features() on them again gets the same rows. The assembled file runs on a small generated input
    folder, with no imports of its own (the scaffold's common scikit-learn names are there)."""
    out = _run_assembled(tmp_path, reply_code, tones=[1 + i % 6 for i in range(20)])
    assert out.returncode == 0, out.stderr[-800:]
    assert out.stdout.startswith("Validation AUROC: ") and (tmp_path / "working" / "model.joblib").exists()


def test_train_gets_unknown_skin_type_as_0_never_negative(tmp_path):
    """The CSV codes unknown as -1; np.bincount(skin_tone) and sample_weight=skin_tone, a small
    model's first ideas, failed on it ('list' argument must have no negative elements; weights
    sum to zero). train() gets 0 for unknown."""
    reply_code = ("def features(X):\n    return X.mean(axis=(1, 2))\n\n"
                  "def train(X, y, skin_tone):\n    print('tones', sorted(set(skin_tone.tolist())))\n"
                  "    weights = 1.0 / np.bincount(skin_tone)[skin_tone]\n"
                  "    return LogisticRegression().fit(X, y, sample_weight=weights)\n")
    out = _run_assembled(tmp_path, reply_code, tones=[-1 if i % 5 == 0 else 1 + i % 6 for i in range(20)])
    assert out.returncode == 0, out.stderr[-800:]
    tones = out.stdout.split("tones ", 1)[1].split("\n", 1)[0]
    assert tones.startswith("[0, ") and "-1" not in tones


def _run_assembled(tmp_path, reply_code: str, tones: list[int]):
    """The assembled file run on a small generated input folder of 20 images."""
    from PIL import Image

    images = tmp_path / "input" / "images"
    images.mkdir(parents=True)
    rows = []
    for i, tone in enumerate(tones):
        Image.new("RGB", (40, 40), (40 + 10 * i, 90, 60)).save(images / f"image_{i}.jpg")
        rows.append(f"image_{i},{'malignant' if i % 2 else 'benign'},{tone}")
    (tmp_path / "input" / "skin_lesions.csv").write_text("image_name,label,skin_tone\n" + "\n".join(rows) + "\n")
    (tmp_path / "solution.py").write_text(SC.assemble(reply_code))
    return subprocess.run([sys.executable, "solution.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)


CNN = '''import torch
from torch import nn

SIZE = 16
FLATTEN = False


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                 nn.Linear(4, 1))

    def forward(self, x):
        return self.net(x)


def features(X):
    return X.transpose(0, 3, 1, 2)


def train(X, y, skin_tone):
    torch.manual_seed(0)
    images = torch.from_numpy(np.ascontiguousarray(X))
    images = torch.cat([images, images.flip(3)])
    target = torch.from_numpy(np.concatenate([y, y])).float()
    tones = np.concatenate([skin_tone, skin_tone])
    weight = torch.from_numpy(1.0 / np.bincount(tones)[tones]).float()
    model = SmallCNN()
    optimiser = torch.optim.Adam(model.parameters(), lr=0.01)
    for batch in torch.randperm(len(images)).split(8):
        optimiser.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(model(images[batch])[:, 0], target[batch],
                                                               weight=weight[batch])
        loss.backward()
        optimiser.step()
    return model
'''


def test_a_torch_module_trained_on_the_images_is_saved_and_predicts(tmp_path):
    """train() returns a small CNN (images kept as they are with FLATTEN = False, mirrored copies, a
    loss weighted by skin_tone, one epoch): the scaffold saves it, prints its validation AUROC, and
    the evaluation's worker gets probabilities from predict(folder)."""
    from PIL import Image

    assert SC.unusable(CNN) is None and SC.flaw(CNN) is None
    out = _run_assembled(tmp_path, CNN, tones=[1 + i % 6 for i in range(20)])
    assert out.returncode == 0, out.stderr[-800:]
    assert out.stdout.startswith("Validation AUROC: ")
    held_out = tmp_path / "held_out"
    held_out.mkdir()
    for i in range(3):
        Image.new("RGB", (30, 30), (200, 40 * i, 90)).save(held_out / f"{i:06d}.png")
    result = _predicted(tmp_path, held_out)
    assert result["verdict"] == "ok", result
    assert sorted(result["predictions"]) == ["000000.png", "000001.png", "000002.png"]
    assert all(0.0 <= p <= 1.0 for p in result["predictions"].values())


def test_a_train_that_returns_no_model_is_named_when_it_runs(tmp_path):
    reply_code = "def features(X):\n    return X.mean(axis=(1, 2))\n\ndef train(X, y, skin_tone):\n    return [X, y]\n"
    out = _run_assembled(tmp_path, reply_code, tones=[1] * 20)
    assert out.returncode != 0 and "train() returned list, which has no predict_proba()" in out.stderr


def _predicted(node: Path, images: Path) -> dict:
    """What befair's evaluation worker reads from the node's predict(images)."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run([sys.executable, "-m", "engine.evaluation.harness_worker", "--solution", "solution.py",
                           "--images", str(images), "--out", "result.json"], cwd=node, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-800:]
    result: dict = json.loads((node / "result.json").read_text())
    return result


def test_a_reply_that_copies_the_whole_assembled_file_back_does_not_call_itself(tmp_path):
    """An improve or debug prompt shows the assembled file, with the scaffold's features() wrapper;
    a reply that hands the whole file back must not keep that wrapper (it would recurse)."""
    import subprocess
    import sys

    whole = SC.assemble(OWN_DESIGN)
    again = SC.assemble(whole)
    assert SC.unusable(whole) is None and again.count("features = _one_row_per_image(features)") == 1
    probe = again.split('if __name__ == "__main__":')[0] + (
        "\nX = np.random.default_rng(0).random((6, 32, 32, 3), dtype=np.float32)\nprint(features(X).shape)\n")
    (tmp_path / "probe.py").write_text(probe)
    out = subprocess.run([sys.executable, "probe.py"], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.split() == ["(6,", "6)"], out.stderr[-500:]


def test_names_the_scaffold_imports_are_not_imported_again_from_the_wrong_module():
    """The 1.5B model wrote `from sklearn.ensemble import LogisticRegression` (2 of 6 drafts): the
    scaffold imports LogisticRegression already, so the reply's import of it is left out."""
    code = SC.assemble("import numpy as np\nfrom sklearn.ensemble import LogisticRegression, ExtraTreesClassifier\n"
                       "import sklearn.svm as svm\n\n" + FITS_AS_GIVEN)
    assert "from sklearn.ensemble import ExtraTreesClassifier\n" in code and "import sklearn.svm as svm" in code
    assert "import LogisticRegression" not in code.replace("from sklearn.linear_model import LogisticRegression", "")
    assert code.count("import numpy as np") == 1


def test_assemble_keeps_the_reply_s_module_level_values_and_its_future_import(tmp_path):
    """`MEAN = np.array(...)`, annotated (`SIZE: int = 16`) or unpacked (`LOW, HIGH = ...`): the
    reply's functions read them, so the pipeline holds them; a `from __future__` import goes first,
    where Python takes it. Calls at module level are left out."""
    values = ("MEAN = np.array([0.7, 0.6, 0.5], dtype=np.float32)\nSIZE: int = 16\nLOW, HIGH = 0.0, 1.0\n"
              "np.random.seed(0)\n")
    import numpy as np

    reply = "from __future__ import annotations\n\nimport numpy as np\n\n" + values + "\n\n" + FITS_AS_GIVEN.replace(
        "def features(X):\n", "def features(X):\n    X = np.clip(X - MEAN, LOW, HIGH)\n", 1)
    code = SC.assemble(reply)
    assert code.startswith("from __future__ import annotations\n") and "np.random.seed(0)" not in code
    for value in values.splitlines()[:3]:
        assert value in code, value
    assert SC.check(reply) is None and SC.assemble(SC.written(code) or "") == code
    namespace = {"__name__": "probe", "__file__": str(tmp_path / "solution.py")}
    exec(compile(code.split('if __name__ == "__main__":')[0], "solution.py", "exec"), namespace)
    rows = namespace["features"](np.random.default_rng(0).random((2, 16, 16, 3), dtype=np.float32))
    assert namespace["SIZE"] == 16 and rows.shape[0] == 2


def test_a_reply_that_does_not_parse_goes_in_whole_to_show_its_error():
    code = SC.assemble("def features(X):\n    return X.reshape(len(X), -1\n")
    with pytest.raises(SyntaxError):
        ast.parse(code)
    assert "return X.reshape(len(X), -1" in code and "def predict(folder):" in code


def test_the_shown_scaffold_is_the_real_one_less_the_helpers_bodies_and_the_wrapping():
    shown, real = SC.shown.split("\n"), SC.code.split("\n")
    said = {line for line in shown if line.startswith(("# load_", "# _as_predictor("))}
    assert set(shown) - set(real) == said | {scaffold.WRAPPING_NOTE} and len(said) == 3
    assert "# load_image(path) (the scaffold's, not shown) gives one image as a float32 array" in SC.shown
    assert compile(SC.shown, "shown", "exec") and scaffold.MARKER in shown
    defs = [line for line in shown if line.startswith(("def ", "class "))]
    assert defs == ["def predict(folder):"]      # no helper's def for a small model to fill in
    assert "_TorchModel" not in SC.shown and "_Rows" not in SC.shown


def test_debug_and_improve_prompts_show_the_reply_s_part_of_the_parent_not_the_scaffold_again():
    """The whole file repeated the scaffold, loader and all, and a small model's fix copied the
    loader's df["image_name"] into features() once more."""
    code = SC.assemble(OWN_DESIGN)
    own = OWN_DESIGN.replace("import numpy as np\n", "")     # numpy: the scaffold imports it
    assert ast.dump(ast.parse(SC.written(code) or "")) == ast.dump(ast.parse(own))
    assert SC.written("print('a pipeline of its own')\n") is None
    bug = NodeView(1, "draft", "Trees.", code, "buggy", output="IndexError: only integers", exc_type="IndexError")
    for text in (prompts.compile_md(prompts.debug_prompt(ctx(scaffold=True), bug)),
                 prompts.compile_md(prompts.improve_prompt(ctx(scaffold=True), bug))):
        assert prompts.SCAFFOLDED_CODE in text and "def colour_stats(X):" in text
        assert "def load_training_data():" not in text and 'df["image_name"]' not in text
    plain = prompts.compile_md(prompts.debug_prompt(ctx(), bug))
    assert 'df["image_name"]' in plain and prompts.SCAFFOLDED_CODE not in plain     # without the scaffold: all


def test_a_reply_that_leaves_a_function_unwritten_is_not_taken():
    assert SC.unusable(SC.example) == "the reply did not write features() and train()"   # the shape, copied
    assert SC.unusable(OWN_DESIGN) is None
    unwritten = OWN_DESIGN.replace("    return colour_stats(X)", "    pass")
    assert SC.unusable(unwritten) == "the reply did not write features()"
    stub = "def features(X):\n    return X\n\n\ndef train(X, y, skin_tone):\n    raise NotImplementedError('yours')\n"
    assert SC.unusable(stub) == "the reply did not write train()"
    assert SC.unusable(SC.code) == "the reply did not write features() and train()"   # the scaffold, copied
    inner = ("def features(X):\n    def rows(X):\n        if isinstance(X, _Rows):\n            return X\n"
             "        return np.asarray(written(X)).reshape(len(X), -1).view(_Rows)\n    return rows(X)\n\n"
             "def train(X, y, skin_tone):\n    return LogisticRegression().fit(X, y)\n")
    assert SC.unusable(inner) == "the reply did not write features()"   # the scaffold's inner rows(), as features
    assert SC.unusable("def features(X:\n") is None        # runs into its SyntaxError, which is debugged


def test_prompts_show_the_scaffold_and_ask_for_the_two_functions_only_when_on():
    plain = prompts.to_messages(prompts.draft_prompt(ctx(), 900))[1]["content"]
    framed = prompts.to_messages(prompts.draft_prompt(ctx(scaffold=True), 900))[1]["content"]
    assert scaffold.MARKER not in plain and "# Scaffold" not in plain
    assert scaffold.MARKER in framed and SC.example.strip() in framed and scaffold.RESPONSE_FORMAT in framed
    assert prompts.PIPELINE_CONTRACT[1] not in framed        # the scaffold holds the contract
    # abridged: a small model copied df["image_name"] from the loader into features(), and the helper
    assert SC.shown in framed and 'df["image_name"]' not in framed and "_Rows" not in framed
    assert "# load_training_data() (the scaffold's, not shown) gives X: images" in framed
    assert "def predict(folder):" in framed
    assert "15 minutes" in framed
    instructions = framed.split("# Instructions")[1]
    assert scaffold.packages_text(prompts.installed_versions()) in instructions
    assert all(line in instructions for line in scaffold.GUIDELINE)


# the prompt audit's pattern: words that would tell the agent of the study's concern
AUDIT = re.compile(r"fair|skin[ -]tone|skin type|\bgroups?\b|\bgap\b|fitzpatrick|dark skin|light skin|darker|"
                   r"lighter|subgroup|\bbias|equit|reweigh|sample weight|minimax|worst", re.IGNORECASE)


def _shown_texts(versions: dict[str, str]) -> dict[str, str]:
    """Every text of the scaffold's that a prompt shows."""
    return {"frame": scaffold.FRAME_TEXT, "shown scaffold": SC.shown, "example text": scaffold.EXAMPLE_TEXT,
            "example": SC.example, "response format": scaffold.RESPONSE_FORMAT,
            "guideline": "\n".join(scaffold.GUIDELINE), "packages": scaffold.packages_text(versions),
            "ask again": scaffold.ask_again("the reply did not write train()") + scaffold.ask_again(None)}


def test_the_scaffold_s_prompt_texts_say_the_same_at_every_level_and_hint_nothing():
    for name, text in _shown_texts(prompts.installed_versions()).items():
        unnamed = re.sub(r"\bfairlearn\b", "", text) if name == "packages" else text   # a package's name is no hint
        assert not AUDIT.search(unnamed), (name, AUDIT.search(unnamed))


def test_the_packages_text_names_what_is_installed():
    versions = prompts.installed_versions()
    text = scaffold.packages_text(versions)
    assert {"torch", "torchvision", "fairlearn", "scikit-learn"} <= set(versions)      # this environment's
    assert all(f"{dist} {versions[dist]}" in text for dist in ("torch", "torchvision", "fairlearn"))
    assert "scikit-learn " + versions["scikit-learn"] + " (import sklearn)" in text and "not available" not in text
    bare = scaffold.packages_text({"numpy": "2.0", "scikit-learn": "1.5"})
    assert "Not installed: tensorflow, keras, timm" in bare and "torch" not in bare and "GPU" not in bare


# (WORDING_VERSION, digest of every shown text): a change of the wording must change its version
WORDING = ("2026-11-25", "d0b18c8d169cee1e")


def test_a_change_of_the_shown_wording_changes_its_version():
    texts = _shown_texts({"numpy": "2.0", "torch": "2.5"})
    digest = hashlib.sha256(json.dumps(texts, sort_keys=True).encode()).hexdigest()[:16]
    assert (scaffold.WORDING_VERSION, digest) == WORDING, (
        "the scaffold's shown wording changed: set scaffold.WORDING_VERSION to today's date and WORDING to "
        f"({scaffold.WORDING_VERSION!r}, {digest!r})")


def test_what_the_scaffold_rules_out_is_one_sentence():
    assert scaffold.RULES_OUT.count(". ") == 0 and scaffold.RULES_OUT.endswith(".")
    assert "predict(folder) has the images only" in scaffold.RULES_OUT


def test_the_coder_asks_again_when_the_reply_is_the_example_and_assembles_the_next(tmp_path):
    with FakeChatServer([reply(code_reply("The shape.", SC.example)),
                         reply(code_reply("Colour statistics and a random forest.", OWN_DESIGN))]) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
        first, second = srv.chat_requests
    assert len(second.messages) == len(first.messages) and len(r.llm_calls) == 2
    assert second.messages[:-1] == first.messages[:-1] and "The shape." not in second.text   # not its reply
    note = second.messages[-1]["content"].removeprefix(first.messages[-1]["content"].rstrip())
    assert "The last reply did not write features() and train()" in note and "in full" in note
    assert r.code == SC.assemble(OWN_DESIGN) and r.plan == "Colour statistics and a random forest."
    with FakeChatServer([reply(code_reply("The scaffold back.", SC.code))] * 3) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
    assert r.code is None and len(r.llm_calls) == 3
    assert r.error == "no usable code in 3 replies: the reply did not write features() and train()"


def test_the_be_fair_protocol_never_gets_the_scaffold():
    with FakeChatServer([reply(code_reply("Whole file.", SC.code))]) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(BeFairContext(instruction="Classify.", metric_line="AUROC", data_preview="p", step=1, seed=0))
        text = srv.chat_requests[0].text
    # the whole file, as the protocol reads it (AIDE formats extracted code with black)
    assert ast.dump(ast.parse(r.code or "")) == ast.dump(ast.parse(SC.code)) and "# Scaffold" not in text


@pytest.mark.parametrize("given, expected", [("on", True), ("off", False), ("true", True), (False, False)])
def test_the_setting_reads_on_and_off(given, expected):
    assert LlmConfig(model="m", scaffold=given).scaffold is expected


def test_a_bad_setting_says_what_it_takes():
    with pytest.raises(LlmConfigError, match="on or off"):
        LlmConfig(model="m", scaffold="maybe")


def test_a_scaffolded_session_is_measured_by_the_tool(workspace, tmp_path, monkeypatch):
    """The model's features() and train() in befair's scaffold: the pipeline runs in the sandbox and
    the separate evaluation measures its predict() on held-out images."""
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_MODEL", "BEFAIR_LLM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    db = tmp_path / "s.db"
    with FakeChatServer([reply(code_reply("Colour statistics and a random forest.", OWN_DESIGN)),
                         tool_review(False, "It trained and printed its AUROC.", None)]) as srv:
        code = main(["run", "--headless", "--quiet", "--coder", "openai", "--model", "m", "--base-url", srv.base_url,
                     "--scaffold", "on", "--data", str(workspace.root), "--steps", "1", "--step-timeout", "120",
                     "--db", str(db), "--session-id", "framed"])
    assert code == 0
    store = SessionStore(db)
    node = store.state("framed").nodes[1]
    store.close()
    assert node.val_auc is not None and node.status == "ok", node.failure_reason
    assert "RandomForestClassifier" in node.code and "def predict(folder):" in node.code
