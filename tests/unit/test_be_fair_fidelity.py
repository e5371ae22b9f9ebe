"""`--protocol be-fair` is the study's AIDE (anna-richter/aideml 989e8e2), checked against the run.

The fixture (tests/fixtures/aide_fidelity/, made by running AIDE's own code; its README says how)
holds, for each node of the published journal, the system message AIDE sends to write it and to
review it, and AIDE's own search decision with its coin flips read from the journal. Here
befair rebuilds each prompt the way its runner does (the journal imported as events, the state
folded up to the node, the be-fair protocol's context and prompt set) and must send the same
bytes; its policy must make the same choice. The parts that need only the fixture run always;
the rest needs the journal (../shared/data/aide_journal_example) and skips without it.
"""
from __future__ import annotations

import dataclasses
import json
import random
from pathlib import Path
from typing import Any

import pytest

from engine.agent.policy import decide
from engine.agent.task_protocol import BE_FAIR
from engine.coders.llm import prompts
from engine.coders.llm.prompts_be_fair import AIDE_REVIEW_TOOL, BeFairContext, natural_delta
from engine.coders.llm.response_parsing import aide_review
from engine.coders.protocol import CoderContext, NodeView
from engine.session.state import NodeState, SessionState, fold
from engine.task import METRIC_LINE

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "aide_fidelity" / "aide_journal_example.json"
SHARED = Path(__file__).resolve().parents[2].parent / "shared"
RUN = SHARED / "data" / "aide_journal_example"


@pytest.fixture(scope="module")
def fixture() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text(encoding="utf-8"))


# -- the fixture alone --------------------------------------------------------------------------

def test_time_limit_is_worded_as_humanize_words_it(fixture):
    assert {s: natural_delta(int(s)) for s in fixture["naturaldelta"]} == fixture["naturaldelta"]


def test_review_tool_is_aides(fixture):
    assert AIDE_REVIEW_TOOL == fixture["review_tool"]
    assert prompts.PROMPT_SETS[BeFairContext.protocol].review_tool == fixture["review_tool"]


def test_llm_settings_are_the_runs(fixture):
    defaults = BE_FAIR.llm_defaults
    node = fixture["nodes"][0]
    assert defaults["temperature"] == node["temperature"] == fixture["config"]["code_temp"]
    assert defaults["review_temperature"] == node["review"]["temperature"] == fixture["config"]["feedback_temp"]
    assert node["max_tokens"] is None and defaults["max_tokens"] == 0          # 0: no cap sent
    assert node["review"]["max_tokens"] is None and defaults["review_max_tokens"] == 0


def test_first_draft_prompt_from_the_fixture_alone(fixture):
    """Node 0's prompt needs nothing of the journal: an empty memory, the task and the preview."""
    ctx = _context(fixture, instruction=fixture["task"]["Task goal"], state=SessionState(), order=0)
    assert fixture["task"]["Task evaluation"] == METRIC_LINE
    assert _sent(prompts.draft_prompt(ctx, fixture["exec_timeout"])) == fixture["nodes"][0]["system"]


def test_the_fixture_was_checked_against_aides_log(fixture):
    nodes = fixture["nodes"]
    assert all(n["matches_aide_log"] and n["review"]["matches_aide_log"] for n in nodes)
    assert all(n["policy"]["matches_journal"] for n in nodes)


# -- against the journal --------------------------------------------------------------------------

@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    if not (RUN / "journal.json").is_file():
        pytest.skip("../shared/data/aide_journal_example is not present")
    from engine.imports.aide import import_aide
    from engine.session.store import SessionStore

    store = SessionStore(tmp_path_factory.mktemp("fidelity") / "aide.db")
    try:
        sid = import_aide(store, RUN)
        yield store.events(sid)
    finally:
        store.close()


def _before(events: list[Any], node_id: int) -> SessionState:
    """The session as the runner held it when it asked for node `node_id`."""
    cut = next(i for i, e in enumerate(events) if e.kind == "node_created" and e.payload["node_id"] == node_id)
    state = fold(events[:cut])
    for node in state.nodes.values():
        node.origin = "agent"   # imported nodes are the agent's own steps here
    return state


