"""The offline coder (a simulated agent): level-biased choices, guidance, determinism, bug
injection and repair, one-component improvements, and pipelines that really run."""
from __future__ import annotations

import ast
import json
from collections import Counter

import pytest

from engine.coders import offline as g
from engine.coders.offline import LABEL, OfflineCoder
from engine.coders.protocol import CoderContext, NodeView
from engine.evaluation.audit import audit_code
from engine.task import LEVELS, METRIC_LINE

FAIR_FLAGS = ("reweighting", "upsampling", "filtering", "pareto_selection")


def ctx(level="base", step=1, seed=0, glob=(), node=()):
    return CoderContext(instruction=LEVELS.get(level, "custom text"), metric_line=METRIC_LINE, data_preview="",
                        step=step, seed=seed, guidance_global=list(glob), guidance_node=list(node), level=level)


def view(reply, node_id=1, status="ok", exc=None, measured=None):
    return NodeView(node_id=node_id, stage="draft", plan=reply.plan, code=reply.code, status=status,
                    exc_type=exc, components=reply.components, measured=measured)


def drafts(level, n=80, failure_rate=0.0):
    coder = OfflineCoder(failure_rate=failure_rate)
    return [coder.draft(ctx(level, step=i, seed=3)) for i in range(n)]


def test_labelled_as_simulated():
    coder = OfflineCoder()
    assert coder.simulated is True and coder.label == LABEL and "simulated" in coder.label
    assert coder.info()["simulated"] is True
    code = coder.draft(ctx()).code
    assert "offline coder (a simulated agent)" in code.splitlines()[0]


def test_every_pipeline_parses_and_follows_the_contract():
    for level in LEVELS:
        for reply in drafts(level, 25, failure_rate=0.3):
            tree = ast.parse(reply.code)
            names = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            assert {"predict", "main"} <= names
            assert 'if __name__ == "__main__":' in reply.code
            assert "Validation AUROC" in reply.code and "WORKING_DIR" in reply.code
            # the header records the pipeline's choices; an injected failure stays out of it
            assert g.components_from_code(reply.code) == {**reply.components, "bug": None}
            assert '"bug"' not in reply.code


def test_an_injected_failure_is_said_in_words_and_never_a_property_of_the_code():
    replies = [r for level in LEVELS for r in drafts(level, 25, failure_rate=0.5) if r.components.get("bug")]
    assert replies
    for reply in replies:
        assert g.injected_failure(reply.components).startswith("simulated agent: this node was made to ")
        assert "bug" not in reply.plan and '"bug"' not in reply.code
    slow = g.normalise({**g.default_components("cnn"), "bug": "slow"})
    assert g.injected_failure(slow) == ("simulated agent: this node was made to run slowly (far too many "
                                        "epochs, or a slow loop)")
    assert g.injected_failure(g.default_components()) is None
    old = g.render(slow, "plan").replace('{"colour"', '{"bug": "slow", "colour"')
    assert '"bug"' in old and '"bug"' not in g.without_injected_failure(old)


def test_a_plan_says_what_the_pipeline_does_without_contradicting_itself():
    c = g.normalise({**g.default_components("cnn"), "selection": "minimax"})
    text = "\n".join(g.describe(c))
    assert "no fairness intervention" not in text and "hp=" not in text and "=None" not in text
    assert "worst skin-tone group" in text and "training treats every skin tone alike" in text
    assert "epochs (passes over the data)" in text
    assert g.describe(g.default_components())[-1] == "skin tone: not used"


def test_base_never_touches_skin_tone():
    for reply in drafts("base", 100):
        assert "skin_tone" not in reply.code
        assert not audit_code(reply.code).flags["reads_skin_tone"]


