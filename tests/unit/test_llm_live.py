"""The call in progress: `befair llm check`, the live side channel (never stored), llm_stream
events with offsets and times only (old sessions' delta events still fold), replays writing the
reply again, the headless line, and the be-fair protocol's package check."""
from __future__ import annotations

import io
import json
import time

import pytest

from befair_tui.cli import main
from engine.agent.headless import Progress
from engine.coders.llm.client import StreamStats
from engine.coders.llm.stream_relay import StreamRelay
from engine.session import events as ev
from engine.session import live_reply
from engine.session.state import fold
from tests.fakes.chat_server import AutoResponder, FakeChatServer


def _events(*items):
    return [ev.Event(seq=i + 1, kind=k, payload=p, ts=float(i), session_id="s") for i, (k, p) in enumerate(items)]


START = (ev.SESSION_STARTED, {"config": {"steps": 2}, "instruction": "x", "coder": {}, "data": {}})


def test_llm_check_reports_models_speed_and_settings(capsys):
    with FakeChatServer(default=AutoResponder()) as srv:
        code = main(["llm", "check", "--base-url", srv.base_url, "--model", "fake-model"])
        out = capsys.readouterr().out
        assert code == 0, out
        assert "models   fake-model" in out and "writing" in out and "--max-tokens" in out
        code = main(["llm", "check", "--base-url", srv.base_url, "--model", "fake-model", "--json"])
        report = json.loads(capsys.readouterr().out)
    assert code == 0 and report["ok"] and report["models"] == ["fake-model"] and report["completion_tokens"] >= 1


def test_llm_check_recommends_the_scaffold_for_a_small_model(capsys):
    with FakeChatServer(default=AutoResponder(), meta={"n_params": 1_777_088_000, "n_ctx": 16384}) as srv:
        code = main(["llm", "check", "--base-url", srv.base_url, "--model", "fake-model"])
        out = capsys.readouterr().out
    assert code == 0, out
    assert "1.8B parameters" in out and "context window 16,384 tokens" in out
    assert "--scaffold on" in out and "use --scaffold on" in out
    with FakeChatServer(default=AutoResponder(), meta={"n_params": 32_000_000_000}) as srv:
        main(["llm", "check", "--base-url", srv.base_url, "--model", "fake-model", "--scaffold", "on"])
        out = capsys.readouterr().out
    assert "32.0B parameters" in out and "--scaffold" not in out


