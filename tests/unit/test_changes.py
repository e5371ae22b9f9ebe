"""What an event changes is decided once (engine.session.changes): the writer's rows and the
console's redraws read the same record."""
from __future__ import annotations

from engine.session import events as ev
from engine.session.changes import Changes, apply_changes
from engine.session.state import new_state


def _event(seq: int, kind: str, **payload: object) -> ev.Event:
    return ev.Event(seq=seq, kind=kind, payload=dict(payload), ts=float(seq), session_id="s")


def _session() -> tuple:
    state = new_state()
    changes = Changes()
    apply_changes(state, _event(1, ev.SESSION_STARTED, config={"steps": 3}, instruction="", coder={}, data={}),
                  changes)
    return state, changes


def test_a_new_node_touches_itself_its_parent_and_its_guidance():
    state, _ = _session()
    apply_changes(state, _event(2, ev.NODE_CREATED, node_id=1, parent_id=None, stage="draft", step=1,
                                guidance_ids=[]))
    changes = apply_changes(state, _event(3, ev.NODE_CREATED, node_id=2, parent_id=1, stage="improve", step=2,
                                          guidance_ids=[7]))
    assert changes.nodes == {1, 2} and changes.guidance == {7} and changes.rows == {2}
    assert changes.best and changes.scores and changes.summary


def test_output_changes_no_row_and_is_carried_as_text():
    state, _ = _session()
    apply_changes(state, _event(2, ev.NODE_CREATED, node_id=1, parent_id=None, stage="draft", step=1,
                                guidance_ids=[]))
    changes = Changes()
    apply_changes(state, _event(3, ev.OUTPUT, node_id=1, text="epoch 1\n", stream="stdout"), changes)
    apply_changes(state, _event(4, ev.OUTPUT, node_id=1, text="epoch 2\n", stream="stdout"), changes)
    assert changes.output == {1: ["epoch 1\n", "epoch 2\n"]}
    assert not (changes.nodes or changes.rows or changes.best or changes.summary)


def test_pruning_redraws_the_subtree_and_may_move_the_best():
    state, _ = _session()
    apply_changes(state, _event(2, ev.NODE_CREATED, node_id=1, parent_id=None, stage="draft", step=1,
                                guidance_ids=[]))
    changes = apply_changes(state, _event(3, ev.PRUNED, node_id=1, by="u", command_id=None))
    assert changes.subtrees == {1} and changes.rows == {1} and changes.best


def test_a_policy_decision_changes_nothing_drawn():
    state, _ = _session()
    changes = apply_changes(state, _event(2, ev.POLICY_DECISION, action="draft", reason="r", node_id=None))
    assert not changes
