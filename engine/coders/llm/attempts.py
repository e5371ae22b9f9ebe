"""One LLM call and its HTTP attempts: the state the client's caller thread and worker share.

A call (`CallState`) is one ChatClient.complete: the messages, a deadline, the reply so far and its
tokens' times (for StreamStats), and the LlmCall records of its attempts. An attempt (`Attempt`)
is one HTTP request the openai client sent; it closes once, as one LlmCall.
"""
from __future__ import annotations

import collections
import functools
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from engine.coders.protocol import LlmCall

STREAM_INTERVAL = 0.2            # on_stream at most five times a second
RECENT_WINDOW = 15.0             # seconds over which the current writing speed is measured

@dataclass
class ChatResult:
    ok: bool
    content: str | None = None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)   # [{name, arguments: str}]
    finish_reason: str | None = None
    error: str | None = None
    kind: str | None = None      # why it failed: timeout, rate_limit, server, http, connection,
                                 # incompatible, garbage, empty, broken, looping, refusal, truncated,
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
def stopped_error() -> type[Exception]:
    """An openai.OpenAIError: the openai client re-raises those at once, without retrying."""
    import openai

    class CallStopped(openai.OpenAIError):
        pass

    return CallStopped


class Attempt:
    """One HTTP attempt of a call, until it becomes an LlmCall."""

    def __init__(self, t0: float, timeout: float | None = None) -> None:
        self.t0 = t0
        self.timeout = timeout          # the read timeout it ran under
        self.closed = False
        self.failure: ChatResult | None = None   # set by the response hook for an error status


class CallState:
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
        self.current: Attempt | None = None
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


def seconds_text(value: float) -> str:
    return f"{value:.3g} s"


def shorten(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
