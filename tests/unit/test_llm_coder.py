"""The LLM coder through the real openai client against a real local Chat Completions server."""
from __future__ import annotations

import json
import time

import pytest

from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LlmConfig, over_budget
from engine.coders.protocol import CoderContext, MemoryItem, NodeView
from engine.measures.summary import EvaluationSummary
from engine.task import FAIRNESS_METHODS, METRIC_LINE
from tests.fakes.chat_server import (
    SIMPLE_PIPELINE,
    AutoResponder,
    FakeChatServer,
    code_reply,
    error,
    garbage,
    json_review,
    rate_limited,
    refusal,
    reply,
    slow,
    tool_call,
    tool_review,
    truncated,
)

PREVIEW = "input/skin_lesions.csv: 480 rows\nimage_name,skin_tone,label\nimage_0,3,benign\n"


def make_coder(srv: FakeChatServer, **kw) -> LlmCoder:
    settings = dict(model="gpt-4.1-mini", base_url=srv.base_url, timeout=2.0, max_retries=2,
                    call_budget_s=20.0)
    settings.update(kw)
    return LlmCoder(LlmConfig(**settings), exec_timeout=600)


def ctx(**kw) -> CoderContext:
    base = dict(instruction=FAIRNESS_METHODS, metric_line=METRIC_LINE, data_preview=PREVIEW,
                step=1, seed=0)
    base.update(kw)
    return CoderContext(**base)


def node(node_id=1, status="ok", output="Validation AUROC: 0.7100\n", exc_type=None) -> NodeView:
    return NodeView(node_id=node_id, stage="draft", plan="Colour stats + LR.",
                    code=SIMPLE_PIPELINE, status=status, output=output, exc_type=exc_type)


def test_draft_prompt_carries_task_contract_preview_and_parses_reply():
    with FakeChatServer([reply(code_reply("Balanced LR on colour statistics."))]) as srv:
        coder = make_coder(srv)
        r = coder.draft(ctx())
        req = srv.chat_requests[0]
    assert r.code == SIMPLE_PIPELINE and r.error is None
    assert r.plan == "Balanced LR on colour statistics."
    body = req.body
    assert body["model"] == "gpt-4.1-mini" and body["temperature"] == 0.5
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    text = req.text
    assert FAIRNESS_METHODS in text and METRIC_LINE in text and PREVIEW.strip() in text
    for phrase in ("python solution.py", "Validation AUROC: <value>", "predict(folder)",
                   "skin_lesions.csv", "image_name, skin_tone, alternative_skin_tone, super_label, "
                   "label, expert_opinion", "./working", "10 minutes"):
        assert phrase in text, phrase
    assert "domain expert" not in text  # no guidance yet
    assert req.headers["authorization"] == "Bearer sk-no-key-required"


def test_guidance_appears_in_next_prompt_and_node_guidance_only_for_that_node():
    with FakeChatServer(default=AutoResponder()) as srv:
        coder = make_coder(srv)
        coder.draft(ctx())
        coder.draft(ctx(guidance_global=["Reweight the loss by skin-tone group."]))
        coder.improve(ctx(guidance_global=["Reweight the loss by skin-tone group."],
                          guidance_node=["Try upsampling Fitzpatrick V-VI here."]), node(3))
        coder.debug(ctx(guidance_node=["Check the column names."]),
                    node(4, "buggy", "KeyError: 'diagnosis'", "KeyError"))
        # the next expansion of another node: the engine passes no node guidance
        coder.improve(ctx(guidance_global=["Reweight the loss by skin-tone group."]), node(5))
        # a draft never carries node guidance even if handed some
        coder.draft(ctx(guidance_node=["Try upsampling Fitzpatrick V-VI here."]))
        texts = [r.text for r in srv.chat_requests]
    assert "Reweight" not in texts[0]
    assert "Reweight the loss by skin-tone group." in texts[1]
    assert "domain expert" in texts[1].split("Reweight")[0][-400:]
    assert "Try upsampling Fitzpatrick V-VI here." in texts[2] and "Reweight" in texts[2]
    assert "Check the column names." in texts[3] and "KeyError: 'diagnosis'" in texts[3]
    assert "Try upsampling" not in texts[4] and "Reweight" in texts[4]
    assert "Try upsampling" not in texts[5]


