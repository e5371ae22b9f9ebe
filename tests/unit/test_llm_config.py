"""LlmConfig: sources and precedence, the 'how to configure' message, prices, budget."""
from __future__ import annotations

import json

import pytest

from engine.agent.coder_registry import build_llm_coder, llm_config_for_session
from engine.coders.llm.coder import LlmCoder
from engine.coders.llm.config import (
    DEFAULT_MODEL,
    DUMMY_API_KEY,
    LlmConfig,
    LlmConfigError,
    over_budget,
)
from engine.agent.session_config import SessionConfig
from engine.coders.protocol import CoderBase
from engine.errors import BefairError


@pytest.fixture
def clean_env(tmp_path, monkeypatch):
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_CONFIG", "BEFAIR_LLM_MODEL",
                "BEFAIR_LLM_REVIEW_MODEL", "BEFAIR_LLM_BUDGET"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))


def test_no_key_no_base_url_says_how_to_configure(tmp_path, clean_env):
    cfg = LlmConfig.load(env={"HOME": str(tmp_path)})
    assert cfg.model == DEFAULT_MODEL
    msg = cfg.problem()
    assert msg and "OPENAI_API_KEY" in msg and "OPENAI_BASE_URL" in msg and "offline" in msg
    with pytest.raises(LlmConfigError) as e:
        LlmCoder(cfg)
    assert isinstance(e.value, BefairError)
    with pytest.raises(BefairError, match="OPENAI_API_KEY"):
        build_llm_coder(model="m")


def test_local_server_without_key_uses_a_dummy_key(tmp_path):
    cfg = LlmConfig.load(env={"OPENAI_BASE_URL": "http://localhost:11434/v1", "HOME": str(tmp_path)})
    assert cfg.problem() is None
    assert cfg.effective_api_key == DUMMY_API_KEY
    assert cfg.base_url == "http://localhost:11434/v1"


def test_precedence_defaults_file_env_overrides(tmp_path):
    f = tmp_path / "llm.toml"
    f.write_text(
        'model = "from-file"\nreview_model = "reviewer"\ntemperature = 0.2\nbudget = 1.5\n'
        'base_url = "http://file/v1"\n[prices]\n"from-file" = [1.0, 2.0]\n'
    )
    cfg = LlmConfig.load(env={"BEFAIR_LLM_CONFIG": str(f)})
    assert (cfg.model, cfg.review_model, cfg.temperature, cfg.budget_usd) == ("from-file", "reviewer", 0.2, 1.5)
    assert cfg.price("from-file") == (1.0, 2.0) and cfg.price("gpt-4.1-mini") is not None
    env = {"BEFAIR_LLM_CONFIG": str(f), "OPENAI_BASE_URL": "http://env/v1", "BEFAIR_LLM_MODEL": "from-env"}
    cfg = LlmConfig.load(env=env)
    assert (cfg.model, cfg.base_url) == ("from-env", "http://env/v1")
    cfg = LlmConfig.load({"model": "from-cli", "base_url": None, "temperature": 0.9}, env=env)
    assert (cfg.model, cfg.base_url, cfg.temperature) == ("from-cli", "http://env/v1", 0.9)
    assert "command line" in cfg.source and str(f) in cfg.source


def test_default_file_in_home_and_json_files(tmp_path):
    home = tmp_path / "home"
    (home / ".config" / "befair").mkdir(parents=True)
    (home / ".config" / "befair" / "llm.toml").write_text('[llm]\nmodel = "home-model"\napi_key = "sk-x"\n')
    cfg = LlmConfig.load(env={"HOME": str(home)})
    assert cfg.model == "home-model" and cfg.problem() is None
    j = tmp_path / "c.json"
    j.write_text(json.dumps({"model": "json-model", "max_retries": 1, "prices": {"json-model": [3, 4]}}))
    cfg = LlmConfig.load(path=j, env={})
    assert (cfg.model, cfg.max_retries, cfg.price("json-model")) == ("json-model", 1, (3.0, 4.0))


@pytest.mark.parametrize("text,word", [
    ("model = [unclosed", "not valid"),
    ('modle = "typo"', "unknown setting"),
    ('temperature = "hot"', "temperature"),
    ('prices = {m = "cheap"}', "price"),
])
def test_bad_config_files_are_user_errors(tmp_path, text, word):
    f = tmp_path / "llm.toml"
    f.write_text(text)
    with pytest.raises(LlmConfigError, match=word):
        LlmConfig.load(path=f, env={})


def test_missing_file_and_unknown_override(tmp_path):
    with pytest.raises(LlmConfigError, match="cannot read"):
        LlmConfig.load(path=tmp_path / "nope.toml", env={})
    with pytest.raises(LlmConfigError, match="unknown llm setting"):
        LlmConfig.load({"modle": "x"}, env={})


