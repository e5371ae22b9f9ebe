"""The bench's record-and-replay proxy (tests/bench/replay_proxy.py), which pairs the local-model
bench's arms: the same request is answered once by the server and replayed to its twin, also while
the reply is still streaming; other requests, and other paths, go to the server."""
from __future__ import annotations

import json
import threading
import urllib.request

from engine.coders.llm.client import ChatClient
from engine.coders.llm.config import LlmConfig
from tests.bench.replay_proxy import ReplayProxy
from tests.fakes.chat_server import FakeChatServer, streamed

ASK = [{"role": "user", "content": "Write features(X)."}]


def client(base_url: str) -> ChatClient:
    return ChatClient(LlmConfig(model="m", base_url=base_url, seed=5, timeout=10.0, max_retries=0))


def test_twin_requests_get_one_reply_and_the_next_sample_goes_to_the_server():
    slow = streamed([f"line {i}\n" for i in range(12)], delay=0.05, usage=(30, 12))
    with FakeChatServer([slow, streamed(["another reply"], usage=(30, 2))]) as srv, \
            ReplayProxy(srv.base_url) as proxy:
        a, b = client(proxy.base_url), client(proxy.base_url)
        replies: dict[str, str | None] = {}

        def ask(name: str, c: ChatClient) -> None:
            replies[name] = c.complete(ASK, role="draft", model="m", temperature=0.5).content

        twins = [threading.Thread(target=ask, args=(n, c)) for n, c in (("a", a), ("b", b))]
        for t in twins:
            t.start()
        for t in twins:
            t.join(20)
        assert replies["a"] == replies["b"] == "".join(f"line {i}\n" for i in range(12))
        assert len(srv.chat_requests) == 1 and (proxy.forwarded, proxy.replayed) == (1, 1)
        # a's next sample has the next seed: a new request, answered by the server
        assert a.complete(ASK, role="draft", model="m", temperature=0.5).content == "another reply"
        assert [q.body["seed"] for q in srv.chat_requests] == [5, 6]
        with urllib.request.urlopen(proxy.base_url + "/models", timeout=5) as resp:   # passed through
            assert json.load(resp)["data"][0]["id"] == "fake-model"
