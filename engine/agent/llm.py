"""The LLM coder: any OpenAI-compatible Chat Completions server drives the search.

    config = LlmConfig.load({"model": "gpt-4.1-mini", "base_url": None})   # env, file, flags
    if config.problem(): ...offer the offline coder...
    coder = LlmCoder(config, exec_timeout=session_config.step_timeout)
    coder.on_stream = lambda role, text: ...   # optional: the reply so far, at most 5 times/s
    coder.on_progress = lambda role, stats: ...   # optional: StreamStats (tokens, tokens/s), as often
    reply = coder.draft(ctx)            # CoderReply; never raises
    review = coder.review(ctx, node)    # Review; never raises

One call (`ChatClient.complete`) is bounded in ways that suit a slow model that streams:
- the stall timeout: the openai client's own `timeout` (per HTTP attempt; streamed, the wait for
  the next bytes, so a reply still arriving is never cut) and `max_retries` (timeouts,
  connection errors, 408/409/429/5xx, Retry-After honoured);
- a completion cap per role (`max_tokens` for draft/improve/debug, `review_max_tokens`);
- optionally, a wall-clock budget over the whole call, retries included (`call_budget_s`, off by
  default; `befair llm check` suggests one from the cap and the measured throughput): the call
  runs in a worker thread and the caller stops waiting when the budget is spent; every later HTTP
  attempt of that call is refused and each attempt's timeout is cut to what is left of it.

Replies are streamed (stream=True, with stream_options.include_usage); a server that rejects
streaming, or stream_options, is asked again without (once; remembered), and one that ignores
`stream` and answers JSON is read as JSON. Progress reaches `on_stream(role, text_so_far)` on the
calling thread. A 400 that names `temperature` or `max_tokens` as unsupported (reasoning models)
is answered by resending without it (max_completion_tokens instead), once.

Every HTTP attempt becomes an LlmCall (tokens from the server's usage, or estimated and marked so;
latency, cost from the price table, ok/error, the request's messages and the reply text) attached
to the reply; the engine turns them into llm_call events. Not retried: other 4xx, quota
exhaustion, refusals, truncated replies (finish_reason "length": the same prompt would be cut
again) and servers that are not OpenAI-compatible (HTML pages, a 404 on /chat/completions, JSON
of another shape): those come back as a failed reply with a one-line error. A malformed or empty
reply is sent again (up to max_retries times, within the budget).
"""
from __future__ import annotations

import collections
import functools
import json
import math
import re
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Callable

from engine.agent import prompts
from engine.agent.coder import CoderContext, CoderReply, LlmCall, NodeView, Review
from engine.agent.llm_config import LlmConfig, LlmConfigError
from engine.agent.response_parsing import (
    extract_code,
    extract_plan,
    metric_from_output,
    parse_json_object,
    review_from_dict,
)

__all__ = [
    "ChatClient",
    "ChatResult",
    "StreamStats",
    "LlmCoder",
    "LlmConfig",
    "LlmConfigError",
    "build_llm_coder",
    "call_payload",
    "llm_config_for_session",
    "totals",
]

STREAM_INTERVAL = 0.2            # on_stream at most five times a second
RECENT_WINDOW = 15.0             # seconds over which the current writing speed is measured
RESEND_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)   # before re-sending after a malformed/empty reply
# Failures our own small loop sends again (the openai client retries transport failures itself).
_RESENT = {"garbage", "empty", "broken"}


@dataclass
class ChatResult:
    ok: bool
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)   # [{name, arguments: str}]
    finish_reason: str | None = None
    error: str | None = None
    kind: str | None = None      # why it failed: timeout, rate_limit, server, http, connection,
                                 # incompatible, garbage, empty, broken, refusal, truncated,
                                 # budget, cancelled, internal
    calls: list[LlmCall] = field(default_factory=list)
    status: int | None = None    # the HTTP status of a rejected request
    detail: str = ""             # the server's error text (to adapt the request to it)


@dataclass(frozen=True)
class StreamStats:
    """How a streamed reply is coming: tokens so far (stream chunks that carried text: one token
    each on llama.cpp, vLLM and OpenAI), characters, seconds since the request and until the
    first token (the prompt's reading), and the writing speed since the first token."""
    tokens: int
    chars: int
    elapsed_s: float
    first_token_s: float | None
    recent_tokens_per_s: float | None = None   # over the last RECENT_WINDOW seconds (0: none came)

    @property
    def tokens_per_s(self) -> float | None:
        if self.first_token_s is None or self.tokens < 2:
            return None
        writing = self.elapsed_s - self.first_token_s
        return (self.tokens - 1) / writing if writing > 0 else None

    def payload(self) -> dict[str, Any]:
        tps = self.tokens_per_s
        recent = self.recent_tokens_per_s
        return {"chars": self.chars, "tokens": self.tokens, "elapsed_s": round(self.elapsed_s, 2),
                "first_token_s": None if self.first_token_s is None else round(self.first_token_s, 2),
                "tokens_per_s": None if tps is None else round(tps, 2),
                "recent_tokens_per_s": None if recent is None else round(recent, 2)}


