"""The task protocol is chosen once (engine.agent.task_protocol): each carries its prompt set,
its coder context, its data preview and layout, and the rules its sessions follow."""
from __future__ import annotations

import pytest

from engine.agent.session_config import PROTOCOLS, SessionConfig
from engine.agent.task_protocol import BE_FAIR, BEFAIR, TASK_PROTOCOLS, task_protocol
from engine.coders.llm.prompts import PROMPT_SETS, draft_prompt, review_prompt
from engine.coders.protocol import CoderContext, NodeView
from engine.errors import BefairError
from engine.session.selection import CRITERIA
from engine.session.state import SessionState


def _context() -> CoderContext:
    return CoderContext(instruction="Classify.", metric_line="AUROC", data_preview="preview", step=1, seed=0)


def test_one_protocol_per_name_and_an_unknown_name_is_refused():
    assert tuple(TASK_PROTOCOLS) == PROTOCOLS == ("befair", "be-fair")
    assert task_protocol("befair") is BEFAIR and task_protocol("be-fair") is BE_FAIR
    with pytest.raises(BefairError, match="unknown task protocol 'aide'"):
        task_protocol("aide")


@pytest.mark.parametrize("name", PROTOCOLS)
def test_the_context_a_protocol_builds_gets_its_prompt_set(name):
    protocol = task_protocol(name)
    ctx = protocol.context(_context(), SessionState(session_id="s"))
    assert ctx.protocol == name and PROMPT_SETS[ctx.protocol] is protocol.prompts
    node = NodeView(node_id=1, stage="draft", plan="", code="print(1)", status="ok", output="AUROC 0.7")
    assert draft_prompt(ctx, 60) == protocol.prompts.draft(ctx, 60)
    assert review_prompt(ctx, node, json_only=True) == protocol.prompts.review(ctx, node, True)


def test_the_be_fair_rules():
    with pytest.raises(BefairError, match="offline coder"):
        BE_FAIR.check_coder("offline")
    BE_FAIR.check_coder("openai")
    BEFAIR.check_coder("offline")
    assert [c for c in CRITERIA if BE_FAIR.allows_criterion(c)] == ["claimed"]
    assert all(BEFAIR.allows_criterion(c) for c in CRITERIA)
    assert BE_FAIR.reviews_crashes and not BEFAIR.reviews_crashes
    assert BEFAIR.checks_contract and not BE_FAIR.checks_contract   # AIDE fails no run before its review


def test_llm_settings_follow_the_protocol():
    """be-fair: AIDE's feedback temperature and no token cap; the product's own defaults otherwise;
    a setting a person gives wins over either."""
    from engine.agent.coder_registry import llm_config_for_session

    study = SessionConfig(protocol="be-fair", best="claimed", coder="openai")
    aide = llm_config_for_session(study, {"base_url": "http://localhost:1/v1"}, env={})
    settings = (aide.temperature, aide.review_temperature, aide.max_tokens, aide.review_max_tokens)
    assert settings == (0.5, 0.5, None, None)
    assert "protocol defaults" in aide.source
    capped = llm_config_for_session(study, {"base_url": "http://localhost:1/v1", "max_tokens": 4096}, env={})
    assert capped.max_tokens == 4096
    own = llm_config_for_session(SessionConfig(coder="openai"), {"base_url": "http://localhost:1/v1"}, env={})
    assert (own.review_temperature, own.max_tokens, own.review_max_tokens) == (0.0, 4096, 512)
    config = SessionConfig(protocol="be-fair", best="claimed", policy="befair")
    assert config.blind_test and config.policy == "aide"
    assert not SessionConfig().blind_test and SessionConfig().policy == "befair"
