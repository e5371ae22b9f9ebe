"""A real HTTP server on 127.0.0.1 that speaks the Chat Completions protocol, for tests.

    with FakeChatServer([reply(code_reply()), rate_limited(0.2), tool_review(False, "ok", 0.7)]) as srv:
        coder = LlmCoder(LlmConfig(model="fake-model", base_url=srv.base_url, ...))
        ...
        srv.requests[0].body["messages"]   # what the client sent

Each POST /v1/chat/completions takes the next entry of the script: a Reply (built with the
helpers below) or a callable `f(request) -> Reply`. When the script is empty, `default` answers
(a Reply or callable; AutoResponder writes runnable pipelines and reviews, for end-to-end
sessions); with no default the server answers 500 "script exhausted", which a test notices.
Every request is recorded (path, headers, JSON body, arrival time) in `requests`, and every
usage reported in `usage`, so tests can assert on prompts, timing and token totals.

A request with "stream": true is answered as the OpenAI API does: Server-Sent Events of
chat.completion.chunk objects (content deltas, tool-call deltas, a finish chunk, a usage chunk when
stream_options.include_usage asks for one, then [DONE]), sent with chunked transfer encoding.
`Reply.chunks` sets the content deltas, `chunk_delay` the pause between them and `stall_after`
a point where the stream stops sending (a stalled server). `FakeChatServer(streaming=...)` makes
a server that rejects streaming ("reject") or ignores it and answers JSON ("ignore");
`stream_usage=False` one that never reports usage in a stream; `reject_stream_options=True` one
that rejects the stream_options parameter.
"""
from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from collections.abc import Callable, Iterable

import pytest


@dataclass
class Reply:
    status: int = 200
    body: dict[str, Any] | bytes | str | None = None   # dict: JSON; None: built from fields below
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"
    delay: float = 0.0                                   # seconds before answering (slow replies)
    # for a chat.completion body built by the server:
    content: str | None = None
    tool_calls: list[dict[str, Any]] | None = None       # [{name, arguments (dict or str)}]
    finish_reason: str | None = None
    refusal: str | None = None
    usage: tuple[int, int] | None = None                 # (prompt, completion); None: estimated
    # for a streamed reply:
    chunks: list[str] | None = None                      # content deltas; None: content in pieces
    chunk_delay: float = 0.0                             # seconds between events
    stall_after: int | None = None                       # events sent before the stream stalls
    events: list[str] | None = None                      # SSE data lines (built by the server)


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any                    # parsed JSON (or the raw text when it is not JSON)
    time: float                  # time.monotonic() at arrival

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", []) if isinstance(self.body, dict) else []

    @property
    def text(self) -> str:
        """All message contents joined (for `in` assertions on prompts)."""
        return "\n\n".join(str(m.get("content") or "") for m in self.messages)

    @property
    def has_tools(self) -> bool:
        return isinstance(self.body, dict) and bool(self.body.get("tools"))


# -- reply helpers ---------------------------------------------------------------------------

def reply(content: str, *, usage: tuple[int, int] | None = None, delay: float = 0.0,
          finish_reason: str = "stop") -> Reply:
    return Reply(content=content, usage=usage, delay=delay, finish_reason=finish_reason)


def tool_call(name: str, arguments: dict[str, Any] | str, *, usage: tuple[int, int] | None = None,
              content: str | None = None) -> Reply:
    return Reply(content=content, tool_calls=[{"name": name, "arguments": arguments}],
                 finish_reason="tool_calls", usage=usage)


def tool_review(is_bug: bool, summary: str, metric: float | None, **kw: Any) -> Reply:
    return tool_call("submit_review", {"is_bug": is_bug, "summary": summary, "metric": metric}, **kw)


def json_review(is_bug: bool, summary: str, metric: float | None, **kw: Any) -> Reply:
    payload = json.dumps({"is_bug": is_bug, "summary": summary, "metric": metric})
    return reply(f"```json\n{payload}\n```", **kw)


def error(status: int = 500, message: str = "internal error", *,
          headers: dict[str, str] | None = None, code: str | None = None) -> Reply:
    body = {"error": {"message": message, "type": "server_error" if status >= 500 else
                      "invalid_request_error", "code": code}}
    return Reply(status=status, body=body, headers=dict(headers or {}))


def rate_limited(retry_after: float | str | None = 0.2, *, ms: bool = False) -> Reply:
    headers = {}
    if retry_after is not None:
        headers["retry-after-ms" if ms else "retry-after"] = (
            str(int(float(retry_after) * 1000)) if ms else str(retry_after))
    return error(429, "Rate limit reached, try again later", headers=headers, code="rate_limit_exceeded")


