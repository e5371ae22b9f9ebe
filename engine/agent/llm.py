"""The LLM coder: any OpenAI-compatible Chat Completions server drives the search.

    config = LlmConfig.load({"model": "gpt-4.1-mini", "base_url": None})   # env, file, flags
    if config.problem(): ...offer the offline coder...
    coder = LlmCoder(config, exec_timeout=session_config.step_timeout)
    reply = coder.draft(ctx)            # CoderReply; never raises
    review = coder.review(ctx, node)    # Review; never raises

Every HTTP attempt becomes an LlmCall (tokens from the server's usage, latency, cost from the
price table, ok/error) attached to the reply; the engine turns them into llm_call events.

The openai client runs with max_retries=0: retries are ours (`ChatClient.complete`), so that they
are visible, testable and cancellable. Retried: timeouts, connection errors, 429 (honouring
Retry-After / retry-after-ms, capped by retry_max_delay; not when the quota is exhausted), 5xx,
408/409, malformed bodies and empty replies. Not retried: other 4xx, refusals and truncated
replies (finish_reason "length": the same prompt would be cut again); those come back as a
failed reply with a clear error. A 400 that names `temperature` or `max_tokens` as unsupported
(reasoning models) is answered by resending without it (max_completion_tokens instead), once.
"""
from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

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
    "LlmCoder",
    "LlmConfig",
    "LlmConfigError",
    "build_llm_coder",
    "call_payload",
    "llm_config_for_session",
    "totals",
]


@dataclass
class ChatResult:
    ok: bool
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)   # [{name, arguments: str}]
    finish_reason: str | None = None
    error: str | None = None
    kind: str | None = None      # why it failed: timeout, rate_limit, server, http, connection,
                                 # garbage, empty, refusal, truncated, cancelled
    calls: list[LlmCall] = field(default_factory=list)


class _Retry(Exception):
    def __init__(self, kind: str, message: str, delay: float | None = None, retry: bool = True):
        super().__init__(message)
        self.kind, self.message, self.delay, self.retry = kind, message, delay, retry


