"""The reply rules as a registry (engine.coders.llm.reply_rules): ids, scopes, one example that hits
each rule, and the hit recorded on the llm_call that brought the reply, through to
`befair show --json`."""
from __future__ import annotations

import json

import pytest

from befair_tui.cli import main
from engine.coders.llm import reply_rules, scaffold
from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LlmConfig
from tests.fakes.chat_server import AutoResponder, FakeChatServer, code_reply, reply
from tests.unit.test_reply_flaws import GOOD, ctx

SC = scaffold.load()


def _with(extra_import: str = "", body: str = GOOD) -> str:
    return body.replace("import numpy as np\n", f"import numpy as np\n{extra_import}", 1)


# one reply per rule that hits it, and only it first
HITTING = {
    "syntax": "def features(X:\n    return X\n",
    "unwritten-parts": "def features(X):\n    return X.reshape(len(X), -1)\n",
    "unavailable-import": _with("import tensorflow as tf\n"),
    "undefined-name": GOOD.replace("LogisticRegression(", "DecisionTreeClassifier("),
    "missing-attribute": _with("import scipy.misc\n", GOOD.replace(
        "return colour_stats(X)", "return scipy.misc.imresize(colour_stats(X), 2)")),
    "unknown-keyword": _with("from sklearn.ensemble import RandomForestClassifier\n", GOOD.replace(
        'LogisticRegression(class_weight="balanced", max_iter=1000)', "RandomForestClassifier(sample_weight=1)")),
    "pipeline-fit-keyword": _with("from sklearn.pipeline import make_pipeline\nfrom sklearn.preprocessing import "
                                  "StandardScaler\n", GOOD.replace(
        'model = LogisticRegression(class_weight="balanced", max_iter=1000)',
        'model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))')),
    "features-reads-files": GOOD.replace("return colour_stats(X)", 'return np.load("working/x.npy")'),
    "x-indexed-by-name": GOOD.replace("return colour_stats(X)", 'return colour_stats(X["image"])'),
    "features-makes-pil-images": _with("from PIL import Image\n", GOOD.replace(
        "return colour_stats(X)", "return colour_stats(np.stack([np.asarray(Image.fromarray(x)) for x in X]))")),
    "features-uses-training-names": GOOD.replace("return colour_stats(X)", "return colour_stats(X) * len(skin_tone)"),
}


def test_rule_ids_are_unique_kebab_case_with_a_scope_and_what_they_catch():
    ids = [r.id for r in (reply_rules.NO_CODE, reply_rules.UNWRITTEN, reply_rules.SYNTAX, *reply_rules.RULES)]
    assert len(ids) == len(set(ids)) == len(reply_rules.BY_ID)
    for rule in reply_rules.BY_ID.values():
        assert rule.id == rule.id.lower() and " " not in rule.id and rule.scope in ("any", "scaffold", "debug")
        assert len(rule.catches) > 20


@pytest.mark.parametrize("rule", sorted(HITTING))
def test_each_rule_has_a_reply_that_hits_it(rule):
    hit = SC.check(HITTING[rule])
    assert hit is not None and hit.rule == rule, hit
    assert hit.message.startswith("the reply")


def test_every_checked_rule_is_exercised_here_and_a_good_reply_hits_none():
    checked = {r.id for r in reply_rules.RULES} | {"syntax", "unwritten-parts"}
    assert checked - {"repeats-failed-code"} == set(HITTING)
    assert SC.check(GOOD) is None


NESTED = GOOD.replace("    return colour_stats(X)\n",
                      "    def scaled(x):\n        return x * scale\n    return scaled(colour_stats(X))\n")
BEFORE_ASSIGNED = GOOD.replace("    return colour_stats(X)\n", "    SIZE = SIZE * 2\n    return colour_stats(X)\n")


@pytest.mark.parametrize("code, rule, message", [
    # pyflakes' UndefinedName, inside a function nested in features()
    (NESTED, "undefined-name", "the reply uses scale, which it neither imports nor defines"),
    # pyflakes' UndefinedLocal: features() assigns SIZE, so its SIZE is its own before the assignment too
    (BEFORE_ASSIGNED, "undefined-name", "the reply reads SIZE in features() before assigning it there: "
                                        "a name a function assigns is that function's own throughout it"),
    # pyflakes' findings that parse and do not compile
    (GOOD.replace("    return colour_stats(X)\n", "    for x in X:\n        pass\n    break\n"),
     "syntax", "the reply's code does not compile ('break' outside loop, in features())"),
    (GOOD.replace("def train(X, y, skin_tone):", "def train(X, y, y):"),
     "syntax", "the reply's code does not compile (duplicate argument 'y' in function definition, in train())"),
])
def test_pyflakes_findings_are_recorded_under_the_rule_they_belong_to(code, rule, message):
    hit = SC.check(code)
    assert hit is not None and hit.rule == rule and hit.message.startswith(message), hit


