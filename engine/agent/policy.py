"""The search policy: AIDE's greedy tree search plus the human's commands.

`decide(state, rng, config)` is a pure function of the folded session state, a random generator
and the session's settings:

1. the step budget is spent -> finish;
2. a human asked to expand node N (and N is not pruned) -> improve N if it worked, else debug it;
3. fewer than num_drafts drafts -> draft;
4. with probability debug_prob, a buggy leaf whose debug depth < max_debug_depth -> debug it;
5. otherwise improve the best node by the criterion in force (engine.session.selection: the
   session's setting, or the expert's live switch); with no working node yet, draft again.

Pruned subtrees are never expanded. Every decision carries a reason; the runner logs it as a
policy_decision event.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from engine.session import selection
from engine.session.state import NodeState, SessionState


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


def debuggable(state: SessionState, max_debug_depth: int) -> list[NodeState]:
    out = []
    for node in state.nodes.values():
        if not node.finished or not selection.is_failed(node) or state.is_pruned(node.node_id):
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
        if selection.is_failed(node):
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

    criterion = selection.current_criterion(state)
    words = selection.CRITERION_WORDS[criterion]
    best = selection.best(state, criterion)
    if best is None:
        return Decision("draft", None, f"no working node to improve by {words}; draft a new pipeline")
    value = selection.figure(best, criterion)
    shown = f" ({value:.4f})" if value is not None else ""
    return Decision("improve", best.node_id, f"improve the best node by {words}: node {best.node_id}{shown}")


def policy_rng(seed: int, step: int) -> random.Random:
    """The policy's generator for a step: the same seed and step draw the same numbers,
    so a resumed session decides as the uninterrupted one would have."""
    return random.Random(f"befair-policy|{seed}|{step}")