class ChatClient:
    """One Chat Completions call with our own retry loop and per-attempt accounting."""

    def __init__(self, config: LlmConfig, client: Any = None,
                 sleep: Callable[[float], Any] | None = None) -> None:
        self.config = config
        if client is None:
            import openai

            client = openai.OpenAI(
                api_key=config.effective_api_key,
                base_url=config.base_url,
                timeout=config.timeout,
                max_retries=0,
            )
        self.client = client
        self._cancel = threading.Event()
        self._sleep = sleep
        self._rng = random.Random(0)
        self._unsupported: set[str] = set()   # request parameters the server rejected

    def _adapt(self, kwargs: dict[str, Any], message: str) -> bool:
        """Drop a parameter that a 400 names as unsupported (once per parameter)."""
        low = message.lower()
        if "(400)" not in low or not any(w in low for w in ("unsupported", "not supported", "does not support")):
            return False
        if "temperature" in low and "temperature" in kwargs and "temperature" not in self._unsupported:
            self._unsupported.add("temperature")
            kwargs.pop("temperature")
            return True
        if "max_tokens" in low and "max_tokens" in kwargs and "max_tokens" not in self._unsupported:
            self._unsupported.add("max_tokens")
            kwargs["max_completion_tokens"] = kwargs.pop("max_tokens")
            return True
        return False

    def cancel(self) -> None:
        """Stop waiting between retries (a stop command); the current request still finishes."""
        self._cancel.set()

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        role: str,
        model: str,
        temperature: float | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
    ) -> ChatResult:
        cfg = self.config
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if temperature is not None and "temperature" not in self._unsupported:
            kwargs["temperature"] = temperature
        if cfg.max_tokens:
            key = "max_completion_tokens" if "max_tokens" in self._unsupported else "max_tokens"
            kwargs[key] = cfg.max_tokens
        if tools:
            kwargs["tools"] = tools
            if tool_choice is not None:
                kwargs["tool_choice"] = tool_choice
        calls: list[LlmCall] = []
        last: _Retry | None = None
        attempt = 0
        while True:
            if attempt and self._cancel.is_set():
                last = _Retry("cancelled", f"cancelled while retrying after: {last.message}"
                              if last else "cancelled", retry=False)
                break
            t0 = time.monotonic()
            try:
                try:
                    resp = self.client.chat.completions.create(**kwargs)
                except Exception as exc:  # noqa: BLE001 - every failure is classified
                    raise self._classify(exc) from None
                result = self._read(resp, role, model, time.monotonic() - t0)
            except _Retry as r:
                if isinstance(r, _RetryWithCall):
                    calls.append(r.call)
                else:
                    calls.append(LlmCall(role=role, model=model, ok=False, error=r.message,
                                         latency_s=round(time.monotonic() - t0, 4)))
                last = r
                if r.kind == "http" and self._adapt(kwargs, r.message):
                    continue  # e.g. a reasoning model that rejects temperature: resend without
                if not r.retry or attempt >= cfg.max_retries:
                    break
                self._wait(r.delay if r.delay is not None else self._backoff(attempt))
                attempt += 1
                continue
            calls.extend(result.calls)
            result.calls = calls
            return result
        assert last is not None
        suffix = f" (after {len(calls)} attempts)" if len(calls) > 1 else ""
        return ChatResult(ok=False, error=last.message + suffix, kind=last.kind, calls=calls)

    # -- internals ------------------------------------------------------------------------

    def _backoff(self, attempt: int) -> float:
        base = self.config.retry_base_delay * (2 ** attempt)
        jitter = 1.0 + 0.1 * self._rng.random()
        return min(self.config.retry_max_delay, base * jitter)

    def _wait(self, delay: float) -> None:
        delay = max(0.0, min(delay, self.config.retry_max_delay))
        if self._sleep is not None:
            self._sleep(delay)
        else:
            self._cancel.wait(delay)

    def _classify(self, exc: Exception) -> _Retry:
        import openai

        if isinstance(exc, openai.APITimeoutError):
            return _Retry("timeout", f"request timed out after {self.config.timeout:g} s")
        if isinstance(exc, openai.APIConnectionError):
            cause = exc.__cause__ or exc.__context__
            detail = f": {cause}" if cause else ""
            return _Retry("connection", f"cannot reach the server{detail}")
        if isinstance(exc, openai.APIStatusError):
            status = exc.status_code
            detail = _error_detail(exc)
            if status == 429:
                if "insufficient_quota" in detail:
                    return _Retry("rate_limit", f"quota exhausted (429): {detail}", retry=False)
                return _Retry("rate_limit", f"rate limited (429): {detail}",
                              delay=_retry_after(exc.response, self.config.retry_max_delay))
            if status >= 500 or status in (408, 409):
                return _Retry("server", f"server error ({status}): {detail}",
                              delay=_retry_after(exc.response, self.config.retry_max_delay))
            return _Retry("http", f"request rejected ({status}): {detail}", retry=False)
        if isinstance(exc, (ValueError, openai.APIResponseValidationError)):
            return _Retry("garbage", f"malformed reply from the server: {_short(str(exc))}")
        return _Retry("garbage", f"unexpected error: {type(exc).__name__}: {_short(str(exc))}")

    def _read(self, resp: Any, role: str, model: str, latency: float) -> ChatResult:
        """A completed HTTP exchange -> ChatResult; raises _Retry for unusable bodies."""
        choices = getattr(resp, "choices", None)
        if isinstance(resp, (str, bytes)) or not choices:
            body = resp if isinstance(resp, (str, bytes)) else repr(resp)
            raise _Retry("garbage", f"malformed reply from the server: {_short(str(body))}")
        usage = getattr(resp, "usage", None)
        tin = int(getattr(usage, "prompt_tokens", 0) or 0) if usage is not None else 0
        tout = int(getattr(usage, "completion_tokens", 0) or 0) if usage is not None else 0
        call = LlmCall(role=role, model=model, tokens_in=tin, tokens_out=tout,
                       latency_s=round(latency, 4), cost=self.config.cost(model, tin, tout))
        choice = choices[0]
        msg = getattr(choice, "message", None)
        finish = getattr(choice, "finish_reason", None)
        content = getattr(msg, "content", None) if msg is not None else None
        if content is not None and not isinstance(content, str):
            content = str(content)
        tool_calls = []
        for tc in (getattr(msg, "tool_calls", None) or []) if msg is not None else []:
            fn = getattr(tc, "function", None)
            if fn is not None:
                tool_calls.append({"name": getattr(fn, "name", None),
                                   "arguments": getattr(fn, "arguments", None) or ""})
        refusal = getattr(msg, "refusal", None) if msg is not None else None
        result = ChatResult(ok=True, content=content, tool_calls=tool_calls,
                            finish_reason=finish, calls=[call])
        if refusal or finish == "content_filter":
            why = refusal or "the content filter stopped the reply"
            return self._failed(result, "refusal", f"the model refused: {_short(str(why))}")
        if finish == "length":
            return self._failed(result, "truncated",
                                "reply truncated at the token limit (finish_reason=length)")
        if not (content and content.strip()) and not tool_calls:
            # Counted (the server may have billed it), then retried as a transient failure.
            call.ok, call.error = False, "empty reply"
            raise _RetryWithCall("empty", "the server returned an empty reply", call)
        return result

    @staticmethod
    def _failed(result: ChatResult, kind: str, error: str) -> ChatResult:
        result.ok, result.kind, result.error = False, kind, error
        for c in result.calls:
            c.ok, c.error = False, error
        return result


