"""A scaffolded node reads skin tone when the model's train() uses the skin_tone it is handed, not
because the scaffold itself reads the column."""
from __future__ import annotations

from engine.coders.llm import scaffold
from engine.coders.llm.scaffold_audit import audit_pipeline
from engine.evaluation.audit import audit_code

HEAD = '''
import numpy as np
from sklearn.linear_model import LogisticRegression


def features(X):
    return X.reshape(len(X), -1)
'''
PLAIN = HEAD + '''

def train(X, y, skin_tone):
    return LogisticRegression(max_iter=200).fit(X, y)
'''
WEIGHTED = HEAD + '''

def train(X, y, tones):
    groups, counts = np.unique(tones, return_counts=True)
    weights = np.array([1.0 / counts[list(groups).index(t)] for t in tones])
    return LogisticRegression(max_iter=200).fit(X, y, sample_weight=weights)
'''


def test_the_scaffold_alone_raises_no_flag():
    code = scaffold.load().assemble(PLAIN)
    assert audit_code(code).flags["reads_skin_tone"]          # the whole file reads the column
    assert not any(audit_pipeline(code).flags.values())


def test_a_train_that_weights_by_skin_tone_is_flagged_with_the_whole_files_line():
    code = scaffold.load().assemble(WEIGHTED)
    audit = audit_pipeline(code)
    assert audit.flags["reads_skin_tone"] and audit.flags["reweighting"]
    lines = code.splitlines()
    for flag in ("reads_skin_tone", "reweighting"):
        number, text = audit.evidence[flag].removeprefix("line ").split(": ", 1)
        assert lines[int(number) - 1].strip() == text, audit.evidence[flag]
    assert "np.unique(tones" in audit.evidence["reads_skin_tone"]


def test_a_pipeline_not_built_by_the_scaffold_is_audited_whole():
    code = 'import pandas as pd\ndf = pd.read_csv("train.csv")\ndark = df[df["skin_tone"] >= 5]\n'
    assert audit_pipeline(code).flags == audit_code(code).flags
    assert audit_pipeline(code).flags["reads_skin_tone"]


def test_assemble_keeps_module_level_values_the_reply_uses_and_drops_a_copy_of_the_loading():
    reply = HEAD.replace("def features(X):\n    return X.reshape(len(X), -1)",
                         "MEAN = np.array([0.7, 0.6, 0.5])\nSIZE = 32\n"
                         "df = pd.read_csv('./input/skin_lesions.csv')\nrows = load_training_data()\n\n\n"
                         "def features(X):\n    return (X - MEAN).reshape(len(X), -1)") + PLAIN.removeprefix(HEAD)
    frame = scaffold.load()
    code = frame.assemble(reply)
    assert "MEAN = np.array([0.7, 0.6, 0.5])" in code and "SIZE = 32" in code
    assert "pd.read_csv('./input" not in code and "rows = load_training_data()" not in code
    assert frame.flaw(reply) is None          # MEAN is bound: no "undefined name"
