"""A real session records its operating point with every evaluation: the setting it was started
with reaches the evaluator, and each node's validation and test summaries carry the block."""
from __future__ import annotations

import pytest

from engine.agent.runner import run
from engine.agent.session_setup import start_session
from engine.agent.session_config import SessionConfig
from engine.measures import operating_point as op
from engine.session import events as ev
from engine.session.store import SessionStore


@pytest.fixture()
def store(tmp_path):
    s = SessionStore(tmp_path / "db" / "befair.db")
    yield s
    s.close()


@pytest.mark.slow
def test_a_session_started_with_a_fixed_cut_off_records_it_on_every_evaluation(store, workspace):
    from engine.coders.offline import OfflineCoder

    config = SessionConfig(steps=1, num_drafts=1, failure_rate=0.0, seed=3, data=str(workspace.root),
                           step_timeout=120, operating_point="probability:0.3")
    coder = OfflineCoder(failure_rate=0.0, seed=3)
    writer = start_session(store, config, workspace=workspace, coder=coder)
    state = run(store, writer.session_id, coder=coder, workspace=workspace)
    evaluated = [e.payload for e in store.events(writer.session_id) if e.kind == ev.EVALUATED]
    assert {p["split"] for p in evaluated} == {"validation", "test"} and all(p["ok"] for p in evaluated)
    for payload in evaluated:
        block = payload["summary"][op.KEY]
        assert (block["setting"], block["threshold"], block["chosen_on"]) == ("probability:0.30", 0.3, "fixed")
        assert set(block["groups"]) == {"group_0", "group_1", "group_2"}
    node = state.nodes[1]
    point = node.validation.operating_point
    assert point is not None and point.overall.n == node.validation.n
    assert node.test.operating_point is not None