def test_llm_check_names_a_server_that_is_not_there(capsys):
    code = main(["llm", "check", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--timeout", "5"])
    out = capsys.readouterr().out
    assert code == 1 and "FAILED" in out and "cannot list the server's models" in out and "--base-url" in out


def test_stream_events_keep_offsets_old_delta_sessions_still_fold():
    new = fold(_events(START, (ev.LLM_STREAM, {"role": "draft", "step": 1, "chars": 40, "tokens": 10,
                                               "elapsed_s": 3.0, "first_token_s": 1.0, "tokens_per_s": 4.5})))
    assert new.live_reply["chars"] == 40 and new.live_reply["tokens_per_s"] == 4.5 and new.live_reply["text"] == ""
    old = fold(_events(START, (ev.LLM_STREAM, {"role": "draft", "step": 1, "delta": "import "}),
                       (ev.LLM_STREAM, {"role": "draft", "step": 1, "delta": "numpy"})))
    assert old.live_reply["text"] == "import numpy" and old.live_reply["chars"] == 12
    done = fold(_events(START, (ev.LLM_STREAM, {"role": "draft", "step": 1, "chars": 4, "tokens": 1,
                                                "elapsed_s": 1.0}),
                        (ev.LLM_CALL, {"node_id": None, "role": "draft", "model": "m", "tokens_in": 1,
                                       "tokens_out": 1, "latency_s": 1.0, "cost": 0.0, "ok": True, "error": None,
                                       "reply": "abcdefgh"})))
    assert done.live_reply is None


def test_a_replay_writes_the_reply_again_from_the_offsets():
    events = _events(START, (ev.LLM_STREAM, {"role": "draft", "step": 1, "chars": 3, "tokens": 1, "elapsed_s": 1}),
                     (ev.LLM_STREAM, {"role": "draft", "step": 1, "chars": 6, "tokens": 2, "elapsed_s": 2}),
                     (ev.LLM_CALL, {"role": "draft", "reply": "abcdefgh", "ok": True}))
    for position, expected in ((2, "abc"), (3, "abcdef")):
        state = fold(events[:position])
        assert live_reply.replay_text(events, position, state.live_reply) == expected
    old = _events(START, (ev.LLM_STREAM, {"role": "draft", "step": 1, "delta": "xy"}))
    assert live_reply.replay_text(old, 2, fold(old).live_reply) == "xy"


def test_the_relay_writes_the_side_channel_and_stores_progress_sparingly(tmp_path):
    path = tmp_path / live_reply.FILE
    relay = StreamRelay(path, interval=0.3)
    relay.step = 2
    relay.progress("draft", StreamStats(tokens=5, chars=20, elapsed_s=2.0, first_token_s=1.0))
    relay("draft", "print('hello')")
    side = live_reply.read(path)
    assert side["text"] == "print('hello')" and side["tokens"] == 5 and side["step"] == 2
    assert side["tokens_per_s"] == 4.0
    first = relay.take()
    assert [r for r, _ in first] == ["draft"] and "text" not in first[0][1] and first[0][1]["chars"] == 20
    relay.progress("draft", StreamStats(tokens=6, chars=25, elapsed_s=2.2, first_token_s=1.0))
    assert relay.take() == []                       # within the interval: not stored again
    last = relay.finish()
    assert last and last[0][1]["tokens"] == 6       # the call's last progress is stored
    assert not path.exists()                        # and the live text is gone


def test_the_headless_line_shows_the_call_in_progress(tmp_path):
    out = io.StringIO()
    progress = Progress(out)
    progress.live_path = tmp_path / live_reply.FILE
    state = fold(_events(START))
    progress(ev.Event(seq=2, kind=ev.POLICY_DECISION, payload={"action": "draft"}, ts=1.0, session_id="s"), state)
    assert "waiting for the model's first token" in progress._live_line(state)
    live_reply.write(progress.live_path, {"role": "draft", "step": 1, "text": "import pandas as pd\nx = 1",
                                    "tokens": 9, "tokens_per_s": 3.25})
    line = progress._live_line(state)
    assert "writing draft (9 tokens, 3.2 tok/s): x = 1" in line


def test_be_fair_refuses_to_start_without_the_packages_its_prompt_promises(tmp_path, capsys, monkeypatch):
    from engine.agent import environment

    monkeypatch.setattr(environment, "missing", lambda *a: ["lightgbm", "timm"])
    code = main(["run", "--headless", "--protocol", "be-fair", "--coder", "openai", "--model", "m",
                 "--base-url", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "b.db")])
    err = capsys.readouterr().err
    assert code == 2 and "lightgbm, timm are installed" in err and "befair[agent]" in err
    assert not (tmp_path / "b.db").exists()         # refused before anything was recorded


@pytest.mark.parametrize("tokens,elapsed,first,expected", [(1, 5.0, 1.0, None), (11, 6.0, 1.0, 2.0),
                                                           (3, 1.0, None, None)])
def test_stream_stats_speed(tokens, elapsed, first, expected):
    assert StreamStats(tokens, 10, elapsed, first).tokens_per_s == expected


def test_no_wall_clock_budget_cuts_a_slow_reply_that_keeps_coming():
    """A reply streaming for longer than the old 300 s budget would, scaled down: tokens every
    0.3 s for ~2 s, with a stall timeout of 1 s and no call budget: the whole reply arrives."""
    from engine.coders.llm.client import ChatClient
    from engine.coders.llm.config import LlmConfig
    from tests.fakes.chat_server import Reply

    text = "x" * 40
    with FakeChatServer([Reply(content=text, chunks=[text[i:i + 5] for i in range(0, 40, 5)],
                               chunk_delay=0.3)]) as srv:
        client = ChatClient(LlmConfig(model="m", base_url=srv.base_url, timeout=1.0, max_retries=0))
        t0 = time.monotonic()
        res = client.complete([{"role": "user", "content": "hi"}], role="draft", model="m")
    assert res.ok and res.content == text and time.monotonic() - t0 >= 1.5
    assert res.calls[-1].tokens_per_s and res.calls[-1].server_model


def test_the_speed_shown_is_the_recent_one():
    """A reply that stalled after a burst: the speed since the first token stays high, the speed
    over the last 15 s says 0 (what a person watching needs to know)."""
    from engine.coders.llm.attempts import CallState as _Call

    call = _Call([], "draft", "m", float("inf"))
    now = time.monotonic()
    call.started, call.first_token, call.tokens = now - 40, now - 30, 11
    call.token_times.extend(now - 30 + i for i in range(11))      # 11 tokens, then 20 s of nothing
    stats = call.stats()
    assert stats.tokens_per_s == pytest.approx(10 / 30, rel=0.05) and stats.recent_tokens_per_s == 0.0
    assert stats.payload()["recent_tokens_per_s"] == 0.0


def test_a_slow_call_stores_few_stream_events():
    """A call streaming for 15 minutes (a slow local model on a busy machine) stores a few dozen
    llm_stream events, not one every 2 s; a short one still one every 2 s."""
    clock = [0.0]
    relay = StreamRelay(None, clock=lambda: clock[0])

    def stored(seconds: float) -> int:
        count, t = 0, 0.0
        while t <= seconds:
            clock[0] = t
            relay.progress("draft", StreamStats(tokens=int(t), chars=int(4 * t), elapsed_s=t, first_token_s=0.0))
            count += len(relay.take())
            t += 0.2
        return count + len(relay.finish())

    assert 5 <= stored(10.0) <= 7
    assert stored(900.0) <= 40
