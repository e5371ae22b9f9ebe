"""The LLM client's streaming, time budget, completion caps, records of what was said, and its
error for servers that are not OpenAI-compatible: the real openai client against real local
HTTP servers (tests/fakes/chat_server.py)."""
from __future__ import annotations

import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from itertools import pairwise

import pytest

from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import LlmConfig
from engine.coders.protocol import CoderContext, NodeView
from engine.task import FAIRNESS_METHODS, METRIC_LINE
from tests.fakes.chat_server import (
    SIMPLE_PIPELINE,
    FakeChatServer,
    code_reply,
    error,
    html_page,
    other_json,
    reply,
    slow,
    stalled_stream,
    streamed,
    tool_review,
    truncated,
)

PREVIEW = "input/skin_lesions.csv: 480 rows\nimage_name,skin_tone,label\nimage_0,3,benign\n"


def make_coder(srv_or_url, **kw) -> LlmCoder:
    url = srv_or_url if isinstance(srv_or_url, str) else srv_or_url.base_url
    settings = dict(model="gpt-4.1-mini", base_url=url, timeout=2.0, max_retries=2,
                    call_budget_s=20.0)
    settings.update(kw)
    return LlmCoder(LlmConfig(**settings), exec_timeout=600)


def ctx() -> CoderContext:
    return CoderContext(instruction=FAIRNESS_METHODS, metric_line=METRIC_LINE, data_preview=PREVIEW,
                        step=1, seed=0)


def node() -> NodeView:
    return NodeView(node_id=1, stage="draft", plan="Colour stats + LR.", code=SIMPLE_PIPELINE,
                    status="ok", output="Validation AUROC: 0.7100\n")


def deltas_of(text: str, n: int) -> list[str]:
    size = -(-len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)]


# -- streaming --------------------------------------------------------------------------------

def test_streamed_deltas_reach_on_stream_in_order_and_the_reply_is_their_concatenation():
    chunks = deltas_of(code_reply("Balanced LR on colour statistics."), 30)
    seen: list[tuple[str, str, float]] = []
    caller = threading.get_ident()
    threads = set()

    def on_stream(role: str, text: str) -> None:
        threads.add(threading.get_ident())
        seen.append((role, text, time.monotonic()))

    with FakeChatServer([streamed(chunks, delay=0.04, usage=(1234, 567))]) as srv:
        coder = make_coder(srv)
        coder.on_stream = on_stream
        t0 = time.monotonic()
        r = coder.draft(ctx())
        elapsed = time.monotonic() - t0
        body = srv.chat_requests[0].body
    full = "".join(chunks)
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert r.code == SIMPLE_PIPELINE and r.error is None
    texts = [t for _, t, _ in seen]
    assert len(texts) >= 3, "the reply should show while it streams"
    assert all(role == "draft" for role, _, _ in seen)
    assert all(b.startswith(a) and len(b) > len(a) for a, b in pairwise(texts))  # in order
    assert texts[-1] == full
    assert texts[0] != full                                 # something came before the end
    assert threads == {caller}                              # on the caller's thread
    assert len(seen) <= elapsed * 5 + 2                     # at most ~5 calls a second
    call = r.llm_calls[0]
    assert call.reply == full and call.ok
    assert (call.tokens_in, call.tokens_out, call.tokens_estimated) == (1234, 567, False)


def test_without_a_hook_and_with_a_broken_hook_the_coder_works_the_same():
    chunks = deltas_of(code_reply(), 10)
    with FakeChatServer([streamed(chunks, delay=0.03), streamed(chunks, delay=0.03)]) as srv:
        coder = make_coder(srv)
        assert coder.on_stream is None
        a = coder.draft(ctx())

        def broken(role, text):
            raise RuntimeError("display went away")

        coder.on_stream = broken
        b = coder.draft(ctx())
    assert a.code == b.code == SIMPLE_PIPELINE


def test_streamed_tool_call_review():
    seen: list[str] = []
    with FakeChatServer([tool_review(False, "Trained; AUROC 0.71.", 0.71, usage=(900, 40))]) as srv:
        coder = make_coder(srv)
        coder.on_stream = lambda role, text: seen.append(role)
        rv = coder.review(ctx(), node())
        assert srv.chat_requests[0].body["stream"] is True
    assert (rv.is_bug, rv.summary, rv.claimed_metric) == (False, "Trained; AUROC 0.71.", 0.71)
    call = rv.llm_calls[0]
    assert call.reply.startswith("submit_review({") and '"metric": 0.71' in call.reply
    assert (call.tokens_in, call.tokens_out) == (900, 40) and set(seen) <= {"review"}