@functools.lru_cache(maxsize=1)
def _stopped_error() -> type[Exception]:
    """An openai.OpenAIError: the openai client re-raises those at once, without retrying."""
    import openai

    class CallStopped(openai.OpenAIError):
        pass

    return CallStopped


class _Attempt:
    """One HTTP attempt of a call, until it becomes an LlmCall."""

    def __init__(self, t0: float, timeout: float | None = None) -> None:
        self.t0 = t0
        self.timeout = timeout          # the read timeout it ran under
        self.closed = False
        self.failure: ChatResult | None = None   # set by the response hook for an error status


class _Call:
    """The shared state of one ChatClient.complete: the caller's thread and its worker."""

    def __init__(self, messages: list[dict[str, Any]], role: str, model: str,
                 deadline: float) -> None:
        self.messages, self.role, self.model, self.deadline = messages, role, model, deadline
        self.lock = threading.Lock()
        self.wake = threading.Event()     # the worker finished, or the call was stopped
        self.abort = threading.Event()    # stop sending (budget spent, or cancelled)
        self.stop_reason: str | None = None
        self.result: ChatResult | None = None
        self.calls: list[LlmCall] = []
        self.current: _Attempt | None = None
        self.text = ""                    # the reply so far (current attempt)
        self.tokens = 0                   # stream chunks with text so far (current attempt)
        self.started = time.monotonic()   # the current attempt's request
        self.first_token: float | None = None
        self.token_times: collections.deque[float] = collections.deque(maxlen=512)
        self.server_model: str | None = None   # the model id the server's replies name
        self.frozen = False               # the caller returned: late news is dropped

    def stats(self) -> StreamStats:
        now = time.monotonic()
        first = None if self.first_token is None else self.first_token - self.started
        recent = None
        if self.first_token is not None:
            window = min(RECENT_WINDOW, now - self.first_token)
            if window >= 2.0:
                recent = sum(1 for t in self.token_times if t >= now - window) / window
        return StreamStats(tokens=self.tokens, chars=len(self.text), elapsed_s=now - self.started,
                           first_token_s=first, recent_tokens_per_s=recent)

    def stop(self, reason: str) -> None:
        with self.lock:
            if self.result is None and self.stop_reason is None:
                self.stop_reason = reason
        self.abort.set()
        self.wake.set()

    def finish(self, result: ChatResult) -> None:
        with self.lock:
            if self.result is None:
                self.result = result
        self.wake.set()

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class ChatClient:
    """One Chat Completions call: streamed, bounded in time, every HTTP attempt accounted for."""

    def __init__(self, config: LlmConfig, client: Any = None) -> None:
        self.config = config
        self._local = threading.local()    # the _Call of the worker thread (for the HTTP hooks)
        if client is None:
            import openai

            http_client = openai.DefaultHttpxClient(
                event_hooks={"request": [self._on_request], "response": [self._on_response]})
            client = openai.OpenAI(
                api_key=config.effective_api_key,
                base_url=config.base_url,
                timeout=config.timeout,
                max_retries=config.max_retries,
                http_client=http_client,
            )
        self.client = client
        self.base_url = str(getattr(client, "base_url", None) or config.base_url or "").rstrip("/")
        self._inflight: set[_Call] = set()
        self._inflight_lock = threading.Lock()
        self._unsupported: set[str] = set()   # request parameters the server rejected

    # -- the call ---------------------------------------------------------------------------

    def cancel(self) -> None:
        """Stop the calls in progress now (each ends as kind "cancelled"); later calls run."""
        with self._inflight_lock:
            calls = list(self._inflight)
        for call in calls:
            call.stop("cancelled")

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        role: str,
        model: str,
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        on_stream: Callable[[str, str], Any] | None = None,
        on_progress: Callable[[str, StreamStats], Any] | None = None,
    ) -> ChatResult:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if temperature is not None and "temperature" not in self._unsupported:
            kwargs["temperature"] = temperature
        cap = cfg.max_tokens_for(role)
        if cap:
            key = "max_completion_tokens" if "max_tokens" in self._unsupported else "max_tokens"
            kwargs[key] = cap
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        if cfg.stream and "stream" not in self._unsupported:
            kwargs["stream"] = True
            if "stream_options" not in self._unsupported:
                kwargs["stream_options"] = {"include_usage": True}

        budget = cfg.call_budget_s
        call = _Call(messages, role, model, time.monotonic() + budget if budget else math.inf)
        with self._inflight_lock:
            self._inflight.add(call)
        worker = threading.Thread(target=self._work, args=(call, kwargs), daemon=True,
                                  name=f"befair-llm-{role}")
        worker.start()
        shown = ""
        try:
            while True:
                left = call.remaining()
                if left <= 0:
                    call.stop("budget")
                if call.wake.wait(min(max(left, 0.0), STREAM_INTERVAL)) or left <= 0:
                    break
                if on_stream is not None and call.text != shown:
                    shown = _notify(on_stream, role, call.text)
                if on_progress is not None and call.tokens:
                    _notify(on_progress, role, call.stats())
        except BaseException:
            call.stop("cancelled")     # e.g. KeyboardInterrupt: the worker must not go on
            raise
        finally:
            with self._inflight_lock:
                self._inflight.discard(call)
        result = self._conclude(call)
        if on_stream is not None and call.text and call.text != shown:
            _notify(on_stream, role, call.text)
        if on_progress is not None and call.tokens:
            _notify(on_progress, role, call.stats())
        return result

    def _conclude(self, call: _Call) -> ChatResult:
        """The caller's verdict: the worker's result, or the stop (budget, cancel)."""
        with call.lock:
            result = call.result
            if result is None or (call.stop_reason and not result.ok):
                if call.stop_reason == "cancelled":
                    error = "cancelled: the call was stopped while it waited for the server"
                else:
                    last = call.calls[-1].error if call.calls and call.calls[-1].error else None
                    doing = (f"the reply was still coming ({len(call.text)} characters so far)"
                             if call.text else f"last: {last}" if last else "no reply yet")
                    error = (f"the call went over its time budget of {self.config.call_budget_s:g} s "
                             f"(call_budget_s / --llm-call-budget; {doing})")
                att = call.current
                if att is not None and not att.closed:
                    self._record_locked(call, att, ok=False, error=error, reply=call.text,
                                        estimate=bool(call.text))
                elif call.calls and call.result is None:
                    # stopped between attempts (a backoff): the last attempt's record says so
                    last_call = call.calls[-1]
                    last_call.error = f"{last_call.error or 'ok'}; then {error}"
                result = ChatResult(ok=False, error=error, kind=call.stop_reason or "budget")
            call.frozen = True
            result.calls = list(call.calls)
        if not result.ok and len(result.calls) > 1 and result.error:
            result.error += f" (after {len(result.calls)} attempts)"
        return result

    # -- the worker thread ------------------------------------------------------------------

    def _work(self, call: _Call, kwargs: dict[str, Any]) -> None:
        self._local.call = call
        try:
            result = self._run(call, kwargs)
        except Exception as exc:  # noqa: BLE001 - the caller always gets a ChatResult
            result = ChatResult(ok=False, kind="internal",
                                error=f"internal error: {type(exc).__name__}: {_short(str(exc))}")
        finally:
            self._local.call = None
        call.finish(result)

    def _run(self, call: _Call, kwargs: dict[str, Any]) -> ChatResult:
        resent = 0
        while True:
            result = self._once(call, kwargs)
            if result.ok or call.abort.is_set():
                return result
            if result.kind == "http" and self._adapt(kwargs, result.status, result.detail):
                continue  # e.g. a reasoning model that rejects temperature: resend without
            if result.kind in _RESENT and resent < self.config.max_retries:
                delay = RESEND_DELAYS[min(resent, len(RESEND_DELAYS) - 1)]
                resent += 1
                if call.abort.wait(min(delay, max(call.remaining(), 0.0))):
                    return result
                continue
            return result

    def _once(self, call: _Call, kwargs: dict[str, Any]) -> ChatResult:
        """One request through the openai client (which may retry it) -> ChatResult."""
        started = time.monotonic()
        with call.lock:
            call.current = None
            call.text = ""
            call.tokens, call.started, call.first_token = 0, started, None
            call.token_times.clear()
        stream = bool(kwargs.get("stream"))
        try:
            if stream:
                resp = self.client.chat.completions.create(**kwargs)
            else:
                resp = self.client.chat.completions.with_raw_response.create(**kwargs)
        except Exception as exc:  # noqa: BLE001 - every failure is classified
            return self._failed_request(call, exc, started)
        att = self._attempt(call, started)
        http: Any  # the httpx response; None makes .read() raise, which _failed_read reports
        if stream:
            http = getattr(resp, "response", None)
        else:
            http = getattr(resp, "http_response", None)
        status = int(getattr(http, "status_code", 200) or 200)
        ctype = _content_type(getattr(http, "headers", None))
        try:
            if stream and (not ctype or "event-stream" in ctype):
                return self._read_stream(call, att, resp)
            body = http.read() if stream else (http.content if http is not None else b"")
        except Exception as exc:  # noqa: BLE001
            return self._failed_read(call, att, exc)
        return self._read_body(call, att, status, ctype, body)

    # -- reading replies ----------------------------------------------------------------------

    def _read_stream(self, call: _Call, att: _Attempt, stream: Any) -> ChatResult:
        content = ""
        refusal: list[str] = []
        tools: dict[int, dict[str, Any]] = {}
        finish = None
        usage = None
        events = 0
        try:
            for chunk in stream:
                if call.abort.is_set():
                    _close(stream)
                    return ChatResult(ok=False, kind=call.stop_reason or "budget",
                                      error="stopped while the reply was streaming")
                events += 1
                usage = _get(chunk, "usage") or usage
                if call.server_model is None and _get(chunk, "model"):
                    call.server_model = str(_get(chunk, "model"))
                choices = _get(chunk, "choices") or []
                if not choices:
                    continue
                choice = choices[0]
                finish = _get(choice, "finish_reason") or finish
                delta = _get(choice, "delta") or {}
                piece = _get(delta, "content")
                if piece:
                    content += str(piece)
                if piece or _get(delta, "tool_calls"):
                    call.tokens += 1
                    call.token_times.append(time.monotonic())
                    if call.first_token is None:
                        call.first_token = call.token_times[-1]
                piece = _get(delta, "refusal")
                if piece:
                    refusal.append(str(piece))
                for tc in _get(delta, "tool_calls") or []:
                    index = _get(tc, "index")
                    slot = tools.setdefault(index if isinstance(index, int) else len(tools),
                                            {"name": None, "arguments": ""})
                    fn = _get(tc, "function") or {}
                    if _get(fn, "name"):
                        slot["name"] = _get(fn, "name")
                    if _get(fn, "arguments"):
                        slot["arguments"] += str(_get(fn, "arguments"))
                call.text = _render(content, [tools[k] for k in sorted(tools)]) if tools else content
        except Exception as exc:  # noqa: BLE001 - a stream cut short, or an error event
            return self._failed_read(call, att, exc)
        if not events:
            return self._fail(call, att, "garbage", "the server sent an empty event stream")
        return self._reply(call, att, content, [tools[k] for k in sorted(tools)],
                           finish, "".join(refusal) or None, usage)

    def _read_body(self, call: _Call, att: _Attempt, status: int, ctype: str,
                   body: bytes | str) -> ChatResult:
        text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else str(body)
        if "json" not in ctype and ctype:
            return self._fail(call, att, "incompatible",
                              self._incompatible(status, ctype, text), status=status)
        try:
            data = json.loads(text)
        except ValueError:
            return self._fail(call, att, "garbage",
                              f"malformed reply from the server: {_short(text, 100)}")
        if not isinstance(data, dict) or "choices" not in data:
            if isinstance(data, dict) and data.get("error"):
                detail = _error_text(data)
                return self._fail(call, att, "http", f"the server answered an error: {detail}",
                                  status=status, detail=detail)
            return self._fail(call, att, "incompatible",
                              self._incompatible(status, ctype or "no content type", text))
        choices = data.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            return self._fail(call, att, "garbage",
                              f"malformed reply from the server (no choices): {_short(text, 100)}")
        choice = choices[0]
        if data.get("model"):
            call.server_model = str(data["model"])
        raw_msg = choice.get("message")
        msg: dict[str, Any] = raw_msg if isinstance(raw_msg, dict) else {}
        content = msg.get("content")
        tool_calls = []
        for tc in msg.get("tool_calls") or []:
            fn = tc.get("function") if isinstance(tc, dict) else None
            if isinstance(fn, dict):
                args = fn.get("arguments")
                tool_calls.append({"name": fn.get("name"), "arguments": args
                                   if isinstance(args, str) else json.dumps(args or "")})
        call.text = _render(content if isinstance(content, str) else "", tool_calls)
        return self._reply(call, att, content if isinstance(content, str) else
                           ("" if content is None else str(content)), tool_calls,
                           choice.get("finish_reason"), msg.get("refusal"), data.get("usage"))

    def _reply(self, call: _Call, att: _Attempt, content: str, tool_calls: list[dict[str, Any]],
               finish: Any, refusal: Any, usage: Any) -> ChatResult:
        """A complete reply -> ChatResult, and its LlmCall."""
        tin = _int(_get(usage, "prompt_tokens")) if usage is not None else None
        tout = _int(_get(usage, "completion_tokens")) if usage is not None else None
        reply_text = _render(content, tool_calls)
        estimate = tin is None or tout is None
        result = ChatResult(ok=True, content=content, tool_calls=tool_calls,
                            finish_reason=finish)
        if refusal or finish == "content_filter":
            why = refusal or "the content filter stopped the reply"
            result.ok, result.kind = False, "refusal"
            result.error = f"the model refused: {_short(str(why))}"
        elif finish == "length":
            cap = self.config.max_tokens_for(call.role)
            where = (f"the completion cap of {cap} tokens ({LlmConfig.cap_setting(call.role)})"
                     if cap else "the server's token limit")
            result.ok, result.kind = False, "truncated"
            result.error = f"reply truncated at {where} (finish_reason=length)"
        elif not content.strip() and not tool_calls:
            result.ok, result.kind = False, "empty"
            result.error = "the server returned an empty reply"
        self._record(call, att, ok=result.ok,
                     error=None if result.ok else ("empty reply" if result.kind == "empty"
                                                   else result.error),
                     reply=reply_text, estimate=estimate, tokens=(tin, tout))
        return result

    # -- failures -----------------------------------------------------------------------------

    def _failed_request(self, call: _Call, exc: Exception, started: float) -> ChatResult:
        """The openai client raised (after its own retries)."""
        import openai

        att = self._attempt(call, started)
        if isinstance(exc, _stopped_error()):
            return ChatResult(ok=False, kind=call.stop_reason or "budget", error=str(exc))
        if isinstance(exc, openai.APITimeoutError):
            return self._fail(call, att, "timeout", f"request timed out after "
                              f"{_secs(att.timeout or self.config.timeout)}")
        if isinstance(exc, openai.APIConnectionError):
            cause = _root_cause(exc)
            if isinstance(cause, _stopped_error()):
                return ChatResult(ok=False, kind=call.stop_reason or "budget", error=str(cause))
            detail = f": {_short(str(cause), 160)}" if cause is not None else ""
            return self._fail(call, att, "connection",
                              f"cannot reach the server at {self.base_url}{detail}")
        if isinstance(exc, openai.APIStatusError):
            if att.failure is not None:          # the response hook classified it
                failure = att.failure
                failure.calls = []
                return failure
            response = getattr(exc, "response", None)
            failure = self._classify_status(response, call.remaining())
            return self._fail(call, att, failure.kind or "http", failure.error or str(exc),
                              status=failure.status, detail=failure.detail)
        if isinstance(exc, (ValueError, openai.APIResponseValidationError)):
            return self._fail(call, att, "garbage",
                              f"malformed reply from the server: {_short(str(exc), 100)}")
        return self._fail(call, att, "garbage",
                          f"unexpected error: {type(exc).__name__}: {_short(str(exc))}")

    def _failed_read(self, call: _Call, att: _Attempt, exc: Exception) -> ChatResult:
        """Reading the body failed half-way (a stream cut short, or an error event in it)."""
        import openai

        if call.abort.is_set():
            return ChatResult(ok=False, kind=call.stop_reason or "budget",
                              error="stopped while the reply was coming")
        if isinstance(exc, openai.APITimeoutError):
            return self._fail(call, att, "broken", "the reply stalled: no data for "
                              f"{_secs(att.timeout or self.config.timeout)}", partial=True)
        if isinstance(exc, openai.APIConnectionError):
            return self._fail(call, att, "broken", "the connection broke while the reply was "
                              f"coming: {_short(str(_root_cause(exc) or exc), 160)}", partial=True)
        if isinstance(exc, openai.APIError):
            detail = _error_text(getattr(exc, "body", None)) or _short(str(exc))
            return self._fail(call, att, "server", f"the server reported an error in the "
                              f"stream: {detail}", partial=True)
        if isinstance(exc, ValueError):
            return self._fail(call, att, "garbage", "malformed data in the reply stream: "
                              f"{_short(str(exc), 100)}", partial=True)
        return self._fail(call, att, "garbage",
                          f"unexpected error: {type(exc).__name__}: {_short(str(exc))}")

    def _fail(self, call: _Call, att: _Attempt, kind: str, error: str, *, status: int | None = None,
              detail: str = "", partial: bool = False) -> ChatResult:
        reply = call.text if partial else ""
        self._record(call, att, ok=False, error=error, reply=reply, estimate=bool(reply))
        return ChatResult(ok=False, kind=kind, error=error, status=status, detail=detail,
                          content=reply or None)

    def _classify_status(self, response: Any, remaining: float) -> ChatResult:
        """An error status -> a failed ChatResult with kind, one-line error and the server's text.

        `retry` on the result says whether the openai client may retry it."""
        status = int(getattr(response, "status_code", 0) or 0)
        headers = getattr(response, "headers", None)
        ctype = _content_type(headers)
        try:
            text = response.text if response is not None else ""
        except Exception:  # noqa: BLE001 - a body that cannot be read
            text = ""
        data: Any = None
        if "json" in ctype or text.lstrip().startswith("{"):
            try:
                data = json.loads(text)
            except ValueError:
                data = None
        # An error in the API's shape ({"error": ...}; vLLM's {"message": ...}). A bare 404/405
        # {"detail": "Not Found"} is a web framework's: the path is wrong.
        api_error = isinstance(data, dict) and bool(
            data.get("error") or data.get("message")
            or (status not in (404, 405) and data.get("detail")))
        detail = _error_text(data) if api_error else _short(text, 100)
        wait = _retry_after(headers)
        res = ChatResult(ok=False, status=status, detail=detail)
        retry = True
        if (400 <= status < 500 and status not in (408, 409, 429) or status == 501) and not api_error:
            res.kind, res.error, retry = "incompatible", self._incompatible(status, ctype, text), False
        elif status == 429:
            if "insufficient_quota" in text or "quota" in detail.lower() and "exceeded" in detail.lower():
                res.kind, res.error, retry = "rate_limit", f"quota exhausted (429): {detail}", False
            else:
                res.kind, res.error = "rate_limit", f"rate limited (429): {detail}"
        elif status >= 500 or status in (408, 409):
            res.kind, res.error = "server", f"server error ({status}): {detail}"
        else:
            res.kind, res.error, retry = "http", f"request rejected ({status}): {detail}", False
        if retry and wait is not None and wait > remaining:
            res.error += (f"; the server asks to wait {wait:g} s, more than the {max(remaining, 0):.0f} s "
                          "left of this call's time budget")
            retry = False
        res.finish_reason = "retry" if retry else None
        return res

    def _incompatible(self, status: int, ctype: str, text: str) -> str:
        head = " ".join(text.split())[:100]
        return (f"the server at {self.base_url} does not look OpenAI-compatible: POST "
                f"/chat/completions answered {status} ({ctype or 'no content type'}): {head!r}; "
                "check --base-url (OpenAI-compatible servers usually end in /v1)")

    # -- the openai client's HTTP hooks (run in the worker thread) -----------------------------

    def _on_request(self, request: Any) -> None:
        call: _Call | None = getattr(self._local, "call", None)
        if call is None:
            return
        left = call.remaining()
        if call.abort.is_set() or left <= 0:
            raise _stopped_error()(f"not sent: the call was {call.stop_reason or 'over its time budget'}")
        timeout = request.extensions.get("timeout")
        read = self.config.timeout
        if isinstance(timeout, dict):
            capped = {k: (left if v is None else min(float(v), left)) for k, v in timeout.items()}
            request.extensions = {**request.extensions, "timeout": capped}
            read = capped.get("read") or read
        now = time.monotonic()
        with call.lock:
            prev = call.current
            if prev is not None and not prev.closed:   # the client retried: it got no response
                elapsed = now - prev.t0
                if prev.timeout and elapsed >= 0.9 * prev.timeout:
                    why = f"request timed out after {_secs(prev.timeout)}"
                else:
                    why = f"no response (connection failed after {elapsed:.1f} s)"
                self._record_locked(call, prev, ok=False, error=f"{why}; retried by the client")
            call.current = _Attempt(now, read)

    def _on_response(self, response: Any) -> None:
        call: _Call | None = getattr(self._local, "call", None)
        if call is None or response.status_code < 400:
            return
        try:
            response.read()
        except Exception:  # noqa: BLE001 - classified without the body
            pass
        failure = self._classify_status(response, call.remaining())
        if failure.finish_reason != "retry":
            response.headers["x-should-retry"] = "false"   # the openai client's own switch
        failure.finish_reason = None
        with call.lock:
            att = call.current
            if att is not None and not att.closed:
                att.failure = failure
                self._record_locked(call, att, ok=False, error=failure.error)

    # -- accounting -----------------------------------------------------------------------------

    def _attempt(self, call: _Call, started: float) -> _Attempt:
        """The attempt the hooks opened, or one from `started` (a client without our hooks)."""
        with call.lock:
            if call.current is None:
                call.current = _Attempt(started, self.config.timeout)
            return call.current

    def _record(self, call: _Call, att: _Attempt, **kw: Any) -> None:
        with call.lock:
            self._record_locked(call, att, **kw)

    def _record_locked(self, call: _Call, att: _Attempt, *, ok: bool, error: str | None,
                       reply: str = "", estimate: bool = False,
                       tokens: tuple[int | None, int | None] = (None, None)) -> None:
        if att.closed or call.frozen:
            return
        att.closed = True
        tin, tout = tokens
        estimated = False
        if tin is None or tout is None:
            if estimate:
                tin, tout, estimated = _estimate_in(call.messages), _estimate_out(reply), True
            else:
                tin, tout = 0, 0
        stats = call.stats() if call.tokens else None
        call.calls.append(LlmCall(
            role=call.role, model=call.model, tokens_in=tin, tokens_out=tout,
            latency_s=round(time.monotonic() - att.t0, 4),
            cost=self.config.cost(call.model, tin, tout), ok=ok, error=error,
            tokens_estimated=estimated, messages=call.messages, reply=reply,
            first_token_s=None if stats is None or stats.first_token_s is None else round(stats.first_token_s, 2),
            tokens_per_s=None if stats is None or stats.tokens_per_s is None else round(stats.tokens_per_s, 2),
            server_model=call.server_model))

    # -- adapting the request to the server ----------------------------------------------------

    def _adapt(self, kwargs: dict[str, Any], status: int | None, detail: str) -> bool:
        """Drop or rename a parameter that a 400/422 names as unsupported (once per parameter)."""
        if status not in (400, 422):
            return False
        low = detail.lower()
        if not any(w in low for w in ("unsupported", "not supported", "does not support",
                                      "unrecognized", "unknown", "not permitted", "not allowed")):
            return False

        def drop(name: str) -> bool:
            if name in self._unsupported:
                return False
            self._unsupported.add(name)
            return True

        if "stream_options" in low and "stream_options" in kwargs and drop("stream_options"):
            kwargs.pop("stream_options")
            return True
        if "temperature" in low and "temperature" in kwargs and drop("temperature"):
            kwargs.pop("temperature")
            return True
        if "max_tokens" in low and "max_tokens" in kwargs and drop("max_tokens"):
            kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
            return True
        if re.search(r"\bstream(ing)?\b", low) and kwargs.get("stream") and drop("stream"):
            kwargs.pop("stream")
            kwargs.pop("stream_options", None)
            return True
        return False