class _RetryWithCall(_Retry):
    def __init__(self, kind: str, message: str, call: LlmCall):
        super().__init__(kind, message)
        self.call = call


def _error_detail(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            parts = [str(err.get(k)) for k in ("code", "message") if err.get(k)]
            if parts:
                return _short(": ".join(parts))
        return _short(json.dumps(body))
    if body:
        return _short(str(body))
    return _short(str(getattr(exc, "message", "") or exc))


def _retry_after(response: Any, cap: float) -> float | None:
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, min(cap, float(ms) / 1000))
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, min(cap, float(value)))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, min(cap, when.timestamp() - time.time()))


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


class LlmCoder:
    """The Coder protocol over an OpenAI-compatible server. Never raises from its four methods."""

    name = "openai"
    simulated = False

    def __init__(self, config: LlmConfig, *, exec_timeout: float | None = None,
                 client: Any = None, sleep: Callable[[float], Any] | None = None) -> None:
        problem = config.problem()
        if problem:
            raise LlmConfigError(problem)
        self.config = config
        self.model = config.model
        self.review_model = config.effective_review_model
        self.label = f"LLM coder ({self.model})"
        self.exec_timeout = exec_timeout
        self.chat = ChatClient(config, client=client, sleep=sleep)
        self._tools_misses = 0
        self._tools_ok = config.review_tools is not False
        self.calls: list[LlmCall] = []          # every call this coder made, in order

    # -- what the session records ---------------------------------------------------------

    def describe(self) -> dict[str, Any]:
        """For session_started's `coder` payload."""
        return {"name": self.name, "label": self.label, "simulated": self.simulated,
                "model": self.model, "review_model": self.review_model,
                "base_url": self.config.base_url}

    @property
    def total_cost(self) -> float:
        return sum(c.cost for c in self.calls)

    @property
    def total_tokens(self) -> tuple[int, int]:
        return sum(c.tokens_in for c in self.calls), sum(c.tokens_out for c in self.calls)

    def cancel(self) -> None:
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
        res = self.chat.complete(messages, **kw)
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
            "latency_s": call.latency_s, "cost": call.cost, "ok": call.ok, "error": call.error}


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