def test_no_usage_in_the_stream_means_estimated_tokens_marked_as_such():
    with FakeChatServer([reply(code_reply())], stream_usage=False) as srv:
        r = make_coder(srv).draft(ctx())
    call = r.llm_calls[0]
    assert r.code is not None and call.tokens_estimated
    assert call.tokens_in > 100 and call.tokens_out > 50       # ~4 characters a token
    assert call.cost == pytest.approx((call.tokens_in * 0.40 + call.tokens_out * 1.60) / 1e6)


def test_a_server_that_rejects_streaming_is_asked_again_without_and_remembered():
    with FakeChatServer([reply(code_reply()), reply(code_reply())], streaming="reject") as srv:
        coder = make_coder(srv)
        seen: list[str] = []
        coder.on_stream = lambda role, text: seen.append(text)
        r1 = coder.draft(ctx())
        r2 = coder.draft(ctx())
        bodies = [q.body for q in srv.chat_requests]
    assert r1.code is not None and r2.code is not None
    assert [b.get("stream") for b in bodies] == [True, None, None]
    assert [c.ok for c in r1.llm_calls] == [False, True] and "'stream'" in r1.llm_calls[0].error
    assert not r1.llm_calls[1].tokens_estimated               # usage from the JSON body
    assert seen and seen[-1] == r1.llm_calls[1].reply         # the whole reply, once


def test_a_server_that_rejects_stream_options_streams_without_them():
    with FakeChatServer([reply(code_reply()), reply(code_reply())], reject_stream_options=True) as srv:
        coder = make_coder(srv)
        r1 = coder.draft(ctx())
        r2 = coder.draft(ctx())
        bodies = [q.body for q in srv.chat_requests]
    assert r1.code is not None and r2.code is not None
    assert ["stream_options" in b for b in bodies] == [True, False, False]
    assert all(b["stream"] is True for b in bodies)
    assert r1.llm_calls[-1].tokens_estimated                  # no usage chunk without them


def test_a_server_that_ignores_stream_and_answers_json():
    with FakeChatServer([reply(code_reply(), usage=(10, 20))], streaming="ignore") as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 1
    assert r.code == SIMPLE_PIPELINE
    assert (r.llm_calls[0].tokens_in, r.llm_calls[0].tokens_out) == (10, 20)


def test_streaming_can_be_switched_off():
    with FakeChatServer([reply(code_reply())]) as srv:
        r = make_coder(srv, stream=False).draft(ctx())
        assert "stream" not in srv.chat_requests[0].body
    assert r.code is not None


def test_a_stream_that_stalls_is_sent_again(monkeypatch):
    monkeypatch.setattr("engine.coders.llm.client.RESEND_DELAYS", (0.01,))
    chunks = deltas_of(code_reply(), 10)
    with FakeChatServer([stalled_stream(chunks, stall_after=3), streamed(chunks)]) as srv:
        r = make_coder(srv, timeout=0.5).draft(ctx())
        assert len(srv.chat_requests) == 2
    assert r.code == SIMPLE_PIPELINE
    first = r.llm_calls[0]
    assert not first.ok and "stalled" in first.error
    assert first.reply and "".join(chunks).startswith(first.reply) and first.tokens_estimated


# -- the time budget ---------------------------------------------------------------------------

def test_budget_holds_against_a_server_that_never_answers():
    budget = 1.5
    with FakeChatServer(default=slow(60)) as srv:
        coder = make_coder(srv, timeout=30, max_retries=5, call_budget_s=budget)
        t0 = time.monotonic()
        r = coder.draft(ctx())
        elapsed = time.monotonic() - t0
    assert elapsed < 3 * budget
    assert r.code is None and "over its time budget of 1.5 s" in r.error
    assert "--llm-call-budget" in r.error
    assert r.llm_calls and not r.llm_calls[-1].ok and "time budget" in r.llm_calls[-1].error