def _context(fixture: dict[str, Any], *, instruction: str, state: SessionState, order: int) -> BeFairContext:
    """The step's context as the runner builds it (engine.agent.context), in the protocol's shape,
    with AIDE's package order for that prompt read from its log."""
    ctx = CoderContext(instruction=instruction, metric_line=METRIC_LINE, data_preview=fixture["data_preview"],
                       step=state.agent_steps + 1, seed=0)
    aide = BE_FAIR.context(ctx, state)
    assert isinstance(aide, BeFairContext)
    order_used = fixture["nodes"][order]["package_order"]    # None: a prompt without the package list
    return dataclasses.replace(aide, packages=None if order_used is None else tuple(order_used))


def _view(node: NodeState) -> NodeView:
    return NodeView(node_id=node.node_id, stage=node.stage, plan=node.plan, code=node.code, status=node.status,
                    output=node.stored_output, exc_type=node.exc_type)


def _sent(prompt: dict[str, Any]) -> str:
    messages = prompts.to_messages(prompt)
    assert [m["role"] for m in messages] == ["system"]       # AIDE sends one system message, no user message
    return str(messages[0]["content"])


def test_every_prompt_is_byte_equal_to_aides(fixture, imported):
    full = fold(imported)
    timeout = float(full.config["step_timeout"])
    assert timeout == fixture["exec_timeout"]
    unequal = []
    for i, expected in enumerate(fixture["nodes"]):
        node_id = i + 1
        state = _before(imported, node_id)
        ctx = _context(fixture, instruction=full.instruction, state=state, order=i)
        parent = None if expected["parent_step"] is None else state.nodes[expected["parent_step"] + 1]
        assert full.nodes[node_id].stage == expected["stage"]
        if parent is None:
            prompt = prompts.draft_prompt(ctx, timeout)
        elif expected["stage"] == "debug":
            prompt = prompts.debug_prompt(ctx, _view(parent), timeout)
        else:
            prompt = prompts.improve_prompt(ctx, _view(parent), timeout)
        if _sent(prompt) != expected["system"]:
            unequal.append(f"node {i} ({expected['stage']})")
        if _sent(prompts.review_prompt(ctx, _view(full.nodes[node_id]))) != expected["review"]["system"]:
            unequal.append(f"node {i} review")
    assert not unequal, f"befair's prompts differ from AIDE's for {unequal}"


def test_every_review_verdict_is_aides(fixture, imported):
    """The journal's answers read by AIDE's rules give the journal's is_buggy."""
    full = fold(imported)
    for i, expected in enumerate(fixture["nodes"]):
        node = full.nodes[i + 1]
        verdict = expected["review"]["verdict"]
        answer = {"is_bug": expected["review"]["journal_verdict"]["is_buggy"], "summary": node.review_summary,
                  "metric": node.claimed_metric, "lower_is_better": verdict["maximize"] is False}
        review = aide_review(answer)
        assert review is not None and review.verdict(node.exc_type) == verdict["is_buggy"], i
        assert node.lower_is_better is None     # an import says nothing of direction: higher is better


class _Flips(random.Random):
    """The policy's draws, set to what the journal shows AIDE drew."""

    def __init__(self, roll: float, parent: int | None) -> None:
        super().__init__(0)
        self.roll, self.parent, self.among = roll, parent, None

    def random(self) -> float:
        return self.roll

    def choice(self, seq: Any) -> Any:
        self.among = [n.node_id for n in seq]
        return next(n for n in seq if n.node_id == self.parent)


def test_the_policy_makes_aides_choices(fixture, imported):
    config = {"policy": "aide", "num_drafts": fixture["config"]["num_drafts"],
              "debug_prob": fixture["config"]["debug_prob"], "max_debug_depth": fixture["config"]["max_debug_depth"]}
    undetermined = []
    for i, expected in enumerate(fixture["nodes"]):
        state, aide = _before(imported, i + 1), expected["policy"]
        parent = None if aide["parent_step"] is None else aide["parent_step"] + 1
        roll = aide["debug_roll"]
        rolls = [0.0, 0.99] if roll.startswith("undetermined") else [0.0 if roll.startswith("below") else 0.99]
        for value in rolls:
            flips = _Flips(value, parent)
            d = decide(state, flips, config)
            assert (d.action, d.node_id) == (aide["action"], parent), (i, value, d.reason)
            if aide["choice_among"] is not None and value < config["debug_prob"]:
                assert flips.among == [s + 1 for s in aide["choice_among"]], i
        if len(rolls) > 1:
            undetermined.append(i)
    # the draw is unknown only where no node could be debugged, so it changed nothing
    assert undetermined == [6, 7, 8, 9, 12, 13, 14, 15, 16, 17, 18, 19]
