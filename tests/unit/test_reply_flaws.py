"""Flaws a scaffolded reply would fail on at once (engine.coders.llm.reply_flaws), found without running
it; and the coder asking again for them while attempts are left."""
from __future__ import annotations

import pytest

from engine.coders.llm import scaffold
from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LlmConfig
from engine.coders.protocol import CoderContext
from engine.task import FAIRNESS_METRIC, METRIC_LINE
from tests.fakes.chat_server import FakeChatServer, code_reply, reply

SC = scaffold.load()
GOOD = '''import numpy as np


def colour_stats(X):
    return np.hstack([X.mean(axis=(1, 2)), X.std(axis=(1, 2))])


def features(X):
    return colour_stats(X)


def train(X, y, skin_tone):
    weights = np.where(np.asarray(skin_tone) >= 5, 2.0, 1.0)
    model = LogisticRegression(class_weight="balanced", max_iter=1000)
    model.fit(X, y, sample_weight=weights)
    return model
'''


def flaw(code: str) -> str | None:
    return SC.flaw(code)


def test_a_reply_that_runs_has_no_flaw():
    assert flaw(GOOD) is None


@pytest.mark.parametrize("swap, expected", [
    # code that does not parse, an import that is not installed, a name a module does not have
    (("    return colour_stats(X)\n", '    """Colour statistics.\n    return colour_stats(X)\n'),
     "the reply's code does not parse (unterminated triple-quoted string literal"),
    (("import numpy as np\n", "import numpy as np\nfrom keras.applications.vgg16 import VGG16\n"),
     "the reply imports from keras.applications.vgg16, which is not available here"),
    (("import numpy as np\n", "import numpy as np\nimport tensorflow as tf\n"),
     "the reply imports tensorflow, which is not available here"),
    (("import numpy as np\n", "import numpy as np\nfrom sklearn.metrics import MetricFrame\n"),
     "the reply imports MetricFrame from sklearn.metrics, which has no such name"),
    (("LogisticRegression(", "DecisionTreeClassifier("),
     "the reply uses DecisionTreeClassifier, which it neither imports nor defines"),
    (("np.asarray(skin_tone)", "np.asarray(skin_tones)"),
     "the reply uses skin_tones, which it neither imports nor defines"),
    (("max_iter=1000)", "max_iter=1000, sample_weight=weights)"),
     "the reply calls LogisticRegression() with sample_weight=, which LogisticRegression() does not take "
     "(pass it to fit(): LogisticRegression.fit takes it)"),
    # a Pipeline's fit() given a step's keyword without the step's name
    (("    model = LogisticRegression(class_weight=\"balanced\", max_iter=1000)\n",
      "    model = Pipeline([('scaler', StandardScaler()), ('lr', LogisticRegression(max_iter=1000))])\n"),
     "the reply passes sample_weight= to a Pipeline's fit(), which takes only a step's own: name the step"),
    # features() reading what it is given: the model file (not saved until train() ran), or images by name
    (("    return colour_stats(X)\n", "    model = joblib.load(os.path.join(WORKING, 'model.joblib'))\n"
                                      "    return model.predict_proba(X)[:, 1]\n"),
     "the reply's features() reads files (joblib.load()), but features(X) gets the images themselves"),
    (("    return np.hstack(", "    X = np.stack([load_image(f'{INPUT}/images/{name}.jpg') for name in X])\n"
                              "    return np.hstack("),
     "the reply's features() reads files (load_image())"),
    (("    return colour_stats(X)\n", "    return colour_stats(X[\"image_name\"])\n"),
     "the reply's features() reads X['image_name'], but X is a numpy array of numbers"),
    # X's float images given to PIL ("Cannot handle this data type")
    (("    return colour_stats(X)\n", "    small = np.array([Image.fromarray(img).resize((16, 16)) for img in X])\n"
                                      "    return colour_stats(small)\n"),
     "the reply's features() gives X's images to Image.fromarray(), which cannot take them"),
    # each image taken for a PIL image ("'numpy.ndarray' object has no attribute 'convert'")
    (("    return colour_stats(X)\n", "    rows = []\n    for img in X:\n        img = img.convert('RGB')\n"
                                      "        rows.append(np.asarray(img).ravel())\n    return np.array(rows)\n"),
     "the reply's features() calls img.convert() on each of X's images, which are numpy arrays"),
])
def test_a_reply_that_would_fail_at_once_is_named(swap, expected):
    old, new = swap
    assert old in GOOD
    assert (flaw(GOOD.replace(old, new)) or "").startswith(expected)