def test_improve_and_debug_prompts_hold_parent_memory_and_output():
    mem = [MemoryItem(1, "draft", "Plan one: colour stats.", "ok", 0.71, 0.12, "trained fine"),
           MemoryItem(2, "draft", "Plan two: small CNN.", "buggy")]
    parent = node(1)
    parent.measured = EvaluationSummary.from_payload(
        {"auc": 0.71, "auc_gap": 0.12, "group_auc": {"group_0": 0.75, "group_2": 0.63}})
    with FakeChatServer(default=AutoResponder()) as srv:
        coder = make_coder(srv)
        r1 = coder.improve(ctx(memory=mem, feedback="groups"), parent)   # the expert turned group feedback on
        r2 = coder.debug(ctx(memory=mem), node(2, "buggy", "Traceback ...\nKeyError: 'x'", "KeyError"))
        coder.improve(ctx(memory=mem), parent)                            # the default: the AUC only
        imp, dbg, plain = (srv.chat_requests[i].text for i in range(3))
    assert r1.code and r2.code
    assert "Measured validation AUROC: 0.7100" in plain and "worst group" not in plain and "V–VI" not in plain
    assert "Plan one: colour stats." in imp and "Measured validation AUROC: 0.7100" in imp
    assert "gap (best - worst group): 0.1200" in imp and "V–VI (dark) 0.630" in imp
    assert "single actionable improvement" in imp and "atomic" in imp
    assert "def features(path)" in imp  # the parent's code
    assert "Previous (buggy) implementation (node 2)" in dbg and "KeyError: 'x'" in dbg
    assert "exception: KeyError" in dbg


def test_token_totals_add_up_across_calls():
    script = [reply(code_reply(), usage=(1200, 300)), reply(code_reply(), usage=(1500, 350)),
              tool_review(False, "ok", 0.7, usage=(900, 40)), reply(code_reply())]
    with FakeChatServer(script) as srv:
        coder = make_coder(srv)
        replies = [coder.draft(ctx()), coder.improve(ctx(), node())]
        rv = coder.review(ctx(), node())
        replies.append(coder.debug(ctx(), node(status="buggy")))
        reported = srv.total_usage
    calls = [c for r in replies for c in r.llm_calls] + rv.llm_calls
    tokens = sum(c.tokens_in for c in calls), sum(c.tokens_out for c in calls)
    assert tokens == reported
    assert reported[0] > 1200 + 1500 + 900  # the last reply's usage was estimated by the server
    assert len(calls) == 4 and all(c.ok for c in calls) and sorted(map(id, coder.calls)) == sorted(map(id, calls))
    expected_cost = (reported[0] * 0.40 + reported[1] * 1.60) / 1e6
    assert sum(c.cost for c in calls) == pytest.approx(expected_cost)
    assert all(c.latency_s > 0 and c.model == "gpt-4.1-mini" for c in calls)
    assert [c.role for c in calls] == ["draft", "improve", "debug", "review"]
    assert [c.role for c in coder.calls] == ["draft", "improve", "review", "debug"]
    assert not over_budget(sum(c.cost for c in calls), LlmConfig(budget_usd=1.0))
    assert over_budget(sum(c.cost for c in calls), LlmConfig(budget_usd=expected_cost / 2))


@pytest.mark.parametrize("bad,word", [
    (refusal("I'm sorry, but I can't help with that."), "refused"),
    (truncated("Plan.\n```python\nimport os\ndef predict(folder):\n    return {"), "truncated"),
])
def test_refusals_and_truncation_become_failed_replies(bad, word):
    with FakeChatServer([bad]) as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 1  # not retried
    assert r.code is None and word in r.error
    assert len(r.llm_calls) == 1 and r.llm_calls[0].tokens_in > 0
    assert not r.llm_calls[0].ok and word in r.llm_calls[0].error


def test_a_reply_without_code_is_asked_again_as_aide_does():
    words = reply("## Solution sketch\nUse a CNN.\n## Implementation guideline\n- load the CSV")
    with FakeChatServer([words, reply(code_reply())]) as srv:
        r = make_coder(srv).draft(ctx())
        first, second = srv.chat_requests
    assert r.code is not None and len(r.llm_calls) == 2 and all(c.ok for c in r.llm_calls)
    assert first.messages == second.messages  # the same prompt, as AIDE's plan_and_code_query
    refusal_in_words = reply("I'm sorry, I cannot write code for medical diagnosis.")
    with FakeChatServer([refusal_in_words] * 3) as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 3
    assert r.code is None and "no usable Python code (3 replies)" in r.error and len(r.llm_calls) == 3


