"""A record-and-replay proxy in front of an OpenAI-compatible server: it pairs the bench's arms.

A request it has seen before (the same JSON body: messages, seed, sampling, cap) is answered with
the reply the server gave the first time, byte for byte; a request that arrives while that
reply is still coming gets it as it comes. Everything else goes to the server.

Why: the bench compares a seed's session with and without one guidance. Seeded sampling alone
does not make the two sessions alike, because llama.cpp's batched decoding is not
batch-invariant: with six sessions on one server, two sessions that sent the same first prompt
with the same seed got different replies. Through this proxy, the steered session gets the
unsteered one's replies for as long as it asks what the unsteered one asked, so until the
guidance (or until a pipeline's own randomness changes a printed metric, and so a review
prompt). From then on it asks its own questions and gets its own answers. Each sample must carry
its own seed (`--llm-seed`): without one, a re-sent request would be answered with the reply that
made it re-send.
"""
from __future__ import annotations

import hashlib
import http.client
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

_HOP_HEADERS = {"transfer-encoding", "content-length", "connection", "keep-alive"}


@dataclass
class _Recording:
    """One upstream reply, as it arrives: status, headers, body chunks."""
    status: int | None = None
    headers: list[tuple[str, str]] = field(default_factory=list)
    chunks: list[bytes] = field(default_factory=list)
    done: bool = False
    aborted: bool = False
    followers: int = 0          # replays of it under way or done
    cond: threading.Condition = field(default_factory=threading.Condition)

    def wait_for(self, index: int) -> tuple[list[bytes], bool]:
        """The chunks from `index` on, once there are any or the reply has ended; and whether it has."""
        with self.cond:
            self.cond.wait_for(lambda: len(self.chunks) > index or self.done)
            return self.chunks[index:], self.done


class ReplayProxy:
    """`ReplayProxy("http://127.0.0.1:8080/v1")`, a context manager; point clients at `.base_url`."""

    def __init__(self, upstream_base_url: str) -> None:
        parts = urlsplit(upstream_base_url)
        self._upstream = (parts.hostname or "127.0.0.1", parts.port or 80)
        self._prefix = parts.path.rstrip("/")          # "/v1"
        self._records: dict[str, _Recording] = {}
        self._lock = threading.Lock()
        self.forwarded = 0    # chat requests sent to the server
        self.replayed = 0     # chat requests answered from a recording
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802
                proxy._pass(self, "GET", None)

            def do_POST(self) -> None:  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if self.path.rstrip("/").endswith("/chat/completions"):
                    proxy._chat(self, body)
                else:
                    proxy._pass(self, "POST", body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="replay-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self._prefix}"

    def __enter__(self) -> ReplayProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    # -- chat completions: recorded, replayed ------------------------------------------------

    def _chat(self, handler: BaseHTTPRequestHandler, body: bytes) -> None:
        key = _key(body)
        with self._lock:
            rec = self._records.get(key)
            leader = rec is None
            if rec is None:
                rec = self._records[key] = _Recording()
                self.forwarded += 1
            else:
                self.replayed += 1
        if leader:
            self._record(handler, body, key, rec)
        else:
            self._replay(handler, rec)

    def _record(self, handler: BaseHTTPRequestHandler, body: bytes, key: str, rec: _Recording) -> None:
        conn = http.client.HTTPConnection(*self._upstream, timeout=None)
        listening = True
        try:
            conn.request("POST", handler.path, body=body, headers=_forwarded_headers(handler))
            resp = conn.getresponse()
            with rec.cond:
                rec.status, rec.headers = resp.status, _kept_headers(resp.getheaders())
                rec.cond.notify_all()
            listening = _start(handler, rec.status, rec.headers)
            while chunk := resp.read1(65536):
                with rec.cond:
                    rec.chunks.append(chunk)
                    rec.cond.notify_all()
                listening = listening and _write(handler, chunk)
                if not listening and not rec.followers:
                    rec.aborted = True   # the client went (e.g. it stopped a looping reply): so does the server
                    break
        except OSError:
            rec.aborted = True
            if rec.status is None:
                rec.status = 502
        finally:
            conn.close()
            with rec.cond:
                rec.done = True
                rec.cond.notify_all()
            if rec.aborted or rec.status != 200:
                with self._lock:
                    self._records.pop(key, None)   # not kept: a later request goes to the server

    def _replay(self, handler: BaseHTTPRequestHandler, rec: _Recording) -> None:
        with rec.cond:
            rec.cond.wait_for(lambda: rec.status is not None)
            rec.followers += 1
        if not _start(handler, rec.status or 502, rec.headers):
            return
        sent = 0
        while True:
            chunks, done = rec.wait_for(sent)
            for chunk in chunks:
                if not _write(handler, chunk):
                    return
            sent += len(chunks)
            if done and sent >= len(rec.chunks):
                return

    # -- everything else: passed through -------------------------------------------------------

    def _pass(self, handler: BaseHTTPRequestHandler, method: str, body: bytes | None) -> None:
        conn = http.client.HTTPConnection(*self._upstream, timeout=60)
        try:
            conn.request(method, handler.path, body=body, headers=_forwarded_headers(handler))
            resp = conn.getresponse()
            data = resp.read()
            if _start(handler, resp.status, _kept_headers(resp.getheaders())):
                _write(handler, data)
        except OSError as exc:
            _start(handler, 502, [("Content-Type", "text/plain")])
            _write(handler, f"replay proxy: {exc}".encode())
        finally:
            conn.close()


def _key(body: bytes) -> str:
    try:
        canonical = json.dumps(json.loads(body), sort_keys=True).encode()
    except ValueError:
        canonical = body
    return hashlib.sha256(canonical).hexdigest()


def _forwarded_headers(handler: BaseHTTPRequestHandler) -> dict[str, str]:
    return {k: v for k, v in handler.headers.items() if k.lower() not in _HOP_HEADERS | {"host"}}


def _kept_headers(headers: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in headers if k.lower() not in _HOP_HEADERS]


def _start(handler: BaseHTTPRequestHandler, status: int, headers: list[tuple[str, str]]) -> bool:
    """Send the status line and headers; the body ends when the connection closes (HTTP/1.0)."""
    try:
        handler.send_response(status)
        for k, v in headers:
            handler.send_header(k, v)
        handler.send_header("Connection", "close")
        handler.end_headers()
        return True
    except OSError:
        return False


def _write(handler: BaseHTTPRequestHandler, data: bytes) -> bool:
    try:
        handler.wfile.write(data)
        handler.wfile.flush()
        return True
    except OSError:
        return False
