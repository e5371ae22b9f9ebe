"""The offline coder's pipelines are composed from real Python templates
(engine/coders/offline/templates/), and compose to the very bytes the string-built grammar wrote.

The expected SHA-256 digests below were computed ONCE from main's engine/agent/grammar.py (the
code kept in strings, before the templates existed), over the cases these functions build: every
model family x fairness intervention x selection x per-group monitoring x colour x standardisation
x filtering x unknown-tone rows x injected failure; every hyperparameter and image size per model;
plans that need escaping or wrapping; and the coder's draft / improve / debug replies for a few
seeds at every level, with and without guidance and compute fitting (the commit that added this
test ran it against main's grammar). A template edited by one byte fails here.
"""
from __future__ import annotations

import ast
import hashlib
import itertools
import json
import re
import tomllib
from collections.abc import Callable, Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import pytest

from engine.coders.offline import OfflineCoder, render
from engine.coders.offline.composer import FLAGS, pipeline_choices, pipeline_flags, template
from engine.coders.protocol import CoderContext, NodeView
from engine.measures.summary import EvaluationSummary
from engine.offline_grammar import BUGS, FAIRNESS, HP_CHOICES, IMAGE_SIZES, LEVELS, MODELS, normalise

TEMPLATES = resources.files("engine.coders.offline") / "templates"
PLAN = ('Draft a pipeline: a "quoted" choice.\n- model: anything """with triple quotes"""\n'
        + "- a long line " + "word " * 40)
GUIDANCE = ("", "use reweighting and 6 epochs", "try a resnet", "no cnn; colour constancy, drop unknown tone",
            "minimax selection at 48 px")

Render = Callable[[dict[str, Any], str], str]

# computed from main's engine/agent/grammar.py before the templates (see the module docstring)
EXPECTED_PRODUCT = {
    "cnn/group_balanced": "dae29d25b5c05623f27fab076891308e56f9064ff8939e22891431aeed653893",
    "cnn/none": "7596509c6ea5e170a244083324116f04260891cfb02d8563a9aa6d9c209165ea",
    "cnn/reweight": "af83cc34e8989a1c528ec6c8b908acb6f4da8e8d07bdf702a88b6676afe63e61",
    "cnn/upsample": "8f901bfa447a5004db8b6d41d70a63f03a275567b5b4be1f5e88382dc0731a58",
    "gbm/group_balanced": "b059e73e040b4df1f9d1b1b8a7c814748ca80498c8290998ff22469176018d04",
    "gbm/none": "7c08f9f40210da09863e23f6c6713acca1323501b7e80bb63cf143e796ebfb57",
    "gbm/reweight": "a883c27892848abd3e8974713580d41841bab7f1b805c02e960001d093d98b03",
    "gbm/upsample": "b8553186f12f739e868a77ac5b32a9178a9c5f1e6e9640a8a8e39535a7022f16",
    "logreg/group_balanced": "b6fa92d7c73f1b72d24f53582df8825198d869130e55ddb7fc2b76ca85667493",
    "logreg/none": "d9137695ed1ae5d3f7e425fde50b48f72df541a70bc736efcd0cf05a298e1e5d",
    "logreg/reweight": "5f2bed48c1e7de4e378ac09e79444c612fbf1122d741ca9683f926e7b42e61a9",
    "logreg/upsample": "af1beaa9e00f7136a78fbf7d2f8801913bb99f367e292c146c4da69482f7e593",
    "resnet18/group_balanced": "c5efd970123aedb10a0725a5121cd29340d1816f99e28c56d5a84f360832fdc0",
    "resnet18/none": "362db15ca3f322a1ed8e00b6b72b7f476573eaff15fe31b83b4f76e4a0a074a3",
    "resnet18/reweight": "c6b9edb0be7aec5a1da74536ae5a4b756bda6a542f68d7b6f51bfe7f5a358420",
    "resnet18/upsample": "4f83ff1d623665b8d5be5233a8c4e97f2077c652187138a7c2e4749eb9d66589",
}
EXPECTED_HYPERPARAMETERS = {
    "cnn": "656466080a9a6acb9d559dacc5875ac8cd8ca3174859f470fde7fbaaf2370392",
    "gbm": "4b40a89ed3707245311ce5d9c9c3321ccfb6cddf907f7e2042db6fe870c72c05",
    "logreg": "295e3ad057c82b1b25dff114a7133a7a99f780551573edf7c17e275662699e1c",
    "resnet18": "b84a9725ff92d31e8dd9880eb2c1b065709864cf3c0417163332256f8120675a",
}
EXPECTED_PLANS = "d46c12fd627550d74a52993b62701733efc8390502630a08db81439600f69967"
# The coder's replies were recomputed when plans began answering guidance in a dermatologist's words
# and an improvement stopped undoing guidance already in place; how a choice composes to code is
# unchanged (the digests above).
EXPECTED_CODER = {
    "base": "a55eaf69fcf56634ebc3c921c05631ffc675ee504cd1baa61d49e9703bf49929",
    "custom": "d95b16f4d66ebc27c88dce80580da8fdb8171c857fa37fda8ad28d2101b82c72",
    "fairness-hint": "3948f0a7542ad73c6dcbde5ea306a228ec40b43e5a187c1c47c3b12ce30e1a0a",
    "fairness-methods": "d95b16f4d66ebc27c88dce80580da8fdb8171c857fa37fda8ad28d2101b82c72",
    "fairness-metric": "53d9f16ab526c7ad4259ed7c57f6799e2cbf27aede9ab4df43dbe72e924095aa",
}