def test_prices_prefix_and_unknown_models():
    cfg = LlmConfig(api_key="k")
    assert cfg.price("gpt-4.1-mini-2025-04-14") == cfg.prices["gpt-4.1-mini"]
    assert cfg.price("gpt-4.1-2025-04-14") == cfg.prices["gpt-4.1"]
    assert cfg.cost("llama3:8b", 10_000, 10_000) == 0.0
    assert cfg.cost("gpt-4.1-mini", 1_000_000, 1_000_000) == pytest.approx(0.40 + 1.60)


def test_over_budget():
    assert not over_budget(100.0, LlmConfig())
    cfg = LlmConfig(budget_usd=0.5)
    assert not over_budget(0.49, cfg) and over_budget(0.5, cfg) and over_budget(0.51, cfg)
    assert over_budget(2, 1.0) and not over_budget(2, None)


def test_public_dict_never_holds_the_key():
    d = LlmConfig(api_key="sk-secret", base_url="http://x/v1").public_dict()
    assert "sk-secret" not in json.dumps(d) and d["api_key_set"] is True


def test_session_config_and_build(tmp_path, clean_env):
    sc = SessionConfig(coder="openai", model="gpt-4.1", step_timeout=120,
                       extra={"llm": {"temperature": 0.1, "api_key": "ignored", "review_model": "r"}})
    cfg = llm_config_for_session(sc, {"base_url": "http://127.0.0.1:9/v1"}, env={"HOME": str(tmp_path)})
    assert (cfg.model, cfg.temperature, cfg.review_model, cfg.api_key) == ("gpt-4.1", 0.1, "r", None)
    coder = build_llm_coder(sc, base_url="http://127.0.0.1:9/v1")
    assert coder.label == "LLM coder (gpt-4.1)" and coder.name == "openai" and not coder.simulated
    assert coder.exec_timeout == 120 and coder.review_model == "r"
    assert coder.describe()["model"] == "gpt-4.1"


def test_invalid_values():
    with pytest.raises(LlmConfigError):
        LlmConfig(model="")
    with pytest.raises(LlmConfigError):
        LlmConfig(timeout=0)
    with pytest.raises(LlmConfigError):
        LlmConfig(max_retries=-1)


def test_cli_flags_roundtrip(tmp_path, clean_env):
    import argparse

    from engine.coders.llm.config import add_cli_arguments

    f = tmp_path / "c.toml"
    f.write_text('model = "file-model"\ntemperature = 0.3\n')
    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    args = parser.parse_args(["--base-url", "http://127.0.0.1:8000/v1", "--llm-timeout", "30",
                              "--llm-retries", "1", "--budget", "2.5", "--llm-config", str(f)])
    cfg = config_from_cli(args)
    assert (cfg.model, cfg.temperature, cfg.base_url) == ("file-model", 0.3, "http://127.0.0.1:8000/v1")
    assert (cfg.timeout, cfg.max_retries, cfg.budget_usd) == (30.0, 1, 2.5)
    cfg = config_from_cli({"model": "m2", "api_key": "sk-1"})
    assert cfg.model == "m2" and cfg.problem() is None


class _OneCallCoder(CoderBase):
    """Answers every step with no code and the LlmCalls it is given: what the runner stores."""
    name, label, simulated = "one-call", "one-call coder (test)", True

    def __init__(self, calls):
        self.calls = calls

    def draft(self, ctx):
        from engine.coders.protocol import CoderReply

        return CoderReply(plan="p", code=None, error="no code", llm_calls=list(self.calls))

    def improve(self, ctx, parent):
        return self.draft(ctx)

    def debug(self, ctx, parent):
        return self.draft(ctx)

    def review(self, ctx, node):
        raise AssertionError("a node without code is not reviewed")