def streamed(chunks: list[str], *, delay: float = 0.0, usage: tuple[int, int] | None = None,
             finish_reason: str = "stop") -> Reply:
    """A reply whose content arrives as these deltas (when the client streams)."""
    return Reply(content="".join(chunks), chunks=list(chunks), chunk_delay=delay, usage=usage,
                 finish_reason=finish_reason)


def stalled_stream(chunks: list[str], *, stall_after: int = 2) -> Reply:
    """A streamed reply that stops sending after `stall_after` events (and never finishes)."""
    r = streamed(chunks)
    r.stall_after = stall_after
    return r


def html_page(status: int = 200, title: str = "Welcome to nginx!") -> Reply:
    """What a web server that is not an LLM server answers."""
    page = (f"<!DOCTYPE html>\n<html>\n<head><title>{title}</title></head>\n<body>\n"
            f"<h1>{title}</h1>\n<p>If you see this page, the web server is working.</p>\n"
            "</body>\n</html>\n")
    return Reply(status=status, body=page, content_type="text/html")


def other_json(body: dict[str, Any] | None = None, status: int = 200) -> Reply:
    """JSON that is not a chat.completion (e.g. Ollama's native /api/chat reply)."""
    return Reply(status=status, body=body if body is not None else {
        "model": "llama3", "message": {"role": "assistant", "content": "hi"}, "done": True})


def slow(delay: float, then: Reply | None = None) -> Reply:
    r = then if then is not None else reply("too late")
    r.delay = delay
    return r


def garbage(body: str = "<html>502 Bad Gateway</html> {not json", *,
            content_type: str = "application/json", status: int = 200) -> Reply:
    return Reply(status=status, body=body, content_type=content_type)


def refusal(text: str = "I'm sorry, but I can't help with that.") -> Reply:
    return Reply(content=None, refusal=text, finish_reason="stop")


def truncated(content: str) -> Reply:
    return reply(content, finish_reason="length")


# -- pipelines for scripted replies ----------------------------------------------------------

SIMPLE_PIPELINE = '''\
import os
import pickle

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
WORKING = os.path.join(HERE, "working")
MODEL_PATH = os.path.join(WORKING, "model.pkl")
IMAGE_EXTS = (".jpg", ".jpeg", ".png")


def features(path):
    img = Image.open(path).convert("RGB").resize((32, 32))
    rgb = np.asarray(img, dtype=np.float32) / 255.0
    hsv = np.asarray(img.convert("HSV"), dtype=np.float32) / 255.0
    return np.concatenate([rgb.mean((0, 1)), rgb.std((0, 1)), hsv.mean((0, 1)), hsv.std((0, 1))])


def predict(folder):
    with open(MODEL_PATH, "rb") as f:
        model = pickle.load(f)
    names = sorted(n for n in os.listdir(folder) if n.lower().endswith(IMAGE_EXTS))
    if not names:
        return {}
    X = np.stack([features(os.path.join(folder, n)) for n in names])
    return {n: float(p) for n, p in zip(names, model.predict_proba(X)[:, 1])}


if __name__ == "__main__":
    df = pd.read_csv(os.path.join(HERE, "input", "skin_lesions.csv"))
    y = (df["label"] == "malignant").astype(int).to_numpy()
    files = [n if str(n).lower().endswith(IMAGE_EXTS) else f"{n}.jpg" for n in df["image_name"]]
    X = np.stack([features(os.path.join(HERE, "input", "images", f)) for f in files])
    X_tr, X_va, y_tr, y_va = train_test_split(X, y, test_size=0.25, random_state=0, stratify=y)
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000, class_weight="balanced"))
    model.fit(X_tr, y_tr)
    auc = roc_auc_score(y_va, model.predict_proba(X_va)[:, 1])
    os.makedirs(WORKING, exist_ok=True)
    with open(MODEL_PATH, "wb") as f:
        pickle.dump(model, f)
    print(f"Validation AUROC: {auc:.4f}")
'''

# The same pipeline with a realistic bug (a column the data does not have).
BUGGY_PIPELINE = SIMPLE_PIPELINE.replace('df["label"] == "malignant"', 'df["diagnosis"] == "malignant"')


def code_reply(plan: str = "Colour statistics with a balanced logistic regression.",
               code: str = SIMPLE_PIPELINE) -> str:
    return f"{plan}\n\n```python\n{code}```\n"


