"""Which node is best: decided here, and only here.

The policy (which node to improve), the final choice, the sessions row, the views and the console
all ask this module, so they always name the same node.

Candidates: working nodes (ran, the review found no bug, their validation predictions could be
scored) that are not pruned and not under a pruned node. A failed or pruned node is never chosen.

Criteria (`CRITERIA`):
- claimed: the metric the agent itself printed (AIDE's rule). An agent's claim has no interval.
- validation: the measured validation AUC. The default for new sessions, at every level: a level
  is its instruction alone, so the search does not follow a fairness figure unless a person asks
  (a recorded setting, or a recorded `criterion_set`).
- minimax: on the Pareto front of per-group validation AUCs, the node with the best worst group
  (ties: the mean group AUC, then the earlier node). A group that some candidates have an AUC for
  and others not counts as -inf for those (they cannot be shown to be good there); a group no
  candidate has (one class only in a small split) is left out.
- robust: the best lower 95 % bound of the worst-group validation AUC (ties: the worst-group AUC,
  then the earlier node). A node wins only when its worst skin-tone group is good with
  confidence, not by a lucky draw of a few malignant images; with few dark-skin malignant cases
  in validation the point estimates of minimax are mostly noise (issue 20: a chosen node's
  validation gap of .033 was .104 on test, from 3 such images). Nodes without intervals
  (recorded before they existed) are not candidates.

Uncertainty: a leader "cannot be told apart" from another node when the 95 % interval of their
paired difference (the same bootstrap resamples of the same images, engine.measures.uncertainty)
contains 0. The runner works this out (it holds the labels and the predictions) and records it as
a `compared` event; `ties` reads it back for the leader it was computed for.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any, TypeVar

from engine.session import events as ev
from engine.session import figure_text
from engine.session.state import NodeState, SessionState, derived

CRITERIA = ("claimed", "validation", "minimax", "robust")
DEFAULT_CRITERION = "validation"
# What each criterion means, in words a dermatologist reads (help, setup, reasons, reports).
CRITERION_WORDS = {
    "claimed": "the score the agent itself reported (its claim, not measured)",
    "validation": "the measured validation AUC",
    "minimax": "the worst skin-tone group's validation AUC",
    "robust": "the worst skin-tone group's validation AUC, counted at the low end of its 95 % interval",
}
CRITERION_LABEL = {  # a choice's label (setup screen, palette, header)
    "claimed": "agent's own score",
    "validation": "validation AUC",
    "minimax": "worst group AUC",
    "robust": "worst group AUC, low end",
}
CRITERION_SHORT = {"claimed": "agent", "validation": "AUC", "minimax": "worst group", "robust": "worst low end"}
LEGACY_DEFAULT = "validation"   # what a session recorded without a `best` setting used
# The statistic whose paired difference tells two nodes apart, per criterion (claimed: none).
STATISTIC = {"validation": "auc", "minimax": "worst_auc", "robust": "worst_auc"}
# Events after which the best node by some criterion may differ; the others change no figure,
# status, pruning or criterion (the store's sessions row and the console redraw ★ after these).
MAY_CHANGE_BEST = frozenset({
    ev.SESSION_STARTED, ev.NODE_CREATED, ev.EXEC_STARTED, ev.EXEC_FINISHED, ev.REVIEW, ev.EVALUATED,
    ev.NODE_INTERRUPTED, ev.PRUNED, ev.CRITERION_SET, ev.SESSION_RESUMED, ev.FINAL_CHOICE, ev.COMPARED,
})

Vector = Mapping[str, "float | None"]
K = TypeVar("K", bound=Hashable)


# -- the vector rule: Pareto front and minimax (also used for baseline checkpoints) ---------------
def _finite(v: Any) -> bool:
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def _vectors(candidates: Mapping[K, Vector]) -> dict[K, tuple[float, ...]]:
    groups = sorted({g for vec in candidates.values() for g, v in (vec or {}).items() if _finite(v)})
    out: dict[K, tuple[float, ...]] = {}
    for key, vec in candidates.items():
        values = tuple(_as_float((vec or {}).get(g)) for g in groups)
        if groups and any(v != -math.inf for v in values):
            out[key] = values
    return out


def _as_float(value: Any) -> float:
    return float(value) if _finite(value) else -math.inf


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x >= y for x, y in zip(a, b, strict=True)) and any(x > y for x, y in zip(a, b, strict=True))


def pareto_front(candidates: Mapping[K, Vector]) -> list[K]:
    """Keys of the non-dominated candidates, in the mapping's order."""
    vecs = _vectors(candidates)
    return [k for k, v in vecs.items() if not any(dominates(o, v) for j, o in vecs.items() if j != k)]