def test_call_payload_matches_the_event_schema(tmp_path, workspace):
    """The llm_call events the runner really stores carry every key of events.py's schema."""
    from engine.agent.runner import run
    from engine.agent.session_setup import start_session
    from engine.coders.protocol import LlmCall
    from engine.session import events as ev
    from engine.session.store import SessionStore

    streamed = LlmCall(role="draft", model="m", tokens_in=3, tokens_out=2, latency_s=0.5, cost=0.01,
                       tokens_estimated=True, messages=[{"role": "user", "content": "hi"}], reply="ok",
                       first_token_s=0.1, tokens_per_s=20.0, server_model="m-1")
    failed = LlmCall(role="draft", model="m", ok=False, error="timeout")
    coder = _OneCallCoder([streamed, failed])
    store = SessionStore(tmp_path / "befair.db")
    try:
        writer = start_session(store, SessionConfig(data=str(workspace.root), steps=1, num_drafts=1),
                               workspace=workspace, coder=coder)
        run(store, writer.session_id, coder=coder, workspace=workspace)
        payloads = [e.payload for e in store.events(writer.session_id) if e.kind == ev.LLM_CALL]
    finally:
        store.close()
    assert payloads == [
        {"node_id": 1, "role": "draft", "model": "m", "tokens_in": 3, "tokens_out": 2, "latency_s": 0.5,
         "cost": 0.01, "ok": True, "error": None, "tokens_estimated": True,
         "messages": [{"role": "user", "content": "hi"}], "reply": "ok",
         "first_token_s": 0.1, "tokens_per_s": 20.0, "server_model": "m-1"},
        # the streaming figures are absent when the call has none (events.py: `?`)
        {"node_id": 1, "role": "draft", "model": "m", "tokens_in": 0, "tokens_out": 0, "latency_s": 0.0,
         "cost": 0.0, "ok": False, "error": "timeout", "tokens_estimated": False, "messages": [],
         "reply": ""},
    ]
    json.dumps(payloads)


def test_limits_defaults():
    cfg = LlmConfig()
    # the stall timeout and the token cap bound a call; no wall-clock budget cuts a streaming reply
    assert (cfg.timeout, cfg.max_retries, cfg.call_budget_s) == (120.0, 2, None)
    assert LlmConfig(call_budget_s=0).call_budget_s is None          # 0: off, as the flag says
    assert (cfg.max_tokens, cfg.review_max_tokens, cfg.stream) == (4096, 512, True)
    assert [cfg.max_tokens_for(r) for r in ("draft", "improve", "debug", "review")] == [4096] * 3 + [512]


def test_limits_from_the_config_file_and_old_retry_keys_accepted(tmp_path):
    f = tmp_path / "llm.toml"
    f.write_text('max_tokens = 2048\nreview_max_tokens = 0\ncall_budget_s = 60\nstream = false\n'
                 'timeout = 30\nmax_retries = 1\n'
                 'retry_base_delay = 1.0\nretry_max_delay = 60.0\n')   # settings of earlier versions
    cfg = LlmConfig.load(path=f, env={})
    assert (cfg.max_tokens, cfg.review_max_tokens, cfg.call_budget_s, cfg.stream) == (2048, None, 60.0, False)
    assert (cfg.timeout, cfg.max_retries) == (30.0, 1)
    assert cfg.max_tokens_for("review") is None


def test_limits_from_cli_flags(tmp_path, clean_env):
    import argparse

    from engine.coders.llm.config import add_cli_arguments, cli_overrides

    parser = argparse.ArgumentParser()
    add_cli_arguments(parser)
    args = parser.parse_args(["--base-url", "http://127.0.0.1:8080/v1", "--max-tokens", "1000",
                              "--review-max-tokens", "128", "--llm-call-budget", "90",
                              "--llm-timeout", "20", "--llm-retries", "0"])
    cfg = config_from_cli(args)
    assert (cfg.max_tokens, cfg.review_max_tokens, cfg.call_budget_s) == (1000, 128, 90.0)
    assert (cfg.timeout, cfg.max_retries) == (20.0, 0)
    # what a session records (extra["llm"]) so that a resume uses the same limits
    assert cli_overrides(args) == {"base_url": "http://127.0.0.1:8080/v1", "max_tokens": 1000,
                                   "review_max_tokens": 128, "call_budget_s": 90.0,
                                   "timeout": 20.0, "max_retries": 0}
    off = config_from_cli(parser.parse_args(["--api-key", "k", "--max-tokens", "0"]))
    assert off.max_tokens is None and off.review_max_tokens == 512 and off.seed is None
    seeded = parser.parse_args(["--api-key", "k", "--llm-seed", "1000"])
    assert config_from_cli(seeded).seed == 1000 and cli_overrides(seeded)["seed"] == 1000


@pytest.mark.parametrize("kw,word", [
    ({"max_tokens": -1}, "max_tokens"),
    ({"review_max_tokens": "lots"}, "review_max_tokens"),
    ({"call_budget_s": -5}, "call_budget_s"),
    ({"stream": "sometimes"}, "stream"),
    ({"seed": "lucky"}, "seed"),
])
def test_invalid_limits(kw, word):
    with pytest.raises(LlmConfigError, match=word):
        LlmConfig(**kw)


def config_from_cli(args, env=None):
    """What the CLI's flags make of a config: the flags over the file they name and the environment."""
    from engine.coders.llm.config import LlmConfig, cli_overrides

    get = args.get if isinstance(args, dict) else (lambda k, d=None: getattr(args, k, d))
    return LlmConfig.load(cli_overrides(args), env=env, path=get("llm_config"))