class AutoResponder:
    """A default for long sessions: runnable pipelines for draft/improve/debug, reviews by tool.

    The first `buggy_drafts` drafts carry a bug so the debug path is exercised. Reviews read the
    execution output in the prompt: a traceback is a bug; the printed AUROC is the claim.
    """

    def __init__(self, buggy_drafts: int = 0, tools: bool = True) -> None:
        self.buggy_drafts = buggy_drafts
        self.tools = tools
        self.drafts = 0

    def __call__(self, request: Request) -> Reply:
        text = request.text
        if "evaluate the output of the code execution" in text:
            out = text.split("# Execution output", 1)[-1]
            bug = "Traceback" in out or "Error" in out
            m = re.findall(r"Validation AUROC:\s*([0-9.]+)", out)
            metric = None if bug or not m else float(m[-1])
            summary = "The script failed; fix the error." if bug else "The pipeline trained and printed its AUROC."
            if request.has_tools and self.tools:
                return tool_review(bug, summary, metric)
            return json_review(bug, summary, metric)
        if "Previous (buggy) implementation" in text:
            return reply(code_reply("Use the label column that exists in the data."))
        if "Previous solution" in text:
            return reply(code_reply("Standardise the features before the logistic regression."))
        self.drafts += 1
        if self.drafts <= self.buggy_drafts:
            return reply(code_reply("Colour statistics with logistic regression.", BUGGY_PIPELINE))
        return reply(code_reply())


# -- the server ------------------------------------------------------------------------------

Script = Iterable["Reply | Callable[[Request], Reply]"]


