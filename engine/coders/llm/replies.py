"""Reading what a Chat Completions server answered: a streamed or JSON reply, or a failure.

`ReplyReader` turns each HTTP attempt of a call into a ChatResult with a kind and a one-line
error, and into the attempt's LlmCall record (tokens from the server's usage, or estimated and
marked so; latency; cost from the price table). It knows how servers fail: an error status
(retried or not, Retry-After honoured within the call's budget), a body that is not the API's
(an HTML page, a wrong path), a stream cut short, a refusal, a reply truncated at the cap.
"""
from __future__ import annotations

import email.utils
import json
import math
import time
from typing import Any

from engine.coders.llm.attempts import Attempt, CallState, ChatResult, seconds_text, shorten, stopped_error
from engine.coders.llm.config import LlmConfig
from engine.coders.protocol import LlmCall


class ReplyReader:
    """Reads the replies and failures of one ChatClient's calls (see the module docstring)."""

    def __init__(self, config: LlmConfig, base_url: str) -> None:
        self.config = config
        self.base_url = base_url

    def read(self, call: CallState, att: Attempt, resp: Any, stream: bool) -> ChatResult:
        """The openai client's response (a stream, or a raw response) -> ChatResult."""
        http: Any  # the httpx response; None makes .read() raise, which failed_read reports
        if stream:
            http = getattr(resp, "response", None)
        else:
            http = getattr(resp, "http_response", None)
        status = int(getattr(http, "status_code", 200) or 200)
        ctype = _content_type(getattr(http, "headers", None))
        try:
            if stream and (not ctype or "event-stream" in ctype):
                return self.read_stream(call, att, resp)
            body = http.read() if stream else (http.content if http is not None else b"")
        except Exception as exc:  # noqa: BLE001
            return self.failed_read(call, att, exc)
        return self.read_body(call, att, status, ctype, body)

    def read_stream(self, call: CallState, att: Attempt, stream: Any) -> ChatResult:
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
                    loop = repeating_tail(content) if "\n" in str(piece) else None
                    if loop is not None:
                        _close(stream)
                        call.text = content
                        return self._fail(call, att, "looping", loop, partial=True)
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
            return self.failed_read(call, att, exc)
        if not events:
            return self._fail(call, att, "garbage", "the server sent an empty event stream")
        return self._reply(call, att, content, [tools[k] for k in sorted(tools)],
                           finish, "".join(refusal) or None, usage)

    def read_body(self, call: CallState, att: Attempt, status: int, ctype: str,
                  body: bytes | str) -> ChatResult:
        text = body.decode("utf-8", "replace") if isinstance(body, (bytes, bytearray)) else str(body)
        if "json" not in ctype and ctype:
            return self._fail(call, att, "incompatible",
                              self._incompatible(status, ctype, text), status=status)
        try:
            data = json.loads(text)
        except ValueError:
            return self._fail(call, att, "garbage",
                              f"malformed reply from the server: {shorten(text, 100)}")
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
                              f"malformed reply from the server (no choices): {shorten(text, 100)}")
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

    def _reply(self, call: CallState, att: Attempt, content: str, tool_calls: list[dict[str, Any]],
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
            result.error = f"the model refused: {shorten(str(why))}"
        elif finish == "length":
            cap = self.config.max_tokens_for(call.role)
            where = (f"the completion cap of {cap} tokens ({LlmConfig.cap_setting(call.role)})"
                     if cap else "the server's token limit")
            result.ok, result.kind = False, "truncated"
            result.error = f"reply truncated at {where} (finish_reason=length)"
        elif not content.strip() and not tool_calls:
            result.ok, result.kind = False, "empty"
            result.error = "the server returned an empty reply"
        self.record(call, att, ok=result.ok,
                     error=None if result.ok else ("empty reply" if result.kind == "empty"
                                                   else result.error),
                     reply=reply_text, estimate=estimate, tokens=(tin, tout))
        return result

    # -- failures -----------------------------------------------------------------------------

    def failed_request(self, call: CallState, exc: Exception, started: float) -> ChatResult:
        """The openai client raised (after its own retries)."""
        import openai

        att = self.attempt(call, started)
        if isinstance(exc, stopped_error()):
            return ChatResult(ok=False, kind=call.stop_reason or "budget", error=str(exc))
        if isinstance(exc, openai.APITimeoutError):
            return self._fail(call, att, "timeout", f"request timed out after "
                              f"{seconds_text(att.timeout or self.config.timeout)}")
        if isinstance(exc, openai.APIConnectionError):
            cause = _root_cause(exc)
            if isinstance(cause, stopped_error()):
                return ChatResult(ok=False, kind=call.stop_reason or "budget", error=str(cause))
            detail = f": {shorten(str(cause), 160)}" if cause is not None else ""
            return self._fail(call, att, "connection",
                              f"cannot reach the server at {self.base_url}{detail}")
        if isinstance(exc, openai.APIStatusError):
            if att.failure is not None:          # the response hook classified it
                failure = att.failure
                failure.calls = []
                return failure
            response = getattr(exc, "response", None)
            failure = self.classify_status(response, call.remaining())
            return self._fail(call, att, failure.kind or "http", failure.error or str(exc),
                              status=failure.status, detail=failure.detail)
        if isinstance(exc, (ValueError, openai.APIResponseValidationError)):
            return self._fail(call, att, "garbage",
                              f"malformed reply from the server: {shorten(str(exc), 100)}")
        return self._fail(call, att, "garbage",
                          f"unexpected error: {type(exc).__name__}: {shorten(str(exc))}")

    def failed_read(self, call: CallState, att: Attempt, exc: Exception) -> ChatResult:
        """Reading the body failed half-way (a stream cut short, or an error event in it)."""
        import openai

        if call.abort.is_set():
            return ChatResult(ok=False, kind=call.stop_reason or "budget",
                              error="stopped while the reply was coming")
        if isinstance(exc, openai.APITimeoutError):
            return self._fail(call, att, "broken", "the reply stalled: no data for "
                              f"{seconds_text(att.timeout or self.config.timeout)}", partial=True)
        if isinstance(exc, openai.APIConnectionError):
            return self._fail(call, att, "broken", "the connection broke while the reply was "
                              f"coming: {shorten(str(_root_cause(exc) or exc), 160)}", partial=True)
        if isinstance(exc, openai.APIError):
            detail = _error_text(getattr(exc, "body", None)) or shorten(str(exc))
            return self._fail(call, att, "server", f"the server reported an error in the "
                              f"stream: {detail}", partial=True)
        if isinstance(exc, ValueError):
            return self._fail(call, att, "garbage", "malformed data in the reply stream: "
                              f"{shorten(str(exc), 100)}", partial=True)
        return self._fail(call, att, "garbage",
                          f"unexpected error: {type(exc).__name__}: {shorten(str(exc))}")

    def _fail(self, call: CallState, att: Attempt, kind: str, error: str, *, status: int | None = None,
              detail: str = "", partial: bool = False) -> ChatResult:
        reply = call.text if partial else ""
        self.record(call, att, ok=False, error=error, reply=reply, estimate=bool(reply))
        return ChatResult(ok=False, kind=kind, error=error, status=status, detail=detail,
                          content=reply or None)

    def classify_status(self, response: Any, remaining: float) -> ChatResult:
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
        detail = _error_text(data) if api_error else shorten(text, 100)
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

    # -- accounting -----------------------------------------------------------------------------

    def attempt(self, call: CallState, started: float) -> Attempt:
        """The attempt the hooks opened, or one from `started` (a client without our hooks)."""
        with call.lock:
            if call.current is None:
                call.current = Attempt(started, self.config.timeout)
            return call.current

    def record(self, call: CallState, att: Attempt, **kw: Any) -> None:
        with call.lock:
            self.record_locked(call, att, **kw)

    def record_locked(self, call: CallState, att: Attempt, *, ok: bool, error: str | None,
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


LOOP_LINES = 30      # a cycle of up to LOOP_PERIOD lines, repeated for this many lines in a row
LOOP_PERIOD = 12     # (and at least LOOP_REPEATS times: a 12-line cycle is stopped after 48 lines)
LOOP_REPEATS = 4


def repeating_tail(text: str) -> str | None:
    """Why a streamed reply is stuck in a loop, or None. A small model at temperature 0.5 wrote
    `X = np.vstack((X, np.zeros_like(X)))` until its 4,096-token cap (30 minutes at 2 tokens/s),
    and, in an improve step, the same 4 to 8 import lines over and over, three times in one
    session. Only whole lines are compared; code never repeats a line 30 times in a row, nor a
    block of lines four times."""
    window = max(LOOP_LINES, LOOP_REPEATS * LOOP_PERIOD)
    tail = text.rsplit("\n", window + 1)[:-1][-window:]   # checked per streamed line: the tail only
    for period in range(1, LOOP_PERIOD + 1):
        need = max(LOOP_LINES, LOOP_REPEATS * period)
        lines = tail[-need:]
        if len(lines) < need or not any(line.strip() for line in lines):
            continue
        if all(lines[i] == lines[i - period] for i in range(period, len(lines))):
            unit = "line" if period == 1 else f"{period} lines"
            return (f"the model was writing the same {unit} over and over ({shorten(lines[-1].strip(), 60)!r}, "
                    f"{len(lines)} lines in a row): the reply was stopped")
    return None


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
        if isinstance(cause, stopped_error()):
            return cause
        nxt = cause.__cause__ or cause.__context__
        if nxt is None:
            return cause
        cause = nxt
    return cause


def _error_text(data: Any) -> str:
    """The message of an error body: {"error": {"code", "message"}}, {"error": "..."}, ..."""
    if not isinstance(data, dict):
        return shorten(str(data)) if data else ""
    err = data.get("error", data)
    if isinstance(err, dict):
        parts = [str(err.get(k)) for k in ("code", "message")
                 if err.get(k) and not isinstance(err.get(k), int)]   # not vLLM's code: 404
        if parts:
            return shorten(": ".join(parts))
        if err.get("detail"):
            return shorten(str(err["detail"]))
    elif err:
        return shorten(str(err))
    return shorten(json.dumps(data))


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

        try:
            return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError):
            return None
    return None