def test_budget_holds_against_a_server_that_answers_500_forever():
    budget = 2.0
    with FakeChatServer(default=error(500, "model crashed")) as srv:
        coder = make_coder(srv, max_retries=100, call_budget_s=budget)
        t0 = time.monotonic()
        r = coder.draft(ctx())
        elapsed = time.monotonic() - t0
        sent = len(srv.chat_requests)
        time.sleep(0.6)                            # the worker sends nothing after the budget
        assert len(srv.chat_requests) == sent
    assert elapsed < 3 * budget and sent >= 2
    assert r.code is None and "over its time budget of 2 s" in r.error
    assert "server error (500): model crashed" in r.error     # what went wrong last
    assert all(not c.ok for c in r.llm_calls) and len(r.llm_calls) == sent
    assert "time budget" in r.llm_calls[-1].error                # the record says why it ended


def test_budget_cuts_a_reply_that_streams_too_long():
    chunks = deltas_of(code_reply(), 40)
    with FakeChatServer([stalled_stream(chunks, stall_after=5)]) as srv:
        coder = make_coder(srv, timeout=30, call_budget_s=1.0)
        t0 = time.monotonic()
        r = coder.draft(ctx())
        assert time.monotonic() - t0 < 3
    assert r.code is None and "time budget" in r.error and "still coming" in r.error
    call = r.llm_calls[-1]
    assert not call.ok and call.reply and call.tokens_estimated and call.tokens_out > 0


# -- completion caps ---------------------------------------------------------------------------

def test_max_tokens_is_sent_per_role_by_default():
    with FakeChatServer([reply(code_reply()), tool_review(False, "ok", 0.7)]) as srv:
        coder = make_coder(srv)
        coder.draft(ctx())
        coder.review(ctx(), node())
        draft, review = (q.body for q in srv.chat_requests)
    assert draft["max_tokens"] == 4096 and review["max_tokens"] == 512


def test_max_tokens_overridable_and_switchable_off():
    with FakeChatServer([reply(code_reply()), tool_review(False, "ok", 0.7)] * 2) as srv:
        coder = make_coder(srv, max_tokens=1500, review_max_tokens=64)
        coder.draft(ctx())
        coder.review(ctx(), node())
        coder = make_coder(srv, max_tokens=0, review_max_tokens=0)
        coder.draft(ctx())
        coder.review(ctx(), node())
        bodies = [q.body for q in srv.chat_requests]
    assert [b.get("max_tokens") for b in bodies] == [1500, 64, None, None]
    assert not any("max_completion_tokens" in b for b in bodies)


def test_truncation_names_the_cap_to_raise():
    with FakeChatServer([truncated("Plan.\n```python\nimport os\n")]) as srv:
        r = make_coder(srv, max_tokens=100).draft(ctx())
    assert "completion cap of 100 tokens" in r.error and "--max-tokens" in r.error


def test_a_reply_stuck_repeating_a_line_is_stopped_and_asked_again():
    """The 1.5B model once wrote `X = np.vstack((X, np.zeros_like(X)))` until its 4,096-token cap
    (30 min at 2 tokens/s). The stream is stopped after 30 identical lines, recorded as such, and
    the same prompt is sampled again; a healthy reply after it is taken."""
    loop = ["Plan.\n```python\ndef features(X):\n"] + ["    X = np.vstack((X, np.zeros_like(X)))\n"] * 400
    good = code_reply("Balanced LR.")
    with FakeChatServer([streamed(loop, delay=0.002), reply(good)]) as srv:
        r = make_coder(srv).draft(ctx())
        sent = len(srv.chat_requests)
    assert sent == 2 and r.code is not None and r.error is None
    stopped = r.llm_calls[0]
    assert not stopped.ok and "the same line over and over" in stopped.error and "np.vstack" in stopped.error
    assert stopped.reply.count("np.vstack") == 30            # stopped at the 30th, not at the cap
    assert r.llm_calls[1].ok and r.llm_calls[1].reply == good