@pytest.fixture
def quick_resend(monkeypatch):
    """Our re-send after a malformed/empty reply waits 0.5 s, 1 s ...; tests need not."""
    monkeypatch.setattr("engine.coders.llm.client.RESEND_DELAYS", (0.01,))


def test_garbage_is_resent_then_fails_without_raising(quick_resend):
    # A JSON body that does not parse (a proxy hiccup) and a completion without choices are
    # transient: sent again (max_retries times). Non-JSON bodies are not: see test_llm_streaming.
    with FakeChatServer([garbage(), garbage('{"id": "x", "choices": []}'), garbage()]) as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 3
    assert r.code is None and "malformed reply" in r.error and "after 3 attempts" in r.error
    assert [c.ok for c in r.llm_calls] == [False, False, False]
    assert all(c.reply == "" and c.messages for c in r.llm_calls)


def test_garbage_then_good_reply_recovers(quick_resend):
    with FakeChatServer([garbage(), reply(code_reply())]) as srv:
        r = make_coder(srv).draft(ctx())
    assert r.code == SIMPLE_PIPELINE and [c.ok for c in r.llm_calls] == [False, True]


def test_retry_after_is_honoured_by_the_openai_client():
    with FakeChatServer([rate_limited(0.4), rate_limited(0.25, ms=True), reply(code_reply())]) as srv:
        r = make_coder(srv).draft(ctx())
        times = [q.time for q in srv.chat_requests]
        retry_counts = [q.headers.get("x-stainless-retry-count") for q in srv.chat_requests]
    assert r.code is not None and len(times) == 3
    assert 0.38 <= times[1] - times[0] < 1.5
    assert 0.23 <= times[2] - times[1] < 1.5
    assert retry_counts == ["0", "1", "2"]           # the client's own retries, one call
    assert "rate limited (429)" in r.llm_calls[0].error
    assert [c.ok for c in r.llm_calls] == [False, False, True]


def test_retry_after_beyond_the_call_budget_fails_at_once():
    with FakeChatServer([rate_limited(120), reply(code_reply())]) as srv:
        t0 = time.monotonic()
        r = make_coder(srv, call_budget_s=5).draft(ctx())
        assert time.monotonic() - t0 < 3
        assert len(srv.chat_requests) == 1
    assert r.code is None and "rate limited (429)" in r.error
    assert "asks to wait 120 s" in r.error and "time budget" in r.error


def test_quota_exhausted_is_not_retried():
    with FakeChatServer([error(429, "You exceeded your current quota", code="insufficient_quota")]) as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 1
    assert "quota" in r.error


def test_server_errors_back_off_then_succeed():
    with FakeChatServer([error(500), error(503, "overloaded"), reply(code_reply())]) as srv:
        r = make_coder(srv).draft(ctx())
        times = [q.time for q in srv.chat_requests]
        retry_counts = [q.headers.get("x-stainless-retry-count") for q in srv.chat_requests]
    assert r.code is not None and [c.ok for c in r.llm_calls] == [False, False, True]
    assert retry_counts == ["0", "1", "2"]
    assert "server error (500)" in r.llm_calls[0].error and "overloaded" in r.llm_calls[1].error
    # the openai client's backoff: about 0.5 s, then about 1 s (with up to 25 % jitter)
    assert times[1] - times[0] >= 0.3 and times[2] - times[1] >= 0.6


def test_client_errors_are_not_retried():
    with FakeChatServer([error(401, "Incorrect API key provided")]) as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 1
    assert r.code is None and "401" in r.error and "Incorrect API key" in r.error


def test_timeouts_are_retried_then_fail():
    """Each reply would come after 1.5 s, a usable one: the client gave up on both at 0.3 s."""
    with FakeChatServer([slow(1.5), slow(1.5)]) as srv:
        r = make_coder(srv, timeout=0.3, max_retries=1).draft(ctx())
        assert len(srv.chat_requests) == 2
    assert r.code is None and "timed out" in r.error and "after 2 attempts" in r.error


