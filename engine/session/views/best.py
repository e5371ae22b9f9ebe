"""The best node by each criterion, and why (decided in engine.session.selection: pruned and failed
nodes are never chosen), with how sure the choice is."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from engine.session import selection
from engine.session.state import SessionState, derived

CRITERIA = selection.CRITERIA
CRITERION_WORDS = selection.CRITERION_WORDS


@dataclass(frozen=True)
class BestChoice:
    criterion: str
    node_id: int | None
    reason: str
    recorded: bool     # the engine's recorded final choice (True) or computed from the state so far
    ties: tuple[int, ...] | None = None   # nodes that cannot be told apart from it; None: not compared

    @property
    def uncertainty(self) -> str:
        """How sure the choice is, in words ("" when nothing was compared)."""
        if self.node_id is None or self.ties is None:
            return "" if self.criterion != "claimed" or self.node_id is None else NO_INTERVAL_CLAIM
        return tie_sentence(self.node_id, self.ties)


NO_INTERVAL_CLAIM = "an agent's own score has no interval: it was not measured here"


def tie_sentence(leader: int, ties: Iterable[int], split: str = "validation") -> str:
    others = sorted(set(ties) - {leader})
    if not others:
        return f"node {leader} is told apart from every other node on {split} (paired bootstrap, 95 %)"
    ids = [leader, *others]
    names = ", ".join(str(n) for n in ids[:-1]) + f" and {ids[-1]}"
    return f"nodes {names} cannot be told apart on {split} (paired bootstrap, 95 %)"


def session_criterion(state: SessionState) -> str:
    return selection.current_criterion(state)


def _not_considered(state: SessionState) -> str:
    """Why nodes are out of the running: pruned (it or an ancestor) or not working."""
    return derived(state, "not_considered", lambda: _count_not_considered(state))


def _count_not_considered(state: SessionState) -> str:
    pruned = state.pruned_ids()
    failed = sum(1 for n in state.nodes.values() if n.node_id not in pruned and selection.is_failed(n))
    parts = [f"{len(pruned)} pruned"] if pruned else []
    if failed:
        parts.append(f"{failed} failed")
    return f"; not considered: {', '.join(parts)}" if parts else ""


def _computed_reason(state: SessionState, criterion: str, node_id: int | None) -> str:
    node = state.nodes.get(node_id) if node_id is not None else None
    return selection.reason(node, criterion) + _not_considered(state)


def best_choice(state: SessionState, criterion: str | None = None) -> BestChoice:
    """The best node by one criterion (default: the one ★ follows now). After the end it is the
    engine's recorded final choice; before, the same rule on the state so far."""
    criterion = criterion or session_criterion(state)
    node_id = selection.choice(state, criterion)
    recorded = state.final_choice or {}
    if f"by_{criterion}" in recorded:
        reason = str((recorded.get("reasons") or {}).get(criterion) or "the engine's final choice")
        tied = (recorded.get("ties") or {}).get(criterion)
        if not isinstance(tied, list):
            tied = selection.ties(state, criterion)
        return BestChoice(criterion, node_id, reason, True, tuple(int(n) for n in tied) if tied is not None else None)
    ties_now = selection.ties(state, criterion)
    return BestChoice(criterion, node_id, _computed_reason(state, criterion, node_id), False,
                      tuple(ties_now) if ties_now is not None else None)


def best_by_criterion(state: SessionState) -> dict[str, BestChoice]:
    return {c: best_choice(state, c) for c in CRITERIA}


def best_id(state: SessionState, criterion: str | None = None) -> int | None:
    """The ★ node (best_choice(...).node_id without the reason: the console asks after every batch)."""
    return selection.choice(state, criterion)


def final_choices(state: SessionState) -> dict[str, int | None]:
    """Best node id by each criterion (recorded final choice where there is one, else computed)."""
    return selection.choices(state)


def best_nodes(state: SessionState) -> dict[int, list[str]]:
    """node id -> the criteria it is best by (claimed, validation, minimax), in criteria order."""
    out: dict[int, list[str]] = {}
    for criterion, choice in best_by_criterion(state).items():
        if choice.node_id is not None and choice.node_id in state.nodes:
            out.setdefault(choice.node_id, []).append(criterion)
    return out
