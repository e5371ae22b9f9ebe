"""Who sees test metrics, and when.

A participant sees a blinded session's test metrics when the session ends, unless the session
belongs to a study (`study_id` set), which keeps them blind for good; a researcher sees them with
`unblind=True` (`--unblind`)."""
from __future__ import annotations

from typing import Any

from engine.measures.summary import EvaluationSummary
from engine.session.state import ENDED, NodeState, SessionState, derived

BLINDED_NOTE = "test metrics hidden until the session ends"
STUDY_BLINDED_NOTE = "test metrics blinded for this study"


def ended(state: SessionState) -> bool:
    """Nothing runs the session any more: its status is one of ENDED."""
    return state.status in ENDED


def kept_blind(state: SessionState) -> bool:
    """A study's session keeps its blinded test metrics blind after the end (researchers unblind)."""
    return bool(state.config.get("study_id"))


def blinds_test(state: SessionState) -> bool:
    """Does the session blind test metrics at all (its setting, or a node evaluated blinded)?"""
    return bool(state.config.get("blind_test")) or derived(
        state, "test_blinded", lambda: any(n.test_blinded for n in state.nodes.values()))


def test_revealed(state: SessionState) -> bool:
    """Blinded test metrics are revealed to participants once the session ends, unless a study
    keeps them blind."""
    return ended(state) and not kept_blind(state)


def test_visible(state: SessionState, node: NodeState, unblind: bool = False) -> bool:
    """May this reader see the node's test metrics? `unblind`: a researcher's explicit request."""
    if unblind or not (node.test_blinded or state.config.get("blind_test")):
        return True
    return test_revealed(state)


def test_hidden(state: SessionState, unblind: bool = False) -> bool:
    """Does this session hide test metrics from this reader right now?"""
    return not unblind and blinds_test(state) and not test_revealed(state)


def blinded_note(state: SessionState) -> str:
    return STUDY_BLINDED_NOTE if kept_blind(state) else BLINDED_NOTE


def visible_test(state: SessionState, node: NodeState, unblind: bool = False) -> EvaluationSummary | None:
    """The node's test summary when this reader may see it, else None."""
    return node.test if test_visible(state, node, unblind) else None


def test_withheld(state: SessionState, node: NodeState, unblind: bool = False) -> bool:
    """The node was measured on test but this reader may not see it (or it is sealed)."""
    measured = node.test is not None or node.eval_verdicts.get("test") == "ok"
    return measured and (not test_visible(state, node, unblind) or node.test is None)


def visibility(state: SessionState, unblind: bool = False) -> dict[str, Any]:
    """What this reader sees of the test metrics, for JSON."""
    hidden = test_hidden(state, unblind)
    return {"audience": "researcher" if unblind else "participant", "blinds_test": blinds_test(state),
            "kept_blind": kept_blind(state), "revealed": test_revealed(state), "test_hidden": hidden,
            "note": blinded_note(state) if hidden else None}