def test_timeout_then_success():
    with FakeChatServer([slow(1.0), reply(code_reply())]) as srv:
        r = make_coder(srv, timeout=0.3).draft(ctx())
    assert r.code is not None and "timed out" in r.llm_calls[0].error


def test_unreachable_server_fails_cleanly():
    srv = FakeChatServer().start()
    url = srv.base_url
    srv.stop()
    coder = LlmCoder(LlmConfig(model="m", base_url=url, max_retries=1, timeout=1))
    r = coder.draft(ctx())
    assert r.code is None and f"cannot reach the server at {url}" in r.error
    rv = coder.review(ctx(), node())
    assert rv.claimed_metric == 0.71 and not rv.is_bug and "No review from the model" in rv.summary


def test_review_via_tool_call():
    with FakeChatServer([tool_review(False, "Trained; AUROC 0.71.", 0.71)]) as srv:
        rv = make_coder(srv, review_model="reviewer-1").review(ctx(), node())
        body = srv.chat_requests[0].body
    assert (rv.is_bug, rv.summary, rv.claimed_metric) == (False, "Trained; AUROC 0.71.", 0.71)
    assert body["model"] == "reviewer-1" and body["temperature"] == 0.0
    assert body["tools"][0]["function"]["name"] == "submit_review"
    assert body["tool_choice"]["function"]["name"] == "submit_review"
    assert rv.llm_calls[0].role == "review" and rv.llm_calls[0].model == "reviewer-1"


def test_review_falls_back_to_json_when_tools_are_rejected():
    with FakeChatServer([json_review(True, "KeyError: fix the column.", None),
                         json_review(False, "ok", 0.7)], supports_tools=False) as srv:
        coder = make_coder(srv)
        rv = coder.review(ctx(), node(status="buggy", output="KeyError", exc_type="KeyError"))
        rv2 = coder.review(ctx(), node())
        reqs = srv.chat_requests
    assert (rv.is_bug, rv.claimed_metric) == (True, None) and "KeyError" in rv.summary
    assert (rv2.is_bug, rv2.claimed_metric) == (False, 0.7)
    # first review: tools rejected (400) then JSON; second goes straight to JSON
    assert [q.has_tools for q in reqs] == [True, False, False]
    assert "Reply with only a JSON object" in reqs[1].text
    assert [c.ok for c in rv.llm_calls] == [False, True]


def test_review_reads_json_content_when_server_ignores_tools():
    with FakeChatServer([reply('{"is_bug": false, "summary": "fine", "metric": 0.66}')]) as srv:
        rv = make_coder(srv).review(ctx(), node())
        assert len(srv.chat_requests) == 1
    assert (rv.is_bug, rv.claimed_metric) == (False, 0.66)


def test_review_with_bad_tool_arguments_asks_again_for_json():
    with FakeChatServer([tool_call("submit_review", "{not json"),
                         reply("Here you go: {\"is_bug\": false, \"summary\": \"ok\", \"metric\": \"0.72\"}")]) as srv:
        rv = make_coder(srv).review(ctx(), node())
        assert [q.has_tools for q in srv.chat_requests] == [True, False]
    assert rv.claimed_metric == 0.72 and len(rv.llm_calls) == 2


def test_review_falls_back_to_the_output_when_both_fail():
    with FakeChatServer([reply("Looks good to me!"), refusal()]) as srv:
        rv = make_coder(srv).review(ctx(), node(output="epoch 3\nValidation AUROC: 0.6543\n"))
    assert rv.claimed_metric == 0.6543 and rv.is_bug is False
    assert "judged from the execution output" in rv.summary and len(rv.llm_calls) == 2
    with FakeChatServer([error(500)] * 3) as srv:
        rv = make_coder(srv).review(ctx(), node(status="buggy", output="Traceback\nValueError", exc_type="ValueError"))
        assert len(srv.chat_requests) == 3  # no JSON retry after a transport failure
    assert rv.is_bug and rv.claimed_metric is None


def test_review_tools_disabled_by_config():
    with FakeChatServer([json_review(False, "ok", 0.8)]) as srv:
        rv = make_coder(srv, review_tools=False).review(ctx(), node())
        assert not srv.chat_requests[0].has_tools
    assert rv.claimed_metric == 0.8


