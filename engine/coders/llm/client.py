"""The LLM client: one Chat Completions call to any OpenAI-compatible server, bounded and streamed.

    client = ChatClient(LlmConfig.load({"model": "gpt-4.1-mini"}))   # env, file, flags
    result = client.complete(messages, role="draft", model="gpt-4.1-mini",
                             on_stream=..., on_progress=...)      # ChatResult; never raises
    client.cancel()          # from another thread: the calls in progress end as "cancelled"

It knows nothing of pipelines or prompts: engine.coders.llm.coder builds those.

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
to the result; the engine turns them into llm_call events. Not retried: other 4xx, quota
exhaustion, refusals, truncated replies (finish_reason "length": the same prompt would be cut
again) and servers that are not OpenAI-compatible (HTML pages, a 404 on /chat/completions, JSON
of another shape): those come back as a failed reply with a one-line error. A malformed or empty
reply is sent again (up to max_retries times, within the budget), and so is a streamed reply
stopped because it kept writing the same line (a small model's loop, which would otherwise run
to the cap: 30 minutes at 2 tokens/s).
"""
from __future__ import annotations

import math
import re
import threading
import time
from typing import Any
from collections.abc import Callable

from engine.coders.llm.attempts import (
    STREAM_INTERVAL, Attempt, CallState, ChatResult, StreamStats, seconds_text, shorten, stopped_error,
)
from engine.coders.llm.config import LlmConfig
from engine.coders.llm.replies import ReplyReader

__all__ = ["ChatClient", "ChatResult", "StreamStats"]

RESEND_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)   # before re-sending after a malformed/empty reply
# Failures our own small loop sends again (the openai client retries transport failures itself).
# A reply stuck repeating a line is stopped (replies.repeating_tail) and sampled again.
_RESENT = {"garbage", "empty", "broken", "looping"}


class ChatClient:
    """One Chat Completions call: streamed, bounded in time, every HTTP attempt accounted for."""

    def __init__(self, config: LlmConfig, client: Any = None) -> None:
        self.config = config
        self._local = threading.local()    # the CallState of the worker thread (for the HTTP hooks)
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
        self.replies = ReplyReader(config, self.base_url)
        self._inflight: set[CallState] = set()
        self._inflight_lock = threading.Lock()
        self._unsupported: set[str] = set()   # request parameters the server rejected
        self._samples = 0                     # samples asked for (the seed's offset)

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
        kwargs = self._request(messages, role, model, temperature, tools, tool_choice)
        budget = self.config.call_budget_s
        call = CallState(messages, role, model, time.monotonic() + budget if budget else math.inf)
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

    def _request(self, messages: list[dict[str, Any]], role: str, model: str, temperature: float | None,
                 tools: list[dict[str, Any]] | None, tool_choice: Any) -> dict[str, Any]:
        """The create() arguments, less those this server rejected before."""
        cfg = self.config
        kwargs: dict[str, Any] = {"model": model, "messages": messages}
        if temperature is not None and "temperature" not in self._unsupported:
            kwargs["temperature"] = temperature
        self._reseed(kwargs)
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
        return kwargs

    def _reseed(self, kwargs: dict[str, Any]) -> None:
        """The next sample's seed (config.seed + the number of samples asked for before)."""
        if self.config.seed is None or "seed" in self._unsupported:
            return
        with self._inflight_lock:
            kwargs["seed"] = self.config.seed + self._samples
            self._samples += 1

    def _conclude(self, call: CallState) -> ChatResult:
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
                    self.replies.record_locked(call, att, ok=False, error=error, reply=call.text,
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

    def _work(self, call: CallState, kwargs: dict[str, Any]) -> None:
        self._local.call = call
        try:
            result = self._run(call, kwargs)
        except Exception as exc:  # noqa: BLE001 - the caller always gets a ChatResult
            result = ChatResult(ok=False, kind="internal",
                                error=f"internal error: {type(exc).__name__}: {shorten(str(exc))}")
        finally:
            self._local.call = None
        call.finish(result)

    def _run(self, call: CallState, kwargs: dict[str, Any]) -> ChatResult:
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
                self._reseed(kwargs)   # the same seed would sample the same unusable reply
                if call.abort.wait(min(delay, max(call.remaining(), 0.0))):
                    return result
                continue
            return result

    def _once(self, call: CallState, kwargs: dict[str, Any]) -> ChatResult:
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
            return self.replies.failed_request(call, exc, started)
        return self.replies.read(call, self.replies.attempt(call, started), resp, stream)

    # -- the openai client's HTTP hooks (run in the worker thread) -----------------------------

    def _on_request(self, request: Any) -> None:
        call: CallState | None = getattr(self._local, "call", None)
        if call is None:
            return
        left = call.remaining()
        if call.abort.is_set() or left <= 0:
            raise stopped_error()(f"not sent: the call was {call.stop_reason or 'over its time budget'}")
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
                    why = f"request timed out after {seconds_text(prev.timeout)}"
                else:
                    why = f"no response (connection failed after {elapsed:.1f} s)"
                self.replies.record_locked(call, prev, ok=False, error=f"{why}; retried by the client")
            call.current = Attempt(now, read)

    def _on_response(self, response: Any) -> None:
        call: CallState | None = getattr(self._local, "call", None)
        if call is None or response.status_code < 400:
            return
        try:
            response.read()
        except Exception:  # noqa: BLE001 - classified without the body
            pass
        failure = self.replies.classify_status(response, call.remaining())
        if failure.finish_reason != "retry":
            response.headers["x-should-retry"] = "false"   # the openai client's own switch
        failure.finish_reason = None
        with call.lock:
            att = call.current
            if att is not None and not att.closed:
                att.failure = failure
                self.replies.record_locked(call, att, ok=False, error=failure.error)

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
        if re.search(r"\bseed\b", low) and "seed" in kwargs and drop("seed"):
            kwargs.pop("seed")
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