def test_only_code_that_runs_counts():
    """An unused helper's import or undefined name is no flaw: the pipeline runs as it is. Neither is
    an import guarded by `except ImportError`, nor a name bound by `global` in a function."""
    unused = GOOD + '''

def deep_features(X):
    from tensorflow.keras.applications import ResNet50
    return ResNet50(weights=None).predict(X, verbose=undefined_flag)
'''
    guarded = GOOD.replace("import numpy as np\n", "import numpy as np\ntry:\n    import cv2\nexcept ImportError:\n"
                                                   "    cv2 = None\n")
    declared = GOOD.replace("    return colour_stats(X)\n",
                            "    global CACHE\n    CACHE = colour_stats(X)\n    return CACHE\n")
    declared += "\n\ndef cached():\n    return CACHE\n"
    for code in (unused, guarded, declared):
        assert flaw(code) is None, code
    assert flaw(unused.replace("return colour_stats(X)", "return deep_features(X)")) is not None  # now it runs


def test_methods_comprehensions_and_the_scaffolds_names_are_bound():
    code = GOOD.replace("def features(X):\n    return colour_stats(X)\n", '''class Stats:
    def __init__(self, size=SIZE):
        self.size = size

    def of(self, X):
        return np.stack([np.array([image[..., c].mean() for c in range(3)]) for image in X])


def features(X):
    return Stats().of(X)
''')
    assert flaw(code) is None
    undefined = "the reply uses img, which it neither imports nor defines"
    assert flaw(code.replace("image[..., c]", "img[..., c]")) == undefined


def test_a_pipeline_given_a_step_s_keyword_by_its_step_name_is_no_flaw():
    named = GOOD.replace("    model = LogisticRegression(class_weight=\"balanced\", max_iter=1000)\n",
                         "    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))\n")
    assert "make_pipeline" in named and flaw(named) is not None
    assert flaw(named.replace("sample_weight=weights", "logisticregression__sample_weight=weights")) is None


def test_a_features_that_asks_what_x_is_may_read_files_for_other_input():
    """The images are used as given; the file branch never runs."""
    guarded = GOOD.replace("    return colour_stats(X)\n",
                           "    if isinstance(X, np.ndarray):\n        return colour_stats(X)\n"
                           "    return colour_stats(np.stack([load_image(name) for name in X]))\n")
    assert flaw(guarded) is None
    in_train = GOOD.replace("    weights =", "    pd.read_csv(os.path.join(INPUT, 'skin_lesions.csv'))\n    weights =")
    assert flaw(in_train) is None   # train() may read what exists (it runs); only features() gets images


def test_a_debug_reply_that_hands_back_the_failed_code_is_named():
    """17 of the bench's failed debug nodes were their parent's code again, unchanged but for a
    docstring, a comment or a repeated line; each failed as its parent had."""
    failed = SC.assemble(GOOD)
    same = GOOD.replace("def features(X):\n", 'def features(X):\n    """Fixed."""  # now it works\n')
    same = "SIZE = 32\n\n" + same.replace("    return model\n", "    return model\n\n\nSIZE = 32\n")
    assert SC.flaw(same, failed) == ("the reply is the code that just failed, unchanged, and would fail again: "
                                    "change what the error names")
    assert SC.flaw(GOOD.replace(">= 5, 2.0", ">= 5, 3.0"), failed) is None
    assert SC.flaw(same) is None   # a draft or improve reply has no failed code to repeat


def ctx() -> CoderContext:
    return CoderContext(instruction=FAIRNESS_METRIC, metric_line=METRIC_LINE, data_preview="x", step=1, seed=0,
                        scaffold=True)