def _notify(hook: Callable[[str, Any], Any], role: str, news: Any) -> Any:
    try:
        hook(role, news)
    except Exception:  # noqa: BLE001 - a display hook never breaks a call
        pass
    return news


def _get(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _int(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except (TypeError, ValueError):
        return None


def _render(content: str, tool_calls: list[dict[str, Any]]) -> str:
    """The reply as text: its content, then one `name(arguments)` line per tool call."""
    lines = [content] if content else []
    lines += [f"{tc.get('name') or '?'}({tc.get('arguments') or ''})" for tc in tool_calls]
    return "\n".join(lines)


def _estimate_in(messages: list[dict[str, Any]]) -> int:
    chars = sum(len(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
    return chars // 4 + 4 * len(messages) + 1


def _estimate_out(text: str) -> int:
    return len(text) // 4 + 1 if text else 0


def _close(stream: Any) -> None:
    try:
        stream.close()
    except Exception:  # noqa: BLE001
        pass


def _content_type(headers: Any) -> str:
    if headers is None:
        return ""
    try:
        return str(headers.get("content-type") or "").split(";")[0].strip().lower()
    except Exception:  # noqa: BLE001
        return ""


def _root_cause(exc: BaseException) -> BaseException | None:
    seen = set()
    cause = exc.__cause__ or exc.__context__
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, _stopped_error()):
            return cause
        nxt = cause.__cause__ or cause.__context__
        if nxt is None:
            return cause
        cause = nxt
    return cause


def _secs(value: float) -> str:
    return f"{value:.3g} s"


def _error_text(data: Any) -> str:
    """The message of an error body: {"error": {"code", "message"}}, {"error": "..."}, ..."""
    if not isinstance(data, dict):
        return _short(str(data)) if data else ""
    err = data.get("error", data)
    if isinstance(err, dict):
        parts = [str(err.get(k)) for k in ("code", "message")
                 if err.get(k) and not isinstance(err.get(k), int)]   # not vLLM's code: 404
        if parts:
            return _short(": ".join(parts))
        if err.get("detail"):
            return _short(str(err["detail"]))
    elif err:
        return _short(str(err))
    return _short(json.dumps(data))


def _retry_after(headers: Any) -> float | None:
    """Seconds a server asks the client to wait (retry-after-ms, retry-after), if any."""
    if headers is None:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value:
            try:
                seconds = float(value) / scale
            except ValueError:
                continue
            return seconds if math.isfinite(seconds) else None
    value = headers.get("retry-after")
    if value:
        import email.utils

        try:
            return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return None


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LlmCoder:
    """The Coder protocol over an OpenAI-compatible server. Never raises from its four methods."""

    name = "openai"
    simulated = False

    def __init__(self, config: LlmConfig, *, exec_timeout: float | None = None,
                 client: Any = None) -> None:
        problem = config.problem()
        if problem:
            raise LlmConfigError(problem)
        self.config = config
        self.model = config.model
        self.review_model = config.effective_review_model
        self.label = f"LLM coder ({self.model})"
        self.exec_timeout = exec_timeout
        self.chat = ChatClient(config, client=client)
        self._tools_misses = 0
        self._tools_ok = config.review_tools is not False
        self.calls: list[LlmCall] = []          # every call this coder made, in order
        # Set by the runner to show a reply while it streams: on_stream(role, reply text so far),
        # called on the coder's thread at most ~5 times a second (and once with the whole reply).
        self.on_stream: Callable[[str, str], None] | None = None
        # Set by the runner for the status line: on_progress(role, StreamStats), as often.
        self.on_progress: Callable[[str, StreamStats], None] | None = None
        self._server: dict[str, Any] | None = None

    # -- what the session records ---------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """For session_started's `coder` payload: what was asked for, and what the server says
        it serves (its model ids; for a local llama.cpp GGUF, the file and its SHA-256 when known)."""
        if self._server is None:
            from engine.agent.llm_check import server_identity

            self._server = server_identity(self.config)
        return {"name": self.name, "label": self.label, "simulated": self.simulated,
                "model": self.model, "review_model": self.review_model,
                "base_url": self.config.base_url, "server": self._server}

    @property
    def total_cost(self) -> float:
        return sum(c.cost for c in self.calls)

    @property
    def total_tokens(self) -> tuple[int, int]:
        return sum(c.tokens_in for c in self.calls), sum(c.tokens_out for c in self.calls)

    def cancel(self) -> None:
        """End the LLM call in progress now (a stop command); later calls run normally."""
        self.chat.cancel()

    # -- the Coder protocol ---------------------------------------------------------------

    def draft(self, ctx: CoderContext) -> CoderReply:
        return self._code("draft", lambda: prompts.draft_prompt(ctx, self.exec_timeout))

    def improve(self, ctx: CoderContext, parent: NodeView) -> CoderReply:
        return self._code("improve", lambda: prompts.improve_prompt(ctx, parent, self.exec_timeout))

    def debug(self, ctx: CoderContext, parent: NodeView) -> CoderReply:
        return self._code("debug", lambda: prompts.debug_prompt(ctx, parent, self.exec_timeout))

    def review(self, ctx: CoderContext, node: NodeView) -> Review:
        calls: list[LlmCall] = []
        parsed = None
        why = "no reply"
        try:
            want_json = not self._tools_ok
            if self._tools_ok:
                res = self._complete(
                    prompts.to_messages(prompts.review_prompt(ctx, node)), role="review",
                    model=self.review_model, temperature=self.config.review_temperature,
                    tools=[prompts.REVIEW_TOOL],
                    tool_choice={"type": "function", "function": {"name": "submit_review"}},
                )
                calls += res.calls
                if res.ok:
                    parsed = _review_from_tools(res.tool_calls)
                    if parsed is None:
                        self._tools_misses += 1
                        if self._tools_misses >= 2 and self.config.review_tools is None:
                            self._tools_ok = False      # the server ignores tools: go JSON
                        parsed = review_from_dict(parse_json_object(res.content or "") or {})
                    else:
                        self._tools_misses = 0
                    want_json = parsed is None
                    why = "the reply held no usable review"
                elif res.kind == "http" and self.config.review_tools is None:
                    self._tools_ok = False              # tools rejected (400/422): go JSON
                    want_json = True
                    why = res.error or why
                else:
                    why = res.error or why
            if want_json:
                res = self._complete(
                    prompts.to_messages(prompts.review_prompt(ctx, node, json_only=True)),
                    role="review", model=self.review_model,
                    temperature=self.config.review_temperature,
                )
                calls += res.calls
                if res.ok:
                    parsed = review_from_dict(parse_json_object(res.content or "") or {})
                    why = "the reply held no usable review" if parsed is None else why
                else:
                    why = res.error or why
        except Exception as exc:  # noqa: BLE001 - a review must never crash the session
            why = f"internal error: {type(exc).__name__}: {exc}"
        if parsed is not None:
            is_bug, summary, metric = parsed
            return Review(is_bug=is_bug, summary=summary or "(no summary)",
                          claimed_metric=metric, llm_calls=calls)
        output = node.output if isinstance(node.output, str) else ""
        metric = metric_from_output(output)
        is_bug = bool(node.exc_type) or node.status != "ok" or metric is None
        return Review(
            is_bug=is_bug,
            summary=f"No review from the model ({why}); judged from the execution output.",
            claimed_metric=metric,
            llm_calls=calls,
        )

    # -- internals ------------------------------------------------------------------------

    def _complete(self, messages: list[dict[str, Any]], **kw: Any) -> ChatResult:
        res = self.chat.complete(messages, on_stream=self.on_stream, on_progress=self.on_progress, **kw)
        self.calls.extend(res.calls)
        return res

    def _code(self, role: str, build: Callable[[], dict[str, Any]]) -> CoderReply:
        calls: list[LlmCall] = []
        try:
            messages = prompts.to_messages(build())
            res = self._complete(messages, role=role, model=self.model,
                                 temperature=self.config.temperature)
            calls = res.calls
            content = res.content or ""
            if not res.ok:
                return CoderReply(plan=extract_plan(content), code=None, error=res.error,
                                  llm_calls=calls)
            code = extract_code(content)
            plan = extract_plan(content)
            if code is None:
                start = _short(content, 160) if content.strip() else "(empty)"
                return CoderReply(plan=plan, code=None, llm_calls=calls,
                                  error=f"the reply held no usable Python code; it began: {start}")
            return CoderReply(plan=plan or "(the model gave no plan)", code=code, llm_calls=calls)
        except Exception as exc:  # noqa: BLE001 - a coder never raises
            return CoderReply(plan="", code=None, llm_calls=calls,
                              error=f"internal error in the LLM coder: {type(exc).__name__}: {exc}")


def _review_from_tools(tool_calls: list[dict[str, Any]]) -> tuple[bool, str, float | None] | None:
    ordered = sorted(tool_calls, key=lambda t: t.get("name") != "submit_review")
    for tc in ordered:
        args = tc.get("arguments")
        data = args if isinstance(args, dict) else parse_json_object(str(args or ""))
        if data:
            parsed = review_from_dict(data)
            if parsed is not None:
                return parsed
    return None


def call_payload(call: LlmCall, node_id: int | None) -> dict[str, Any]:
    """The payload of an llm_call event (engine/session/events.py) for one call."""
    return {"node_id": node_id, "role": call.role, "model": call.model,
            "tokens_in": call.tokens_in, "tokens_out": call.tokens_out,
            "latency_s": call.latency_s, "cost": call.cost, "ok": call.ok, "error": call.error,
            "first_token_s": call.first_token_s, "tokens_per_s": call.tokens_per_s,
            "server_model": call.server_model}


def totals(calls: list[LlmCall]) -> dict[str, float]:
    """Tokens, cost and call counts over some calls (a node's or a session's)."""
    return {
        "calls": len(calls),
        "failed_calls": sum(1 for c in calls if not c.ok),
        "tokens_in": sum(c.tokens_in for c in calls),
        "tokens_out": sum(c.tokens_out for c in calls),
        "cost": sum(c.cost for c in calls),
        "latency_s": sum(c.latency_s for c in calls),
    }


def llm_config_for_session(session_config: Any, overrides: dict[str, Any] | None = None,
                           **load_kw: Any) -> LlmConfig:
    """LlmConfig for a SessionConfig: its `model`, then extra["llm"] settings, then overrides."""
    values: dict[str, Any] = {}
    extra = getattr(session_config, "extra", None) or {}
    if isinstance(extra.get("llm"), dict):
        values.update({k: v for k, v in extra["llm"].items() if k not in ("api_key", "source")})
    if getattr(session_config, "model", None):
        values["model"] = session_config.model
    values.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return LlmConfig.load(values, **load_kw)


def build_llm_coder(
    session_config: Any = None,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    config_path: str | None = None,
    exec_timeout: float | None = None,
    client: Any = None,
    **overrides: Any,
) -> LlmCoder:
    """The coder for `befair run --coder openai --model M [--base-url U] [--api-key K]`.

    Raises LlmConfigError (a BefairError; message says how to configure one) when no server is
    configured or a setting is invalid: the caller shows it and offers the offline coder.
    """
    given = dict(overrides, model=model, base_url=base_url, api_key=api_key)
    if session_config is not None:
        config = llm_config_for_session(session_config, given, path=config_path)
        if exec_timeout is None:
            exec_timeout = getattr(session_config, "step_timeout", None)
    else:
        config = LlmConfig.load(given, path=config_path)
    return LlmCoder(config, exec_timeout=exec_timeout, client=client)