def test_a_short_cycle_is_a_loop_and_ordinary_code_is_not():
    from engine.coders.llm.replies import repeating_tail

    assert repeating_tail("a = 1\nb = 2\n" * 15) is not None and "2 lines" in repeating_tail("a = 1\nb = 2\n" * 15)
    assert repeating_tail("x = 1\n" * 29) is None                        # not yet 30
    assert repeating_tail("\n" * 50) is None                              # blank lines are not code
    code = "".join(f"    w{i} = X[:, {i}].mean()\n" for i in range(60))  # similar lines, all different
    assert repeating_tail(code) is None
    # the 1.5B model in an improve step: the same 6 import lines over and over, to its cap
    imports = "".join(f"from sklearn.metrics import {n}\n" for n in
                      ("roc_auc_score", "confusion_matrix", "classification_report", "f1_score", "roc_curve", "auc"))
    assert repeating_tail(imports * 5) is not None and "6 lines" in repeating_tail(imports * 5)
    assert repeating_tail(imports * 4) is None                            # 24 lines: not yet 30
    block = "".join(f"    step_{i}()\n" for i in range(10))
    assert repeating_tail(block * 3) is None                              # a block three times is not a loop
    assert repeating_tail(block * 4) is not None


# -- what the agent was told and answered ------------------------------------------------------

def test_messages_and_reply_are_recorded_for_every_call():
    text = code_reply("Balanced LR.")
    with FakeChatServer([reply(text), error(400, "Invalid request: bad things")]) as srv:
        coder = make_coder(srv)
        ok = coder.draft(ctx())
        bad = coder.draft(ctx())
        sent = [q.body["messages"] for q in srv.chat_requests]
    good = ok.llm_calls[0]
    assert good.messages == sent[0] and [m["role"] for m in good.messages] == ["system", "user"]
    assert good.reply == text
    failed = bad.llm_calls[0]
    assert not failed.ok and failed.reply == "" and failed.messages == sent[1]
    assert "request rejected (400): Invalid request: bad things" in failed.error


# -- servers that are not OpenAI-compatible -----------------------------------------------------

@pytest.mark.parametrize("answer,status,ctype,head", [
    (html_page(200), 200, "text/html", "<!DOCTYPE html> <html>"),
    (html_page(404, "404 Not Found"), 404, "text/html", "404 Not Found"),
    (other_json(), 200, "application/json", '"model": "llama3"'),
    (other_json({"detail": None, "routes": ["/api/chat"]}, status=404), 404, "application/json",
     "routes"),
    # a web framework's 404 (e.g. vLLM or LiteLLM reached without /v1)
    (other_json({"detail": "Not Found"}, status=404), 404, "application/json", "Not Found"),
])
def test_not_openai_compatible_gives_one_clear_line_and_no_retry(answer, status, ctype, head):
    with FakeChatServer([answer] * 4) as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 1                  # not retried
        url = srv.base_url
    assert r.code is None and "\n" not in r.error
    assert f"the server at {url} does not look OpenAI-compatible" in r.error
    assert f"answered {status} ({ctype})" in r.error and head in r.error
    assert "--base-url" in r.error


def test_plain_text_body_is_not_openai_compatible():
    from tests.fakes.chat_server import garbage

    with FakeChatServer([garbage("not json at all", content_type="text/plain")] * 3) as srv:
        r = make_coder(srv).draft(ctx())
        assert len(srv.chat_requests) == 1
    assert "does not look OpenAI-compatible" in r.error and "'not json at all'" in r.error


def test_a_plain_web_server_is_not_openai_compatible(tmp_path):
    (tmp_path / "index.html").write_text("<html>files</html>")
    httpd = ThreadingHTTPServer(("127.0.0.1", 0),
                                partial(SimpleHTTPRequestHandler, directory=str(tmp_path)))
    httpd.RequestHandlerClass.log_message = lambda *a: None
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        t0 = time.monotonic()
        r = make_coder(url).draft(ctx())
        assert time.monotonic() - t0 < 2                    # 501 is not retried either
    finally:
        httpd.shutdown()
        httpd.server_close()
    assert f"the server at {url} does not look OpenAI-compatible" in r.error
    assert "answered 501 (text/html)" in r.error and "<title>Error response</title>" in r.error


def test_an_openai_style_404_is_an_api_error_not_incompatibility():
    vllm = other_json({"object": "error", "message": "The model `m` does not exist.",
                       "type": "NotFoundError", "code": 404}, status=404)
    with FakeChatServer([error(404, "The model `gpt-9` does not exist", code="model_not_found"),
                         vllm]) as srv:
        r = make_coder(srv, model="gpt-9").draft(ctx())
        r2 = make_coder(srv, model="m").draft(ctx())
    assert "request rejected (404): model_not_found: The model `gpt-9` does not exist" in r.error
    assert "request rejected (404): The model `m` does not exist." in r2.error
    assert "OpenAI-compatible" not in r.error + r2.error