def test_the_coder_asks_again_with_the_flaw_and_takes_the_last_attempt_as_it_is():
    flawed = GOOD.replace("LogisticRegression(", "DecisionTreeClassifier(")
    with FakeChatServer([reply(code_reply("A tree.", flawed)), reply(code_reply("Colour stats.", GOOD))]) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
        first, second = srv.chat_requests
    note = second.messages[-1]["content"].removeprefix(first.messages[-1]["content"].rstrip())
    assert "The last reply uses DecisionTreeClassifier, which it neither imports nor defines" in note
    assert r.code == SC.assemble(GOOD) and len(r.llm_calls) == 2
    with FakeChatServer([reply(code_reply("A tree.", flawed))] * 3) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
    assert r.code == SC.assemble(flawed) and len(r.llm_calls) == 3   # run, so the model sees the NameError


def test_checking_an_import_never_imports_an_arbitrary_package_here():
    """Finding `a.b` imports `a`: outside the checked modules only the top-level name is looked up,
    so a reply's `import this.zen` does not run `this` (it prints) in befair's own process."""
    import sys

    sys.modules.pop("this", None)
    assert flaw(GOOD.replace("import numpy as np\n", "import numpy as np\nimport this.zen\n")) is None
    assert "this" not in sys.modules
    assert flaw(GOOD.replace("import numpy as np\n", "import numpy as np\nimport sklearn.nope\n")) is not None


def test_a_debug_step_asks_again_when_the_fix_is_the_failed_code():
    from engine.coders.protocol import NodeView

    failed = SC.assemble(GOOD)
    fixed = GOOD.replace(">= 5, 2.0", ">= 5, 3.0")
    bug = NodeView(1, "draft", "Colour stats.", failed, "buggy", output="ValueError: boom", exc_type="ValueError")
    with FakeChatServer([reply(code_reply("Same.", GOOD)), reply(code_reply("Fixed.", fixed))]) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.debug(ctx(), bug)
        note = srv.chat_requests[1].messages[-1]["content"]
    assert "The last reply is the code that just failed, unchanged" in note
    assert r.code == SC.assemble(fixed) and len(r.llm_calls) == 2


def test_when_no_reply_is_free_of_flaws_the_last_complete_one_runs():
    """The bench's first step, twice: a reply with a flaw, then two that leave features() out.
    The node runs the flawed one, so that the debug step after it has a traceback to fix; without
    it the node held no code at all."""
    flawed = GOOD.replace("LogisticRegression(", "DecisionTreeClassifier(")
    train_only = GOOD.split("def features(X):")[0] + "def train(X, y, skin_tone):\n    return LogisticRegression()\n"
    replies = [reply(code_reply("A tree.", flawed))] + [reply(code_reply("Train only.", train_only))] * 2
    with FakeChatServer(replies) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
    assert r.code == SC.assemble(flawed) and r.plan.startswith("A tree") and len(r.llm_calls) == 3
    with FakeChatServer([reply(code_reply("Train only.", train_only))] * 3) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
    assert r.code is None and "did not write features()" in (r.error or "")


@pytest.mark.parametrize("used, expected", [
    # scipy.misc is gone: "AttributeError: Module 'scipy' has no attribute 'misc'"
    ("scipy.misc.imresize(X, (8, 8))", "the reply uses scipy.misc.imresize, but scipy.misc has no imresize"),
    ("np.float(2)", "the reply uses np.float, but numpy has no float"),       # removed in numpy 1.24
    ("ndimage.nope(X)", "the reply uses ndimage.nope, but scipy.ndimage has no nope"),
    ("np.linalg.norm(X)", None), ("ndimage.zoom(X, 0.5)", None), ("scipy.stats.skew(X)", None),
    ("np.random.RandomState(0).rand(3)", None), ("X.astype(np.float32)", None),
    ("sklearn.preprocessing.StandardScaler()", None),
])
def test_a_module_s_name_that_is_not_there_is_named(used, expected):
    imports = "import numpy as np\nimport scipy\nimport sklearn.preprocessing\nfrom scipy import ndimage\n"
    code = GOOD.replace("import numpy as np\n", imports).replace("    return colour_stats(X)\n",
                                                                 f"    unused = {used}\n    return colour_stats(X)\n")
    assert (flaw(code) or "None").startswith(expected or "None")