def test_level_behaviour_matches_the_study():
    hint = [audit_code(r.code).flags for r in drafts("fairness-hint", 100)]
    touched = sum(f["reads_skin_tone"] for f in hint)
    assert 5 <= touched <= 40  # rarely

    metric = drafts("fairness-metric", 100)
    monitors = sum(bool(r.components["monitor_groups"]) for r in metric)
    assert 35 <= monitors <= 65  # about half the time
    assert sum(audit_code(r.code).flags["per_group_metric"] for r in metric) >= monitors - 5

    methods = drafts("fairness-methods", 100)
    flags = [audit_code(r.code).flags for r in methods]
    assert all(any(f[k] for k in FAIR_FLAGS) for f in flags)  # always an intervention
    kinds = Counter(r.components["fairness"] for r in methods)
    assert kinds.most_common(1)[0][0] == "reweight"


def test_same_seed_same_code_different_seed_differs():
    a = OfflineCoder().draft(ctx("fairness-metric", step=2, seed=5))
    b = OfflineCoder().draft(ctx("fairness-metric", step=2, seed=5))
    assert a.code == b.code and a.plan == b.plan
    codes = {OfflineCoder().draft(ctx("fairness-metric", step=2, seed=s)).code for s in range(8)}
    assert len(codes) > 3


def test_guidance_visibly_changes_the_draft():
    plain = OfflineCoder(failure_rate=0).draft(ctx("base", step=4))
    guided = OfflineCoder(failure_rate=0).draft(ctx("base", step=4, glob=["please reweight the dark skin groups",
                                                                         "use colour constancy"]))
    assert guided.components["fairness"] == "reweight" and guided.components["colour"] == "grey_world"
    assert "Following guidance" in guided.plan and "reweight" in guided.plan
    assert audit_code(guided.code).flags["reweighting"]
    assert plain.components["fairness"] == "none"


@pytest.mark.parametrize("text,key,value", [
    ("try upsampling the darker skin tones", "fairness", "upsample"),
    ("use a ResNet", "model", "resnet18"),
    ("a small CNN please", "model", "cnn"),
    ("switch to gradient boosting", "model", "gbm"),
    ("logistic regression is enough", "model", "logreg"),
    ("select by minimax / worst-group AUC", "selection", "minimax"),
    ("Pareto selection", "selection", "minimax"),
    ("drop non-neoplastic lesions", "filter_non_neoplastic", True),
    ("standardise every image (z-score)", "standardise", True),
    ("colour normalisation", "colour", "grey_world"),
    ("don't reweight anything", "fairness", "none"),
    ("group-balanced loss", "fairness", "group_balanced"),
])
def test_guidance_keywords(text, key, value):
    ds = {d.key: d.value for d in g.parse_guidance([text])}
    assert ds.get(key) == value, ds


def test_improve_changes_one_component_and_follows_node_guidance():
    coder = OfflineCoder(failure_rate=0)
    parent = coder.draft(ctx("fairness-metric", step=1, seed=2))
    for step in range(2, 30):
        child = coder.improve(ctx("fairness-metric", step=step, seed=2), view(parent))
        a, b = parent.components, child.components
        changed = [k for k in a if k != "bug" and a[k] != b[k]]
        if changed == ["model", "hp"] or changed == ["model", "hp", "image_size"]:
            changed = ["model"]
        if changed == ["selection", "monitor_groups"]:
            changed = ["selection"]
        assert len(changed) == 1, (changed, child.plan)
        assert child.plan.startswith("Improve node 1")
    guided = coder.improve(ctx("fairness-metric", step=40, node=["use upsampling for this one"]), view(parent))
    if parent.components["fairness"] != "upsample":
        assert guided.components["fairness"] == "upsample"
        assert "upsampl" in guided.plan and "guidance" in guided.plan


