"""The exact prompts of one scripted draft/improve/debug/review sequence, recorded in fixtures.

A prompt change shows up as a diff of tests/fixtures/prompts/*.txt in review. Regenerate with
BEFAIR_UPDATE_PROMPT_FIXTURES=1 .venv/bin/python -m pytest tests/unit/test_llm_prompts.py
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LlmConfig
from engine.coders.protocol import CoderContext, MemoryItem, NodeView
from engine.measures.summary import EvaluationSummary
from engine.task import FAIRNESS_METRIC, METRIC_LINE
from tests.fakes.chat_server import (
    BUGGY_PIPELINE,
    SIMPLE_PIPELINE,
    FakeChatServer,
    Request,
    code_reply,
    json_review,
    reply,
    tool_review,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "prompts"
UPDATE = os.environ.get("BEFAIR_UPDATE_PROMPT_FIXTURES") == "1"

PREVIEW = """\
-> input/skin_lesions.csv has 480 rows and 6 columns.
The columns are: image_name (str), skin_tone (int, -1..6), alternative_skin_tone (int),
super_label (str), label (str: non-neoplastic 347, malignant 68, benign 65), expert_opinion (str, mostly empty)
-> input/images/ holds 480 .jpg files (image_0.jpg ... image_479.jpg)"""


def render(req: Request) -> str:
    body = req.body
    head = [f"POST {req.path}"]
    for key in ("model", "temperature", "max_tokens", "tool_choice"):
        if key in body:
            head.append(f"{key}: {json.dumps(body[key], sort_keys=True)}")
    if body.get("tools"):
        head.append("tools: " + json.dumps(body["tools"], indent=2, sort_keys=True, ensure_ascii=False))
    parts = ["\n".join(head)]
    for m in body["messages"]:
        parts.append(f"===== {m['role']} =====\n{m['content']}")
    return "\n\n".join(parts).rstrip() + "\n"


def scripted_sequence() -> dict[str, str]:
    guidance = ["Reweight the loss so that every skin-tone group counts equally."]
    memory = [
        MemoryItem(1, "draft", "Colour statistics with a balanced logistic regression.", "ok",
                   0.6812, 0.1423, "The pipeline trained and printed its AUROC."),
        MemoryItem(2, "draft", "A small CNN on 64x64 crops.", "buggy", summary="KeyError: 'diagnosis'"),
    ]
    parent_ok = NodeView(1, "draft", "Colour statistics with a balanced logistic regression.",
                         SIMPLE_PIPELINE, "ok", output="Validation AUROC: 0.7012\n",
                         measured=EvaluationSummary.from_payload({
                             "auc": 0.6812, "auc_gap": 0.1423,
                             "group_auc": {"group_0": 0.7301, "group_1": 0.6902, "group_2": 0.5878}}))
    parent_bug = NodeView(2, "draft", "A small CNN on 64x64 crops.", BUGGY_PIPELINE, "buggy",
                          output="Traceback (most recent call last):\n  File \"solution.py\", line 37\n"
                                 "KeyError: 'diagnosis'\n", exc_type="KeyError")
    script = [reply(code_reply()), reply(code_reply("Add group reweighting.")),
              reply(code_reply("Use the label column.")), tool_review(False, "Fine.", 0.7012),
              json_review(False, "Fine.", 0.7012)]
    with FakeChatServer(script) as srv:
        cfg = LlmConfig(model="gpt-4.1-mini", review_model="gpt-4.1", base_url=srv.base_url,
                        max_retries=0, timeout=5)
        coder = LlmCoder(cfg, exec_timeout=900)
        c = dict(instruction=FAIRNESS_METRIC, metric_line=METRIC_LINE, data_preview=PREVIEW, seed=3,
                 level="fairness-metric")
        coder.draft(CoderContext(step=1, **c))
        coder.improve(CoderContext(step=3, guidance_global=guidance, memory=memory,
                                   guidance_node=["Keep the features; only change the loss."], **c),
                      parent_ok)
        coder.debug(CoderContext(step=4, guidance_global=guidance, memory=memory, **c), parent_bug)
        coder.review(CoderContext(step=1, **c), parent_ok)
        json_coder = LlmCoder(LlmConfig(model="gpt-4.1-mini", base_url=srv.base_url,
                                        max_retries=0, timeout=5, review_tools=False))
        json_coder.review(CoderContext(step=1, **c), parent_ok)
        reqs = srv.chat_requests
    names = ["draft", "improve", "debug", "review", "review_json"]
    assert len(reqs) == len(names)
    return {n: render(r) for n, r in zip(names, reqs, strict=True)}


# The environment the fixtures were recorded with: the prompt lists what is installed, so the
# fixtures pin a set of packages rather than this machine's.
RECORDED_PACKAGES = {"numpy": "2.4.6", "scipy": "1.17.1", "pandas": "3.1.1", "scikit-learn": "1.9.1",
                     "torch": "2.14.1", "torchvision": "0.29.2", "pillow": "13.0.0", "fairlearn": "0.15.0"}


def test_prompts_match_recorded_fixtures(monkeypatch):
    from engine.coders.llm import prompts

    monkeypatch.setattr(prompts, "installed_versions", lambda: dict(RECORDED_PACKAGES))
    rendered = scripted_sequence()
    if UPDATE:
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for name, text in rendered.items():
            (FIXTURES / f"{name}.txt").write_text(text, encoding="utf-8")
    missing = [n for n in rendered if not (FIXTURES / f"{n}.txt").is_file()]
    assert not missing, f"missing prompt fixtures {missing}; run with BEFAIR_UPDATE_PROMPT_FIXTURES=1"
    for name, text in rendered.items():
        expected = (FIXTURES / f"{name}.txt").read_text(encoding="utf-8")
        assert text == expected, (
            f"the {name} prompt changed; review the diff and regenerate with "
            "BEFAIR_UPDATE_PROMPT_FIXTURES=1"
        )


def test_fixture_prompts_carry_what_the_issue_asks():
    texts = {p.stem: p.read_text(encoding="utf-8") for p in FIXTURES.glob("*.txt")}
    for name in ("draft", "improve", "debug", "review", "review_json"):
        assert FAIRNESS_METRIC in texts[name] and METRIC_LINE in texts[name]
    assert "Reweight the loss" not in texts["draft"]
    assert "Guidance from the domain expert" in texts["improve"]
    assert "Keep the features; only change the loss." in texts["improve"]
    assert "Keep the features" not in texts["debug"]
    assert "Reweight the loss" in texts["debug"] and "KeyError: 'diagnosis'" in texts["debug"]
    assert '"model": "gpt-4.1"' in texts["review"].replace("model: ", '"model": ')
    assert "submit_review" in texts["review"] and "tools:" not in texts["review_json"]


def _tiny_dataset(root: Path, n: int = 48) -> None:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    (root / "input" / "images").mkdir(parents=True)
    (root / "working").mkdir()
    rows = ["image_name,skin_tone,alternative_skin_tone,super_label,label,expert_opinion"]
    labels = ["malignant", "benign", "non-neoplastic"]
    for i in range(n):
        label = labels[i % 3]
        tone = 1 + i % 6
        base = np.full((16, 16, 3), 220 - 25 * tone, dtype=np.float64)
        if label == "malignant":
            base[4:12, 4:12] *= 0.4
        img = np.clip(base + rng.normal(0, 8, base.shape), 0, 255).astype("uint8")
        Image.fromarray(img).save(root / "input" / "images" / f"image_{i}.jpg")
        rows.append(f"image_{i},{tone},{tone},inflammatory,{label},")
    (root / "input" / "skin_lesions.csv").write_text("\n".join(rows) + "\n")
    test = root / "heldout"
    test.mkdir()
    for i in range(4):
        Image.fromarray(rng.integers(0, 255, (20, 20, 3), dtype="uint8")).save(test / f"{i:06d}.png")


def test_simple_pipeline_of_the_fake_server_follows_the_contract(tmp_path):
    """The fake's pipeline (used by end-to-end sessions) trains as a script and predicts on import."""
    _tiny_dataset(tmp_path)
    (tmp_path / "solution.py").write_text(SIMPLE_PIPELINE)
    run = subprocess.run([sys.executable, "solution.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert "Validation AUROC: " in run.stdout
    # imported, not run (as the evaluation harness does), in this process
    import importlib.util

    spec = importlib.util.spec_from_file_location("fake_solution_under_test", tmp_path / "solution.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    preds = module.predict(str(tmp_path / "heldout"))
    assert sorted(preds) == [f"{i:06d}.png" for i in range(4)]
    assert all(0.0 <= p <= 1.0 for p in preds.values())


@pytest.mark.parametrize("code", [SIMPLE_PIPELINE, BUGGY_PIPELINE])
def test_fake_pipelines_parse_back_from_a_reply(code):
    from engine.coders.llm.response_parsing import extract_code

    assert extract_code(code_reply("plan", code)) == code


def test_the_environment_section_lists_exactly_what_is_installed():
    from engine.coders.llm.prompts import environment_text, installed_versions

    text = environment_text({"numpy": "2.0", "pandas": "2.2.3", "scikit-learn": "1.5.2", "torch": "2.5.1",
                             "lightgbm": "4.5"})
    assert "`pandas` 2.2.3" in text and "`scikit-learn` 1.5.2" in text and "`torch` 2.5.1" in text
    assert "`numpy`," in text and "torchvision" not in text.split("Not installed")[0]
    assert "`lightgbm`" not in text.split("Not installed")[1] and "`xgboost`" in text.split("Not installed")[1]
    assert "sparse_output=" in text
    here = environment_text()
    for dist in ("pandas", "scikit-learn", "torch"):      # this machine's versions, as the sandbox has them
        assert f"`{dist}` {installed_versions()[dist]}" in here


def test_a_failed_evaluation_reaches_the_debug_prompt():
    from engine.coders.llm.prompts import compile_md, debug_prompt

    c = CoderContext(instruction=FAIRNESS_METRIC, metric_line=METRIC_LINE, data_preview=PREVIEW, seed=3, step=2)
    parent = NodeView(1, "draft", "p", SIMPLE_PIPELINE, "ok", output="Validation AUROC: 0.70\n",
                      eval_failure="predict_error: predict() raised KeyError: 'image_1.jpg'")
    text = compile_md(debug_prompt(c, parent))
    assert "the independent evaluation failed" in text and "KeyError: 'image_1.jpg'" in text
    assert text.index("# Data overview") < text.index("# Previous (buggy) implementation")
