"""Reading LLM replies: plan and code, reviews as JSON, the printed metric."""
from __future__ import annotations

import pytest

from engine.evaluation.audit import parse_claimed_metric
from engine.coders.llm.response_parsing import (
    extract_code,
    extract_plan,
    find_code_blocks,
    parse_json_object,
    review_from_dict,
    to_metric,
)

PIPE = ("import os\n\n\ndef predict(folder):\n    return {}\n\n\n"
        "if __name__ == '__main__':\n    print('Validation AUROC: 0.7')\n")


@pytest.mark.parametrize("lang", ["python", "py", "Python", "python3", ""])
def test_fence_languages(lang):
    text = f"Plan: a simple model.\n\n```{lang}\n{PIPE}```\nHope this helps."
    assert extract_code(text) == PIPE
    assert extract_plan(text) == "Plan: a simple model."


def test_tilde_fence_and_longer_backticks():
    assert extract_code(f"sketch\n~~~python\n{PIPE}~~~\n") == PIPE
    assert extract_code(f"sketch\n````python\n{PIPE}````\n") == PIPE


def test_picks_block_with_predict_among_several():
    text = (
        "Install first:\n```bash\npip install torch\n```\nA helper:\n```python\nx = 1\n```\n"
        f"The pipeline:\n```python\n{PIPE}```\nAnd the output:\n```\nValidation AUROC: 0.7\n```\n"
    )
    assert extract_code(text) == PIPE
    assert extract_plan(text) == "Install first:"


def test_joins_split_script_when_only_the_whole_has_predict():
    a = "import os\nimport numpy as np\n"
    b = "def predict(folder):\n    return {n: 0.5 for n in os.listdir(folder)}\n"
    code = extract_code(f"Plan.\n```python\n{a}```\nthen\n```python\n{b}```")
    assert code is not None and "import os" in code and "def predict" in code


def test_longest_valid_block_without_predict():
    long = "import os\nx = 1\ny = 2\nprint(x + y)\n"
    assert extract_code(f"p\n```python\nz = 0\n```\n```python\n{long}```") == long


def test_invalid_python_is_still_returned_for_the_debug_step():
    bad = "import os\ndef predict(folder:\n    return {}\n"
    assert extract_code(f"p\n```python\n{bad}```") == bad


def test_unclosed_fence_runs_to_the_end():
    code = extract_code(f"plan\n```python\n{PIPE}")
    assert code == PIPE
    assert len(find_code_blocks(f"plan\n```python\n{PIPE}")) == 1


def test_bare_python_reply():
    assert extract_code(PIPE) == PIPE
    assert extract_plan(PIPE) == ""


@pytest.mark.parametrize("text", [
    "", "   ", "I'm sorry, but I can't help with that.",
    "Here is the plan: use a CNN. I will write the code next.",
    "```json\n{\"a\": 1}\n```", "```bash\nls -la\n```",
])
def test_no_usable_code(text):
    assert extract_code(text) is None


def test_plan_after_code_when_nothing_before_and_headings_dropped():
    assert extract_plan(f"```python\n{PIPE}```\nThis trains a model.") == "This trains a model."
    assert extract_plan(f"## Plan\nUse LR.\n\n## Code\n```python\n{PIPE}```") == "Use LR."


def test_parse_json_object_variants():
    assert parse_json_object('{"is_bug": false, "summary": "ok", "metric": 0.7}')["metric"] == 0.7
    assert parse_json_object('Sure!\n```json\n{"is_bug": true}\n```')["is_bug"] is True
    assert parse_json_object('Result: {"is_bug": false, "summary": "x"} done')["summary"] == "x"
    assert parse_json_object("{'is_bug': True, 'metric': None}") == {"is_bug": True, "metric": None}
    assert parse_json_object("no json here") is None
    assert parse_json_object("[1, 2]") is None


def test_review_from_dict_coerces_and_rejects():
    assert review_from_dict({"is_bug": "false", "summary": " fine ", "metric": "0.73"}) == (False, "fine", 0.73)
    assert review_from_dict({"is_bug": True, "summary": None, "metric": float("nan")}) == (True, "", None)
    assert review_from_dict({"summary": "no verdict"}) is None
    assert review_from_dict({"is_bug": "maybe"}) is None


@pytest.mark.parametrize("value,expected", [
    (0.7, 0.7), ("0.81", 0.81), ("AUROC = 0.66", 0.66), (None, None), ("N/A", None),
    (float("inf"), None), (True, None), ({}, None),
])
def test_to_metric(value, expected):
    assert to_metric(value) == expected


def test_parse_claimed_metric_takes_the_last():
    out = "epoch 1\nValidation AUROC: 0.61\nepoch 2\nvalidation auc = 0.655\n"
    assert parse_claimed_metric(out) == 0.655
    assert parse_claimed_metric("Traceback (most recent call last):\nKeyError: 'label'") is None
    assert parse_claimed_metric("") is None


# -- AIDE's reading (the be-fair protocol) ---------------------------------------------------------

def test_aide_extract_code_joins_every_compiling_block():
    from engine.coders.llm.response_parsing import aide_code_formatter, aide_extract_code, aide_extract_plan

    text = ("Plan first.\n\n```python\nimport os\n```\n\nthen\n\n```\ndef predict(folder):\n    return {}\n```\n"
            "\n```python\nthis is not python(\n```\n")
    code = aide_extract_code(text)
    if aide_code_formatter() is None:
        assert code == "import os\n\ndef predict(folder):\n    return {}"   # AIDE's join, unformatted
    else:
        assert code == "import os\n\n\ndef predict(folder):\n    return {}\n"   # black's, as AIDE's
    assert aide_extract_plan(text) == "Plan first."
    assert aide_extract_plan("x = 1") == "" and aide_extract_code("no code here (") == ""
    assert aide_extract_code("x = 1").strip() == "x = 1"     # a bare reply that compiles is the code


def test_aide_review_rules():
    from engine.coders.llm.response_parsing import aide_review

    good = aide_review({"is_bug": False, "summary": "ok", "metric": 0.81, "lower_is_better": False})
    assert good is not None and good.verdict(None) is False and good.metric == 0.81
    assert good.verdict("ValueError") is True                                  # the run raised: buggy
    no_metric = aide_review({"is_bug": False, "summary": "ok", "metric": None, "lower_is_better": False})
    assert no_metric is not None and no_metric.verdict(None) is True           # no metric: buggy
    for not_float in (1, "0.8", True):                                        # AIDE: only a float is a metric
        r = aide_review({"is_bug": False, "summary": "", "metric": not_float, "lower_is_better": False})
        assert r is not None and r.metric is None and r.verdict(None)
    lower = aide_review({"is_bug": False, "summary": "", "metric": 0.2, "lower_is_better": True})
    assert lower is not None and lower.lower_is_better
    assert aide_review({"summary": "no verdict"}) is None