def _minimax_rank(v: tuple[float, ...]) -> tuple[float, float]:
    finite = [x for x in v if x != -math.inf]
    return min(v), (sum(finite) / len(finite) if finite else -math.inf)


def minimax_pareto(candidates: Mapping[K, Vector]) -> K | None:
    """The Pareto-front candidate with the highest worst-group AUC (ties: mean AUC, then order).

    The candidate with the highest (worst, mean) over all candidates is never dominated when its
    worst group is finite, so one pass finds it; only when every candidate lacks some group's AUC
    is the front computed."""
    vecs = _vectors(candidates)
    best_key, best_rank = None, None
    for key, v in vecs.items():
        rank = _minimax_rank(v)
        if best_rank is None or rank > best_rank:
            best_key, best_rank = key, rank
    if best_rank is None or best_rank[0] != -math.inf:
        return best_key
    best_key, best_rank = None, None
    for key in pareto_front(candidates):
        rank = _minimax_rank(vecs[key])
        if best_rank is None or rank > best_rank:
            best_key, best_rank = key, rank
    return best_key


# -- candidates -----------------------------------------------------------------------------------
def is_failed(node: NodeState) -> bool:
    """Did not run, ran with an error, the review found a bug, or its predictions could not be scored."""
    if node.status != "ok":
        return node.finished
    verdict = node.eval_verdicts.get("validation")
    return bool(node.is_bug) or (verdict is not None and verdict != "ok")


def is_candidate(node: NodeState, pruned: frozenset[int]) -> bool:
    return node.status == "ok" and not is_failed(node) and node.node_id not in pruned


def current_criterion(state: SessionState) -> str:
    """The criterion ★ follows now: the session's setting, or the expert's last switch."""
    criterion = state.criterion or str(state.config.get("best") or LEGACY_DEFAULT)
    return criterion if criterion in CRITERIA else LEGACY_DEFAULT


def figure(node: NodeState, criterion: str) -> float | None:
    """The figure a criterion ranks by (robust: the lower bound of the worst-group AUC)."""
    if criterion == "claimed":
        return node.claimed_metric
    validation = node.validation
    if criterion == "validation":
        return _number(validation.auc) if validation is not None else None
    if criterion == "minimax":
        return _number(validation.worst_auc) if validation is not None else None
    if criterion == "robust":
        bounds = figure_text.interval(validation, "worst_auc")
        return bounds[0] if bounds else None
    raise ValueError(f"unknown criterion {criterion!r}")


def _number(value: Any) -> float | None:
    return float(value) if _finite(value) else None


# -- the best node ----------------------------------------------------------------------------------
def best(state: SessionState, criterion: str) -> NodeState | None:
    """The best candidate by a criterion, from the state so far (earliest node on ties)."""
    if criterion not in CRITERIA:
        raise ValueError(f"unknown criterion {criterion!r}")
    ids = derived(state, "best_ids", lambda: _best_ids(state))
    node_id = ids[criterion]
    return state.nodes.get(node_id) if node_id is not None else None