def _digest(texts: Iterator[str]) -> str:
    h = hashlib.sha256()
    for text in texts:
        h.update(text.encode())
        h.update(b"\x00")
    return h.hexdigest()


def _choice(model: str, **changes: Any) -> dict[str, Any]:
    c: dict[str, Any] = {"model": model, "image_size": 64, "colour": "none", "standardise": False,
                         "filter_non_neoplastic": False, "drop_unknown_tone": False, "fairness": "none",
                         "selection": "overall", "monitor_groups": False,
                         "hp": {k: v[0] for k, v in HP_CHOICES[model].items()}, "bug": None}
    c.update(changes)
    return c


def product_renders(render: Render, model: str, fairness: str) -> Iterator[str]:
    """Every option the grammar offers, for one model family and fairness intervention."""
    axes = itertools.product(("overall", "minimax"), (False, True), ("none", "grey_world"), (False, True),
                             (False, True), (False, True), (None, *BUGS))
    for selection, monitor, colour, standardise, filtered, drop_unknown, bug in axes:
        c = _choice(model, fairness=fairness, selection=selection, monitor_groups=monitor, colour=colour,
                    standardise=standardise, filter_non_neoplastic=filtered, drop_unknown_tone=drop_unknown,
                    bug=bug)
        yield render(c, "Plan.")


def hyperparameter_renders(render: Render, model: str) -> Iterator[str]:
    """Every hyperparameter value and image size of one model, with and without minimax selection."""
    for selection in ("overall", "minimax"):
        for size in IMAGE_SIZES[model]:
            yield render(_choice(model, image_size=size, selection=selection), "Plan.")
        for name, values in HP_CHOICES[model].items():
            for value in values:
                c = _choice(model, selection=selection, fairness="reweight")
                c["hp"][name] = value
                yield render(c, "Plan.")


def plan_renders(render: Render) -> Iterator[str]:
    for plan in ("", "   ", PLAN, "one\n\ntwo paragraphs\n  indented"):
        yield render(_choice("cnn"), plan)
    yield render({}, "no choice at all: defaults")
    yield render({"model": "svm", "fairness": "magic", "bug": "typo", "hp": {"C": 2.0, "nope": 1}}, "foreign")


