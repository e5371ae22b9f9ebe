"""End to end: a short headless session driven by the LLM coder through the real openai client
against a Chat Completions server on localhost (tests/fakes/chat_server.py)."""
from __future__ import annotations

import json

import pytest

from befair_tui.cli import main
from engine.session import events as ev
from engine.session.store import SessionStore
from tests.fakes.chat_server import AutoResponder, FakeChatServer

GUIDANCE = "Please reweight the darker skin-tone groups"


@pytest.fixture
def llm_env(tmp_path, monkeypatch):
    prices = tmp_path / "llm.toml"
    prices.write_text('[prices]\n"fake-coder" = [2.0, 8.0]\n')
    monkeypatch.setenv("BEFAIR_LLM_CONFIG", str(prices))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_MODEL", "BEFAIR_LLM_REVIEW_MODEL"):
        monkeypatch.delenv(var, raising=False)


def test_short_llm_session_completes_with_tokens_cost_and_guidance(workspace, tmp_path, llm_env, capsys):
    db = tmp_path / "s.db"
    with FakeChatServer(default=AutoResponder(buggy_drafts=1)) as srv:
        code = main([
            "run", "--headless", "--quiet", "--coder", "openai", "--model", "fake-coder",
            "--base-url", srv.base_url, "--data", str(workspace.root), "--steps", "3",
            "--num-drafts", "2", "--step-timeout", "120", "--db", str(db),
            "--session-id", "llm-e2e", "--guidance", GUIDANCE,
        ])
        requests = srv.chat_requests
        usage_in, usage_out = srv.total_usage
    assert code == 0, capsys.readouterr().err

    store = SessionStore(db)
    state = store.state("llm-e2e")
    assert state.status == "finished"
    assert state.coder["name"] == "openai" and state.coder["simulated"] is False
    assert len(state.nodes) == 3
    # The first draft was scripted with a bug; the other pipelines run and are measured.
    assert state.nodes[1].status == "buggy"
    measured = [n for n in state.nodes.values() if n.status == "ok"]
    assert measured and all(n.val_auc is not None for n in measured)

    # Every request is accounted for as an llm_call event; totals add up to the server's usage.
    calls = [e for e in store.events("llm-e2e") if e.kind == ev.LLM_CALL]
    assert len(calls) == len(requests)
    assert (state.tokens_in, state.tokens_out) == (usage_in, usage_out) and usage_in > 0
    expected_cost = (usage_in * 2.0 + usage_out * 8.0) / 1e6
    assert state.cost == pytest.approx(expected_cost, rel=1e-6)
    assert sum(n.tokens_in for n in state.nodes.values()) == usage_in
    assert store.session("llm-e2e")["cost"] == pytest.approx(expected_cost, rel=1e-6)

    # The expert's guidance reaches every coding prompt, marked as the domain expert's.
    coding = [r for r in requests if "evaluate the output of the code execution" not in r.text]
    assert coding and all(GUIDANCE in r.text for r in coding)
    assert all("expert" in r.text.lower() for r in coding)


def test_the_conversation_is_recorded_and_streamed(workspace, tmp_path, llm_env):
    """Every call stores what the agent was told and its raw reply, once: streamed replies leave
    llm_stream events with offsets and times only (never the text), the last one of each call at
    the reply's length, and the live side channel is gone when the session ends."""
    db = tmp_path / "c.db"
    with FakeChatServer(default=AutoResponder()) as srv:
        code = main(["run", "--headless", "--quiet", "--coder", "openai", "--model", "fake-coder",
                     "--base-url", srv.base_url, "--data", str(workspace.root), "--steps", "2",
                     "--num-drafts", "2", "--step-timeout", "120", "--db", str(db), "--session-id", "conv",
                     "--guidance", GUIDANCE])
    assert code == 0
    store = SessionStore(db)
    events = store.events("conv")
    state = store.state("conv")
    calls = [e for e in events if e.kind == ev.LLM_CALL]
    assert calls and all(c.payload["messages"] and c.payload["reply"] for c in calls if c.payload["ok"])
    told = " ".join(m["content"] for m in calls[0].payload["messages"] if isinstance(m.get("content"), str))
    assert state.instruction in told and GUIDANCE in told
    progress: list[dict] = []
    checked = 0
    for e in events:
        if e.kind == ev.LLM_STREAM:
            assert "delta" not in e.payload and "text" not in e.payload
            assert set(e.payload) >= {"role", "step", "chars", "tokens", "elapsed_s"}
            progress.append(e.payload)
        elif e.kind == ev.LLM_CALL:
            if progress:
                assert progress[-1]["chars"] == len(e.payload["reply"]) and progress[-1]["tokens"] >= 1
                assert [p["chars"] for p in progress] == sorted(p["chars"] for p in progress)
                assert e.payload["server_model"] == "fake-coder"
                checked += 1
            progress = []
    assert checked >= 1, "no reply was streamed"
    stored = sum(len(json.dumps(e.payload)) for e in events if e.kind == ev.LLM_STREAM)
    replies = sum(len(e.payload["reply"]) for e in calls)
    assert stored < replies, "the stream events must not repeat the replies"
    from engine.session import live_reply

    assert not live_reply.live_path(db, "conv").exists()
    node = state.nodes[1]
    assert node.conversation and node.conversation[0]["reply"]
    store.close()