class FakeChatServer:
    def __init__(self, script: Script = (), *, default: Reply | Callable[[Request], Reply] | None = None,
                 supports_tools: bool = True, model: str | None = None, streaming: str = "yes",
                 stream_usage: bool = True, reject_stream_options: bool = False,
                 meta: dict[str, Any] | None = None) -> None:
        self.script: deque[Any] = deque(script)
        self.default = default
        self.supports_tools = supports_tools   # False: requests with tools get a 400
        self.model = model
        assert streaming in ("yes", "reject", "ignore"), streaming
        self.streaming = streaming             # reject: "stream" gets a 400; ignore: JSON replies
        self.stream_usage = stream_usage       # False: no usage chunk, even when asked for one
        self.reject_stream_options = reject_stream_options
        self.meta = meta                        # llama.cpp's per-model meta in /models (n_params, n_ctx)
        self.requests: list[Request] = []
        self.usage: list[tuple[int, int]] = []  # (prompt, completion) for every usage reported
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._n = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> "FakeChatServer":
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def do_GET(self) -> None:  # noqa: N802
                if self.path.rstrip("/").endswith("/models"):
                    model = server.model or "fake-model"
                    listed = {"id": model, "object": "model", "owned_by": "fake"}
                    if server.meta is not None:
                        listed["meta"] = server.meta
                    self._send(Reply(body={"object": "list", "data": [listed]}))
                else:
                    self._send(error(404, f"no route {self.path}"))

            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length).decode("utf-8", "replace")
                try:
                    body: Any = json.loads(raw)
                except ValueError:
                    body = raw
                req = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body,
                              time.monotonic())
                with server._lock:
                    server.requests.append(req)
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    self._send(error(404, f"no route {self.path}"))
                    return
                self._send(server._answer(req))

            def _send(self, r: Reply) -> None:
                if r.delay and server._closing.wait(r.delay):
                    return
                if r.events is not None:
                    self._send_events(r)
                    return
                if isinstance(r.body, dict):
                    data = json.dumps(r.body).encode()
                elif isinstance(r.body, str):
                    data = r.body.encode()
                else:
                    data = r.body or b""
                try:
                    self.send_response(r.status)
                    self.send_header("Content-Type", r.content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in r.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test)

            def _send_events(self, r: Reply) -> None:
                def chunk(data: bytes) -> None:
                    self.wfile.write(f"{len(data):X}\r\n".encode() + data + b"\r\n")
                    self.wfile.flush()

                try:
                    self.send_response(r.status)
                    self.send_header("Content-Type", "text/event-stream; charset=utf-8")
                    self.send_header("Cache-Control", "no-cache")
                    self.send_header("Transfer-Encoding", "chunked")
                    for k, v in r.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    for i, data in enumerate(r.events or []):
                        if r.stall_after is not None and i >= r.stall_after:
                            server._closing.wait(3600)   # stalled: nothing more until shutdown
                            return
                        if i and r.chunk_delay and server._closing.wait(r.chunk_delay):
                            return
                        chunk(f"data: {data}\n\n".encode())
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="fake-chat-server",
                                        kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._closing.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> "FakeChatServer":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._httpd is not None, "the server is not running"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def push(self, *replies: "Reply | Callable[[Request], Reply]") -> None:
        with self._lock:
            self.script.extend(replies)

    @property
    def chat_requests(self) -> list[Request]:
        return [r for r in self.requests if r.path.rstrip("/").endswith("/chat/completions")]

    @property
    def total_usage(self) -> tuple[int, int]:
        return sum(u[0] for u in self.usage), sum(u[1] for u in self.usage)

    # -- answering ------------------------------------------------------------------------

    def _answer(self, req: Request) -> Reply:
        if not isinstance(req.body, dict):
            return error(400, "the request body is not JSON")
        if req.has_tools and not self.supports_tools:
            return error(400, "tools are not supported by this server")
        if req.body.get("stream") and self.streaming == "reject":
            return error(400, "Unsupported value: 'stream' does not support true with this model.")
        if "stream_options" in req.body and self.reject_stream_options:
            return error(400, "Unrecognized request argument supplied: stream_options")
        with self._lock:
            entry = self.script.popleft() if self.script else self.default
        if entry is None:
            return error(500, "fake chat server: script exhausted")
        r = entry(req) if callable(entry) else entry
        if r.body is not None or r.status != 200:
            return r
        return self._completion(req, r)

    def _completion(self, req: Request, r: Reply) -> Reply:
        with self._lock:
            self._n += 1
            n = self._n
        message: dict[str, Any] = {"role": "assistant", "content": r.content}
        if r.refusal is not None:
            message["refusal"] = r.refusal
        if r.tool_calls:
            message["tool_calls"] = [
                {"id": f"call_{n}_{i}", "type": "function",
                 "function": {"name": tc["name"], "arguments": tc["arguments"]
                              if isinstance(tc["arguments"], str) else json.dumps(tc["arguments"])}}
                for i, tc in enumerate(r.tool_calls)
            ]
        if r.usage is not None:
            prompt_tokens, completion_tokens = r.usage
        else:  # deterministic estimate: about 4 characters per token
            prompt_tokens = 1 + len(req.text) // 4
            completion_tokens = 1 + len(json.dumps(message)) // 4
        if req.body.get("stream") and self.streaming == "yes":
            return self._stream(req, r, n, message, (prompt_tokens, completion_tokens))
        with self._lock:
            self.usage.append((prompt_tokens, completion_tokens))
        body = {
            "id": f"chatcmpl-fake-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.model or req.body.get("model", "fake-model"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": r.finish_reason or ("tool_calls" if r.tool_calls else "stop")}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        return Reply(status=200, body=body, headers=r.headers, delay=r.delay)


    def _stream(self, req: Request, r: Reply, n: int, message: dict[str, Any],
                usage: tuple[int, int]) -> Reply:
        """The reply as chat.completion.chunk events (what the OpenAI API streams)."""
        model = self.model or req.body.get("model", "fake-model")
        base = {"id": f"chatcmpl-fake-{n}", "object": "chat.completion.chunk",
                "created": int(time.time()), "model": model}

        def event(delta: dict[str, Any], finish: str | None = None) -> str:
            return json.dumps({**base, "choices": [{"index": 0, "delta": delta, "logprobs": None,
                                                    "finish_reason": finish}]})

        events = [event({"role": "assistant", "content": ""})]
        content = r.content or ""
        pieces = r.chunks if r.chunks is not None else _pieces(content, 8)
        events += [event({"content": p}) for p in pieces if p]
        if r.refusal is not None:
            events.append(event({"refusal": r.refusal}))
        for i, tc in enumerate(message.get("tool_calls") or []):
            args = tc["function"]["arguments"]
            events.append(event({"tool_calls": [{"index": i, "id": tc["id"], "type": "function",
                                                 "function": {"name": tc["function"]["name"],
                                                              "arguments": ""}}]}))
            events += [event({"tool_calls": [{"index": i, "function": {"arguments": a}}]})
                       for a in _pieces(args, 3) if a]
        finish = r.finish_reason or ("tool_calls" if message.get("tool_calls") else "stop")
        events.append(event({}, finish))
        options = req.body.get("stream_options") or {}
        if self.stream_usage and options.get("include_usage"):
            with self._lock:
                self.usage.append(usage)
            events.append(json.dumps({**base, "choices": [], "usage": {
                "prompt_tokens": usage[0], "completion_tokens": usage[1],
                "total_tokens": usage[0] + usage[1]}}))
        events.append("[DONE]")
        return Reply(status=200, headers=r.headers, delay=r.delay, events=events,
                     chunk_delay=r.chunk_delay, stall_after=r.stall_after)


def _pieces(text: str, n: int) -> list[str]:
    size = max(1, -(-len(text) // n))
    return [text[i:i + size] for i in range(0, len(text), size)]


@pytest.fixture
def chat_server():
    """A running FakeChatServer with an empty script (push replies, or set .default)."""
    with FakeChatServer() as srv:
        yield srv
