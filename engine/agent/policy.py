"""The search policy: AIDE's greedy tree search plus the human's commands.

`decide(state, rng, config)` is a pure function of the folded session state, a random generator
and the session's settings:

1. the step budget is spent -> finish;
2. a human asked to expand node N (and N is not pruned) -> improve N if it worked, else debug it;
3. fewer than num_drafts drafts -> draft;
4. with probability debug_prob, a buggy leaf whose debug depth < max_debug_depth -> debug it;
5. otherwise improve the best node by the session's criterion (claimed | validation | minimax);
   with no working node yet, draft again.

Pruned subtrees are never expanded. Every decision carries a reason; the runner logs it as a
policy_decision event.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from engine.session.state import NodeState, SessionState, best_node, metric_for

CRITERION_NAMES = {"claimed": "the agent's claimed metric", "validation": "measured validation AUC",
                   "minimax": "worst-group validation AUC (minimax)"}


@dataclass
class Decision:
    action: str                 # draft | improve | debug | finish
    node_id: int | None = None  # the node to expand (improve/debug)
    reason: str = ""
    forced: bool = False        # a human command chose it

    @property
    def stage(self) -> str:
        return self.action

    def payload(self) -> dict[str, Any]:
        return {"action": self.action, "node_id": self.node_id, "reason": self.reason, "forced": self.forced}


def _cfg(config: Any, name: str, default: Any) -> Any:
    if isinstance(config, dict):
        return config.get(name, default)
    return getattr(config, name, default)


def is_buggy(node: NodeState) -> bool:
    """Failed to run, or ran but the review found no metric, or its predict could not be scored."""
    if node.status in ("buggy", "timeout", "interrupted"):
        return True
    if node.status != "ok":
        return False
    if node.is_bug:
        return True
    verdict = node.eval_verdicts.get("validation")
    return verdict is not None and verdict != "ok"


def is_good(node: NodeState) -> bool:
    return node.status == "ok" and not is_buggy(node)


def debuggable(state: SessionState, max_debug_depth: int) -> list[NodeState]:
    out = []
    for node in state.nodes.values():
        if not node.finished or not is_buggy(node) or state.is_pruned(node.node_id):
            continue
        if node.children:  # AIDE debugs leaves only
            continue
        if state.debug_depth(node.node_id) >= max_debug_depth:
            continue
        out.append(node)
    return out


def _describe_failure(node: NodeState) -> str:
    return node.failure_reason or node.review_summary or node.status


def decide(state: SessionState, rng: random.Random, config: Any) -> Decision:
    budget = state.budget
    steps = state.agent_steps
    if steps >= budget:
        return Decision("finish", reason=f"step budget spent ({steps}/{budget})")

    # human commands first
    for nid in list(state.pending_expand):
        node = state.nodes.get(nid)
        if node is None or state.is_pruned(nid) or not node.finished:
            continue
        if is_buggy(node):
            return Decision("debug", nid, f"a human asked to expand node {nid}; it failed "
                            f"({_describe_failure(node)}), so debug it", forced=True)
        return Decision("improve", nid, f"a human asked to expand node {nid}; it works, so improve it", forced=True)

    num_drafts = int(_cfg(config, "num_drafts", 5))
    drafts = sum(1 for n in state.nodes.values() if n.stage == "draft" and n.origin == "agent")
    if drafts < num_drafts:
        return Decision("draft", None, f"initial drafting: draft {drafts + 1} of {num_drafts}")

    debug_prob = float(_cfg(config, "debug_prob", 0.5))
    max_depth = int(_cfg(config, "max_debug_depth", 3))
    roll = rng.random()
    if roll < debug_prob:
        candidates = debuggable(state, max_depth)
        if candidates:
            node = rng.choice(sorted(candidates, key=lambda n: n.node_id))
            return Decision("debug", node.node_id,
                            f"debug branch (drew {roll:.2f} < debug_prob {debug_prob:g}): node {node.node_id} is a "
                            f"buggy leaf ({_describe_failure(node)}; debug depth "
                            f"{state.debug_depth(node.node_id)} < {max_depth})")

    criterion = str(_cfg(config, "best", "validation"))
    best = _best_good(state, criterion)
    if best is None:
        return Decision("draft", None, f"no working node to improve by {CRITERION_NAMES.get(criterion, criterion)}; "
                        "draft a new pipeline")
    value = metric_for(best, criterion)
    return Decision("improve", best.node_id,
                    f"improve the best node by {CRITERION_NAMES.get(criterion, criterion)}: node {best.node_id} "
                    f"({value:.4f})")


def _best_good(state: SessionState, criterion: str) -> NodeState | None:
    node = best_node(state, criterion, include_pruned=False)
    if node is not None and is_good(node):
        return node
    best, best_value = None, float("-inf")
    for n in state.nodes.values():
        if not is_good(n) or state.is_pruned(n.node_id):
            continue
        v = metric_for(n, criterion)
        if v is not None and v > best_value:
            best, best_value = n, v
    return best


def policy_rng(seed: int, step: int) -> random.Random:
    """The policy's generator for a step: the same seed and step draw the same numbers,
    so a resumed session decides as the uninterrupted one would have."""
    return random.Random(f"befair-policy|{seed}|{step}")