def test_improve_does_not_repeat_what_a_sibling_already_tried():
    coder = OfflineCoder(failure_rate=0)
    parent = coder.draft(ctx("base", step=1, seed=5))
    guidance = ["please reweight the groups"]
    first = coder.improve(ctx("base", step=2, glob=guidance), view(parent))
    assert first.components["fairness"] == "reweight"
    parent_view = view(parent)
    parent_view.tried = [first.components]
    second = coder.improve(ctx("base", step=3, glob=guidance), parent_view)
    strip = lambda c: {**c, "bug": None}  # noqa: E731
    assert strip(second.components) != strip(first.components)
    assert "already tried on node 1" in second.plan
    changed = [k for k in parent.components if k not in ("bug", "hp") and parent.components[k] != second.components[k]]
    assert len(changed) <= 2  # still one change of the parent (a model switch also resets its settings)


def test_base_improvements_never_touch_skin_tone():
    coder = OfflineCoder(failure_rate=0)
    parent = coder.draft(ctx("base", step=1))
    for step in range(2, 40):
        parent = coder.improve(ctx("base", step=step), view(parent))
        assert "skin_tone" not in parent.code


def test_injected_bugs_and_their_repair():
    coder = OfflineCoder(failure_rate=1.0)
    seen = Counter()
    for step in range(60):
        reply = coder.draft(ctx("fairness-methods", step=step))
        bug = reply.components["bug"]
        seen[bug] += 1
        marker = {"key_error": 'df["diagnosis"]', "shape": "\n    y = y[1:]", "slow": None,
                  "missing_import": None}[bug]
        if marker:
            assert marker in reply.code
        if bug == "missing_import":
            assert "import roc_auc_score" not in reply.code
        fixed = OfflineCoder(failure_rate=0).debug(ctx("fairness-methods", step=100 + step),
                                                   view(reply, status="buggy", exc="KeyError"))
        assert fixed.components["bug"] is None
        assert "Debug node 1" in fixed.plan
        assert 'df["diagnosis"]' not in fixed.code and "\n    y = y[1:]" not in fixed.code
        assert "from sklearn.metrics import roc_auc_score" in fixed.code
        rest = {k: v for k, v in fixed.components.items() if k != "bug"}
        assert rest == {k: v for k, v in reply.components.items() if k != "bug"}
    assert set(seen) == set(g.BUGS)


def test_debug_lightens_a_timeout_without_injected_bug():
    coder = OfflineCoder(failure_rate=0)
    c = g.normalise({"model": "resnet18", "hp": {"epochs": 2}, "image_size": 64})
    reply = type("R", (), {"plan": "p", "code": g.render(c, "p"), "components": c})()
    fixed = coder.debug(ctx("base", step=9), view(reply, status="timeout", exc="TimeoutError"))
    assert fixed.components["hp"]["epochs"] == 1 and fixed.components["image_size"] == 32
    assert "timed out" in fixed.plan


def test_foreign_code_is_rewritten():
    coder = OfflineCoder(failure_rate=0)
    nv = NodeView(node_id=4, stage="draft", plan="", code="print('hi')", status="buggy", exc_type="NameError")
    reply = coder.debug(ctx("base", step=3), nv)
    assert reply.code and "rewrite it from scratch" in reply.plan


def test_review_reads_the_output():
    coder = OfflineCoder()
    nv = NodeView(node_id=1, stage="draft", plan="", code="", status="ok",
                  output="epoch 1\nGroup 0 validation AUROC: 0.9\nValidation AUROC: 0.8123\n")
    r = coder.review(ctx(), nv)
    assert not r.is_bug and r.claimed_metric == pytest.approx(0.8123)
    nv.status, nv.exc_type = "buggy", "KeyError"
    nv.output = "Traceback (most recent call last):\nKeyError: 'diagnosis'\n"
    r = coder.review(ctx(), nv)
    assert r.is_bug and "KeyError" in r.summary
    nv.status, nv.output = "ok", "done\n"
    assert coder.review(ctx(), nv).is_bug


def test_components_round_trip_json():
    for reply in drafts("fairness-methods", 10):
        assert json.loads(json.dumps(reply.components)) == reply.components