def _best_ids(state: SessionState) -> dict[str, int | None]:
    pruned = state.pruned_ids()
    nodes = [n for n in sorted(state.nodes.values(), key=lambda n: n.node_id) if is_candidate(n, pruned)]
    out: dict[str, int | None] = {c: _argmax(nodes, c) for c in ("claimed", "validation")}
    vectors = {n.node_id: dict(n.validation.group_auc) for n in nodes if n.validation is not None}
    out["minimax"] = minimax_pareto(vectors) if vectors else None
    out["robust"] = _robust(nodes, vectors)
    return out


def _argmax(nodes: list[NodeState], criterion: str) -> int | None:
    chosen, top = None, -math.inf
    for node in nodes:
        value = figure(node, criterion)
        if value is not None and criterion == "claimed" and node.lower_is_better:
            value = -value   # AIDE's MetricValue(maximize=not lower_is_better)
        if value is not None and value > top:
            chosen, top = node.node_id, value
    return chosen


def _robust(nodes: list[NodeState], vectors: dict[int, dict[str, Any]]) -> int | None:
    """Highest (lower bound of the worst group, worst group); a node lacking a group's AUC that
    another candidate has is not comparable and is left out."""
    groups = {g for vec in vectors.values() for g, v in vec.items() if _finite(v)}
    chosen, top = None, (-math.inf, -math.inf)
    for node in nodes:
        bound, worst = figure(node, "robust"), figure(node, "minimax")
        complete = all(_finite(vectors.get(node.node_id, {}).get(g)) for g in groups)
        if bound is None or worst is None or not complete:
            continue
        if (bound, worst) > top:
            chosen, top = node.node_id, (bound, worst)
    return chosen


def choice(state: SessionState, criterion: str | None = None) -> int | None:
    """The node ★ names by a criterion (default: the current one): the engine's recorded final
    choice once the session ended, else the best so far. Every surface shows this."""
    criterion = criterion or current_criterion(state)
    recorded = state.final_choice or {}
    key = f"by_{criterion}"
    if key in recorded:
        node_id = recorded[key]
        return node_id if isinstance(node_id, int) else None
    node = best(state, criterion)
    return node.node_id if node else None


def choices(state: SessionState) -> dict[str, int | None]:
    return {c: choice(state, c) for c in CRITERIA}


def reason(node: NodeState | None, criterion: str) -> str:
    words = CRITERION_WORDS[criterion]
    if node is None:
        return f"no working, unpruned node has {words}"
    value = figure(node, criterion)
    shown = f" ({value:.4f})" if value is not None else ""
    return f"node {node.node_id}: highest {CRITERION_LABEL[criterion]}{shown}"


def final_choice(state: SessionState) -> dict[str, Any]:
    """The `final_choice` payload: the best node by each criterion, why, and the nodes that cannot
    be told apart from it (as the last comparison recorded them)."""
    out: dict[str, Any] = {"criterion": current_criterion(state), "reasons": {}, "ties": {}}
    for criterion in CRITERIA:
        node = best(state, criterion)
        out[f"by_{criterion}"] = node.node_id if node else None
        out["reasons"][criterion] = reason(node, criterion)
        tied = ties(state, criterion)
        if tied is not None:
            out["ties"][criterion] = tied
    return out


# -- how sure: nodes that cannot be told apart from the leader --------------------------------------
def ties(state: SessionState, criterion: str, split: str = "validation") -> list[int] | None:
    """Nodes that cannot be told apart from the leader by the criterion (paired bootstrap), as the
    last `compared` event recorded them; None when nothing was compared for the current leader."""
    compared = (state.comparisons.get(split) or {}).get("by", {}).get(criterion)
    if not compared or compared.get("leader") != choice(state, criterion):
        return None
    pruned = state.pruned_ids()
    return [int(n) for n in compared.get("ties", []) if n in state.nodes and is_candidate(state.nodes[n], pruned)]