def test_what_pyflakes_reports_and_never_fails_is_no_hit():
    """A quoted annotation, a name nested in a helper nothing calls, a name a star import may bind."""
    quoted = GOOD.replace("def train(X, y, skin_tone):", 'def train(X, y, skin_tone) -> "Model":')
    unused = GOOD + "\n\nclass Unused:\n    def of(self, X):\n        return [lambda: undefined_z for _ in X]\n"
    starred = GOOD.replace("import numpy as np\n", "import numpy as np\nfrom scipy.ndimage import *\n").replace(
        "return colour_stats(X)", "return colour_stats(gaussian_filter(X, 1))")
    for code in (quoted, unused, starred):
        assert SC.check(code) is None, code
    assert SC.check(NESTED.replace("x * scale", "x * 2.0")) is None
    runs = unused.replace("class Unused:\n", "class Unused:\n    LIMIT = undefined_limit\n\n")
    hit = SC.check(runs)            # a class's body runs when the module does, used or not
    assert hit is not None and hit.message == "the reply uses undefined_limit, which it neither imports nor defines"


def test_a_debug_reply_handing_back_the_failed_code_hits_repeats_failed_code():
    failed = SC.assemble(GOOD)
    hit = SC.check(GOOD, failed)
    assert hit is not None and hit.rule == "repeats-failed-code"
    assert SC.check(GOOD) is None       # a draft has no failed code to repeat


def test_each_hit_is_recorded_on_the_call_that_brought_the_reply_with_its_attempt():
    script = [reply("I would use a CNN."), reply(code_reply("Keras.", HITTING["unavailable-import"])),
              reply(code_reply("Colour stats.", GOOD))]
    with FakeChatServer(script) as srv:
        coder = LlmCoder(LlmConfig(model="m", base_url=srv.base_url, timeout=5.0, scaffold=True), exec_timeout=600)
        r = coder.draft(ctx())
    assert r.error is None and r.code == SC.assemble(GOOD)
    checks = [c.check for c in r.llm_calls]
    assert checks[0] == {"rule": "no-code-block", "attempt": 1, "message": "the reply held no ```python code block"}
    assert checks[1] is not None and checks[1]["rule"] == "unavailable-import" and checks[1]["attempt"] == 2
    assert "tensorflow" in checks[1]["message"] and checks[2] is None


def test_rule_hits_reach_the_llm_call_events_and_befair_show_json(workspace, tmp_path, monkeypatch, capsys):
    (tmp_path / "llm.toml").write_text("")
    monkeypatch.setenv("BEFAIR_LLM_CONFIG", str(tmp_path / "llm.toml"))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_MODEL", "BEFAIR_LLM_REVIEW_MODEL"):
        monkeypatch.setenv(var, "")
    db = tmp_path / "s.db"
    script = [reply(code_reply("Keras.", HITTING["unavailable-import"])), reply(code_reply("Colour stats.", GOOD))]
    with FakeChatServer(script, default=AutoResponder()) as srv:
        code = main(["run", "--headless", "--quiet", "--coder", "openai", "--model", "m", "--base-url", srv.base_url,
                     "--scaffold", "on", "--data", str(workspace.root), "--steps", "1", "--step-timeout", "120",
                     "--db", str(db), "--session-id", "rules"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["show", "rules", "--json", "--db", str(db)]) == 0
    shown = json.loads(capsys.readouterr().out)
    calls = shown["nodes"][0]["llm_calls"]
    assert [c["check"]["rule"] if c["check"] else None for c in calls][:2] == ["unavailable-import", None]
    assert calls[0]["check"]["attempt"] == 1 and "tensorflow" in calls[0]["check"]["message"]
    assert shown["rule_hits"] == {"unavailable-import": 1}


def test_the_local_model_bench_counts_hits_per_rule_recorded_or_checked_again_from_the_reply():
    from tests.bench.bench_local_model import rule_hits

    recorded = {"role": "draft", "ok": True, "check": {"rule": "undefined-name", "attempt": 1, "message": "…"}}
    older = {"role": "draft", "ok": True, "reply": code_reply("Keras.", HITTING["unavailable-import"])}
    clean = {"role": "improve", "ok": True, "check": None}
    review = {"role": "review", "ok": True, "reply": "no code"}
    assert rule_hits([recorded, older, clean, review, recorded]) == {"undefined-name": 2, "unavailable-import": 1}


def test_a_coder_without_what_the_runner_asks_is_refused_with_what_it_lacks(workspace, tmp_path):
    from engine.agent.runner import Runner
    from engine.agent.session_config import SessionConfig
    from engine.agent.session_setup import start_session
    from engine.errors import BefairError
    from engine.session.store import SessionStore

    class Foreign:   # a study factory's coder written before CoderBase
        name, label, simulated = "foreign", "foreign coder", True

        def draft(self, ctx): ...
        def improve(self, ctx, parent): ...
        def debug(self, ctx, parent): ...
        def review(self, ctx, node): ...

    store = SessionStore(tmp_path / "s.db")
    config = SessionConfig(steps=1, data=str(workspace.root))
    writer = start_session(store, config, workspace=workspace, coder=Foreign())
    with pytest.raises(BefairError, match="lacks secrets, budget_usd, attach_stream: subclass"):
        Runner(store, writer.session_id, coder=Foreign(), workspace=workspace)