def test_never_raises_even_on_internal_errors():
    with FakeChatServer([reply(code_reply())]) as srv:
        coder = make_coder(srv)
        broken = NodeView(node_id=1, stage="draft", plan=None, code=12345, status="ok",  # type: ignore[arg-type]
                          output=object())  # type: ignore[arg-type]
        r = coder.improve(ctx(), broken)
        rv = coder.review(ctx(), broken)
    assert r.code is None and "internal error in the LLM coder" in r.error
    assert rv.summary.startswith("No review from the model (internal error")


def test_max_tokens_and_cost_of_unknown_model():
    with FakeChatServer([reply(code_reply(), usage=(10, 5))]) as srv:
        r = make_coder(srv, model="llama3:8b", max_tokens=4096).draft(ctx())
        assert srv.chat_requests[0].body["max_tokens"] == 4096
    assert r.llm_calls[0].cost == 0.0 and r.llm_calls[0].tokens_in == 10


def test_llm_call_fields_match_the_event_payload():
    from dataclasses import asdict

    with FakeChatServer([reply(code_reply())]) as srv:
        call = make_coder(srv).draft(ctx()).llm_calls[0]
    payload = asdict(call)
    assert set(payload) == {"role", "model", "tokens_in", "tokens_out", "latency_s", "cost", "ok",
                            "error", "tokens_estimated", "messages", "reply", "first_token_s", "tokens_per_s",
                            "server_model", "check"}
    json.dumps(payload)


def test_reasoning_model_that_rejects_temperature_and_max_tokens():
    msg_t = "Unsupported value: 'temperature' does not support 0.5 with this model."
    msg_m = "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens'."
    with FakeChatServer([error(400, msg_t), error(400, msg_m), reply(code_reply()),
                         reply(code_reply())]) as srv:
        coder = make_coder(srv, max_retries=0, max_tokens=2000)
        r = coder.draft(ctx())
        r2 = coder.draft(ctx())  # remembered: no rejected parameters sent again
        bodies = [q.body for q in srv.chat_requests]
    assert r.code is not None and r2.code is not None
    assert "temperature" in bodies[0] and "temperature" not in bodies[1]
    assert bodies[2].get("max_completion_tokens") == 2000 and "max_tokens" not in bodies[2]
    assert "temperature" not in bodies[3] and "max_tokens" not in bodies[3]
    assert [c.ok for c in r.llm_calls] == [False, False, True]


def test_empty_reply_is_retried():
    with FakeChatServer([reply("", usage=(100, 0)), reply(code_reply(), usage=(100, 50))]) as srv:
        r = make_coder(srv).draft(ctx())
    assert r.code is not None
    assert [(c.ok, c.tokens_in) for c in r.llm_calls] == [(False, 100), (True, 100)]
    assert r.llm_calls[0].error == "empty reply"


def test_cancel_stops_waiting_between_retries():
    import threading

    with FakeChatServer([rate_limited(5), reply(code_reply())]) as srv:
        coder = make_coder(srv)
        threading.Timer(0.2, coder.cancel).start()
        t0 = time.monotonic()
        r = coder.draft(ctx())
        elapsed = time.monotonic() - t0
        assert len(srv.chat_requests) == 1
        assert elapsed < 2 and "cancelled" in r.error
        again = coder.draft(ctx())       # a cancel ends the call in progress, not later ones
    assert again.code is not None


def test_auto_responder_drives_a_draft_debug_improve_loop():
    """What an end-to-end session sees from the fake's default responder."""
    from tests.fakes.chat_server import BUGGY_PIPELINE

    with FakeChatServer(default=AutoResponder(buggy_drafts=1)) as srv:
        coder = make_coder(srv)
        d1 = coder.draft(ctx())
        assert d1.code == BUGGY_PIPELINE
        bug = NodeView(1, "draft", d1.plan, d1.code, "buggy",
                       output="Traceback (most recent call last):\nKeyError: 'diagnosis'\n", exc_type="KeyError")
        rv1 = coder.review(ctx(), bug)
        fix = coder.debug(ctx(), bug)
        ok = NodeView(2, "debug", fix.plan, fix.code, "ok", output="Validation AUROC: 0.6500\n")
        rv2 = coder.review(ctx(), ok)
        imp = coder.improve(ctx(), ok)
        d2 = coder.draft(ctx())
    assert (rv1.is_bug, rv1.claimed_metric) == (True, None)
    assert fix.code == SIMPLE_PIPELINE and "label column" in fix.plan
    assert (rv2.is_bug, rv2.claimed_metric) == (False, 0.65)
    assert imp.code == SIMPLE_PIPELINE and d2.code == SIMPLE_PIPELINE
    assert len(coder.calls) == 6 and all(c.ok for c in coder.calls)