def coder_replies(coder_class: Any, level: str) -> Iterator[str]:
    """Draft, improve and debug replies (plan, code and choice) for a few seeds at one level."""
    for seed, guidance, fit in itertools.product((0, 1, 2), GUIDANCE, (True, False)):
        coder = coder_class(failure_rate=0.4, device="cpu", step_timeout=600, fit_compute=fit)
        ctx = CoderContext(instruction="use reweighting please" if level == "custom" else "", metric_line="AUROC",
                           data_preview="", step=seed + 1, seed=seed, guidance_global=[guidance] if guidance else [],
                           level=level)
        draft = coder.draft(ctx)
        parent = NodeView(node_id=1, stage="draft", plan=draft.plan, code=draft.code, status="ok",
                          components=draft.components,
                          measured=EvaluationSummary.from_payload({"auc": 0.71, "auc_gap": 0.05}))
        improved = coder.improve(ctx, parent)
        failing = NodeView(node_id=2, stage="improve", plan=improved.plan, code=improved.code, status="timeout",
                           exc_type="TimeoutError", components={**(improved.components or {}), "bug": None})
        debugged = coder.debug(ctx, failing)
        crashed = NodeView(node_id=3, stage="improve", plan=improved.plan, code=improved.code, status="error",
                           exc_type="KeyError", components=improved.components)
        repaired = coder.debug(ctx, crashed)
        sibling = coder.improve(ctx, NodeView(node_id=1, stage="draft", plan=draft.plan, code=draft.code,
                                              status="ok", components=None, tried=[improved.components or {}]))
        foreign = coder.improve(ctx, NodeView(node_id=4, stage="draft", plan="", code="print(1)", status="ok"))
        for reply in (draft, improved, debugged, repaired, sibling, foreign):
            yield reply.plan + "\x01" + (reply.code or "") + "\x01" + json.dumps(reply.components, sort_keys=True)


@pytest.mark.parametrize("model,fairness", list(itertools.product(MODELS, FAIRNESS)))
def test_every_option_composes_to_the_string_grammars_bytes(model: str, fairness: str) -> None:
    assert _digest(product_renders(render, model, fairness)) == EXPECTED_PRODUCT[f"{model}/{fairness}"]


@pytest.mark.parametrize("model", MODELS)
def test_every_hyperparameter_composes_to_the_string_grammars_bytes(model: str) -> None:
    assert _digest(hyperparameter_renders(render, model)) == EXPECTED_HYPERPARAMETERS[model]


def test_plans_and_foreign_choices_compose_to_the_string_grammars_bytes() -> None:
    assert _digest(plan_renders(render)) == EXPECTED_PLANS


@pytest.mark.parametrize("level", LEVELS)
def test_the_coders_replies_are_the_string_grammars(level: str) -> None:
    assert _digest(coder_replies(OfflineCoder, level)) == EXPECTED_CODER[level]


def _template_files() -> list[Path]:
    return sorted(Path(str(TEMPLATES)).glob("*.py"))


def test_templates_are_python_and_every_tag_and_choice_is_known() -> None:
    choices = ast.parse((TEMPLATES / "choices.py").read_text(encoding="utf-8"))
    defined = {t.id for node in choices.body if isinstance(node, ast.Assign) for t in node.targets
               if isinstance(t, ast.Name)}
    flags_used: set[str] = set()
    for path in _template_files():
        text = path.read_text(encoding="utf-8")
        ast.parse(text, filename=path.name)  # the whole file, tags and all, is Python
        if path.stem == "choices":
            continue
        body = template(path.stem)
        assert set(re.findall(r"\bCHOICE_[A-Z0-9_]+\b", body)) <= defined, path.name
        for condition in re.findall(r"  # when: ([\w ]+)$", body, flags=re.MULTILINE):
            flags_used |= {term.removeprefix("not ") for term in condition.split(" and ")}
    assert flags_used == set(FLAGS)
    assert set(pipeline_flags(normalise({}))) == set(FLAGS)
    for model in MODELS:
        assert set(pipeline_choices(normalise({"model": model}))) <= defined


def test_a_template_without_its_start_line_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.coders.offline import composer

    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "broken.py").write_text("x = 1\n")
    monkeypatch.setattr(composer.resources, "files", lambda package: tmp_path)
    composer.template.cache_clear()
    try:
        with pytest.raises(ValueError, match="broken.py"):
            composer.template("broken")
    finally:
        composer.template.cache_clear()


def test_the_templates_ship_in_the_wheel() -> None:
    """setuptools packs them as package data (they are read with importlib.resources)."""
    config = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text(encoding="utf-8"))
    assert "coders/offline/templates/*.py" in config["tool"]["setuptools"]["package-data"]["engine"]
    assert len(_template_files()) >= 19