def test_a_features_that_reads_what_only_training_has_is_named():
    """features() reading skin_tone, which the scaffold's __main__ block binds: training runs, and
    predict() raises NameError in the evaluation."""
    uses_tone = GOOD.replace("    return colour_stats(X)\n", "    known = np.where(skin_tone > 0, 1.0, 0.5)\n"
                                                              "    return colour_stats(X) * known[:len(X), None]\n")
    assert (flaw(uses_tone) or "").startswith("the reply's features() uses skin_tone, which exists only while training")
    own = uses_tone.replace("def features(X):\n", "def features(X, skin_tone=np.ones(1)):\n")
    assert flaw(own) is None      # its own parameter
    assert flaw(GOOD.replace("    return colour_stats(X)\n", "    return colour_stats(X) * SIZE / 32\n")) is None


def test_pil_images_made_from_bytes_are_no_flaw():
    as_bytes = GOOD.replace("    return colour_stats(X)\n",
                            "    small = [Image.fromarray((img * 255).astype(np.uint8)).resize((16, 16)) "
                            "for img in X]\n"
                            "    return colour_stats(np.asarray(small, dtype=np.float32) / 255)\n")
    assert flaw(as_bytes) is None


def test_a_debug_step_runs_a_new_flawed_reply_rather_than_the_failed_code_again():
    """When every debug reply has a flaw, the parent's code handed back would fail the same way
    again: another reply that writes both functions runs instead."""
    from engine.coders.protocol import NodeView

    failing = GOOD.replace("    return colour_stats(X)\n", "    return colour_stats(X[\"image_name\"])\n")
    other = GOOD.replace("LogisticRegression(", "DecisionTreeClassifier(")
    bug = NodeView(1, "draft", "Colour stats.", SC.assemble(failing), "buggy", output="IndexError: only integers",
                   exc_type="IndexError")
    replies = [reply(code_reply("A tree.", other))] + [reply(code_reply("Same.", failing))] * 2
    with FakeChatServer(replies) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.debug(ctx(), bug)
    assert r.code == SC.assemble(other) and r.plan.startswith("A tree") and len(r.llm_calls) == 3
    with FakeChatServer([reply(code_reply("Same.", failing))] * 3) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.debug(ctx(), bug)
    assert r.code == SC.assemble(failing)     # nothing else was written: it runs, and fails as before


def test_a_spurious_ast_system_error_is_checked_again_not_a_lost_step(monkeypatch):
    """CPython 3.11's ast raised "AST constructor recursion depth mismatch" once in the suite
    (python/cpython#106905): the coder reported an internal error and the node held no code."""
    real = scaffold.Scaffold.check
    raised = []

    def once(self, code, failed=None):
        if not raised:
            raised.append(1)
            raise SystemError("AST constructor recursion depth mismatch (before=3, after=2)")
        return real(self, code, failed)

    monkeypatch.setattr(scaffold.Scaffold, "check", once)
    with FakeChatServer([reply(code_reply("Colour stats.", GOOD))]) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
    assert raised and r.error is None and r.code == SC.assemble(GOOD)


def test_the_notes_of_flaws_hint_nothing_and_point_to_the_packages_listed():
    """The note of a flaw goes into the prompt again: it passes the prompt audit's pattern, and a
    missing package is answered with where the installed ones are listed (torch is one of them)."""
    import ast
    import re
    from pathlib import Path

    from engine.coders.llm import reply_flaws

    audit = re.compile(r"fair|skin[ -]tone|skin type|\bgroups?\b|\bgap\b|fitzpatrick|dark skin|light skin|darker|"
                       r"lighter|subgroup|\bbias|equit|reweigh|sample weight|minimax|worst", re.IGNORECASE)
    tree = ast.parse(Path(reply_flaws.__file__).read_text(encoding="utf-8"))
    said = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
    assert said and not [text for text in said if audit.search(text)]
    with_tf = GOOD.replace("import numpy as np\n", "import numpy as np\nimport tensorflow as tf\n")
    assert (flaw(with_tf) or "").endswith("(the Packages section lists what is installed)")
    with_torch = GOOD.replace("import numpy as np\n", "import numpy as np\nimport torch\nfrom torch import nn\n")
    assert flaw(with_torch) is None