def test_a_seeded_client_sends_each_sample_its_own_seed_and_drops_it_where_refused(quick_resend):
    """--llm-seed N: the n-th sample is asked with N+n, a re-sent one included (the same seed would
    sample the same malformed reply); no seed without the setting; a server that refuses the
    parameter gets the request again without it, and never again."""
    with FakeChatServer([reply(code_reply()), garbage(), reply(code_reply()),
                         error(400, "Unsupported parameter: 'seed'"), reply(code_reply()),
                         reply(code_reply())]) as srv:
        coder = make_coder(srv, seed=10)
        assert coder.draft(ctx()).code is not None
        assert coder.draft(ctx()).code is not None          # garbage, then re-sent
        assert coder.draft(ctx()).code is not None          # refused, then re-sent without it
        assert coder.draft(ctx()).code is not None
        seeds = [q.body.get("seed") for q in srv.chat_requests]
    assert seeds == [10, 11, 12, 13, None, None]
    with FakeChatServer([reply(code_reply())]) as srv:
        make_coder(srv).draft(ctx())
        assert "seed" not in srv.chat_requests[0].body


# -- the be-fair protocol: AIDE's LLM settings and reading --------------------------------------

def aide_ctx(**kw):
    from engine.coders.llm.prompts_be_fair import BeFairContext

    return BeFairContext(**{**dict(instruction=FAIRNESS_METHODS, metric_line=METRIC_LINE, data_preview=PREVIEW,
                                   step=1, seed=0), **kw})


def aide_coder(srv, model="gpt-4.1-mini"):
    from engine.agent.task_protocol import BE_FAIR

    config = LlmConfig.load({"model": model, "base_url": srv.base_url, "timeout": 2.0, "call_budget_s": 20.0},
                            env={}, defaults=BE_FAIR.llm_defaults)
    return LlmCoder(config, exec_timeout=3600)


def test_be_fair_review_is_aides():
    review = tool_call("submit_review", {"is_bug": False, "summary": "fine", "metric": 0.25, "lower_is_better": True})
    with FakeChatServer([review, tool_review(False, "no metric", None)]) as srv:
        coder = aide_coder(srv)
        r = coder.review(aide_ctx(), node())
        r2 = coder.review(aide_ctx(), node())
        body = srv.chat_requests[0].body
    assert body["temperature"] == 0.5 and "max_tokens" not in body          # feedback temp 0.5, no cap
    params = body["tools"][0]["function"]["parameters"]
    assert params["required"] == ["is_bug", "summary", "metric", "lower_is_better"]
    assert (r.is_bug, r.claimed_metric, r.lower_is_better) == (False, 0.25, True)
    assert r2.is_bug is True                                                  # AIDE: no metric is a bug
    assert coder.describe()["sampling"]["max_tokens"] is None


def test_be_fair_code_is_asked_three_times_then_taken_whole():
    with FakeChatServer([reply("no fence at all ("), reply("still (none"), reply("give up (")]) as srv:
        coder = aide_coder(srv, model="o4-mini")
        r = coder.draft(aide_ctx())
        bodies = [q.body for q in srv.chat_requests]
    assert len(bodies) == 3 and all("temperature" not in b and "max_tokens" not in b for b in bodies)
    assert (r.plan, r.code) == ("", "give up (")          # AIDE's ("", completion_text): it runs as it is


def test_be_fair_code_needs_a_plan_and_joins_blocks():
    two = "Plan.\n\n```python\nimport os\n```\n\n```python\nprint(os.sep)\n```\n"
    with FakeChatServer([reply("```python\nx = 1\n```\n"), reply(two)]) as srv:
        r = aide_coder(srv).draft(aide_ctx())
        assert len(srv.chat_requests) == 2                 # the first reply had no plan: asked again
    assert r.plan == "Plan." and r.code is not None and "import os" in r.code and "print(os.sep)" in r.code
