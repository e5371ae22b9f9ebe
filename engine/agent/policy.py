"""The search policy: a greedy tree search plus the human's commands.

`decide(state, rng, config)` is a pure function of the folded session state, a random generator
and the session's settings. Two rules (`config.policy`); both begin and end alike:

1. the step budget is spent -> finish;
2. a human asked to expand node N (and N is not pruned) -> improve N if it worked, else debug it;
...
5. otherwise improve the best node by the criterion in force (engine.session.selection: the
   session's setting, or the expert's live switch); with no working node yet, draft again.

AIDE's rule (`--policy aide`, and always under the be-fair protocol), exactly as AIDE searches:
3. fewer than num_drafts drafts (default 5) -> draft;
4. with probability debug_prob, a buggy leaf whose debug depth <= max_debug_depth (AIDE's `<=`:
   its debug_depth counts the consecutive debug steps leading to the node, as state.debug_depth
   does) -> debug one, drawn with random.choice in journal order.

befair's rule (the default): AIDE's 5 drafts were set for 20 steps, and its coin flip leaves a
failure undebugged half the time, so a short session with a small model measured nothing:
3. the draft count scales with the budget: num_drafts if given, else budget/4 rounded, 1 to 5
   (4 steps: 1 draft, 6: 2, 10: 3, 20 or more: 5);
4. the latest node failed and can be debugged (it has code, its debug depth < max_debug_depth):
   debug it now, unless more drafts are needed to reach the draft count; but a draft that fails
   with the same exception type as an earlier failed draft is always debugged (drafting again
   would likely repeat the mistake);
   when the drafts are done and the latest node worked: improve the best node (5), or with no
   working node, debug the most recent buggy leaf that can be, else draft.

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


def debuggable(state: SessionState, max_debug_depth: int, *, aide: bool = False) -> list[NodeState]:
    """The buggy leaves a debug step may take: below max_debug_depth, or up to it under AIDE's rule."""
    out = []
    for node in state.nodes.values():
        if not node.finished or not selection.is_failed(node) or state.is_pruned(node.node_id):
            continue
        if node.children:  # AIDE debugs leaves only
            continue
        depth = state.debug_depth(node.node_id)
        if depth > max_debug_depth or (depth == max_debug_depth and not aide):
            continue
        out.append(node)
    return out


def _describe_failure(node: NodeState) -> str:
    return node.failure_reason or node.review_summary or node.status


def draft_target(config: Any, budget: int) -> int:
    """How many initial drafts: num_drafts when set; else AIDE's 5 (aide) or budget/4 in 1..5."""
    given = _cfg(config, "num_drafts", None)
    if given is not None:
        return int(given)
    if str(_cfg(config, "policy", "befair")) == "aide":
        return 5
    return max(1, min(5, (int(budget) + 2) // 4))


def failure_kind(node: NodeState) -> str:
    """What went wrong, as a type: the exception type, a timeout, or the evaluation's verdict."""
    if node.status == "timeout":
        return "timeout"
    if node.exc_type:
        return node.exc_type
    verdict = node.eval_verdicts.get("validation")
    if node.status == "ok" and verdict not in (None, "ok"):
        return f"evaluation: {verdict}"
    return "failed"


def _fixable(state: SessionState, node: NodeState, max_depth: int) -> bool:
    """A failure a debug step can work on: a buggy leaf with code, below the depth limit."""
    return (node.finished and selection.is_failed(node) and bool(node.code) and not node.children
            and not state.is_pruned(node.node_id) and state.debug_depth(node.node_id) < max_depth)


def _latest(state: SessionState) -> NodeState | None:
    agent = [n for n in state.nodes.values() if n.origin == "agent"]
    return max(agent, key=lambda n: n.node_id) if agent else None


def _befair_step(state: SessionState, config: Any, drafts: int, target: int) -> Decision | None:
    """befair's draft/debug rule (see the module docstring); None: improve the best node."""
    max_depth = int(_cfg(config, "max_debug_depth", 3))
    latest = _latest(state)
    fixable = latest is not None and _fixable(state, latest, max_depth)
    if drafts < target:
        if fixable and latest is not None and latest.stage == "draft":
            kind = failure_kind(latest)
            same = [n for n in state.nodes.values() if n.stage == "draft" and n.node_id != latest.node_id
                    and n.origin == "agent" and selection.is_failed(n) and failure_kind(n) == kind]
            if same:
                return Decision("debug", latest.node_id,
                                f"node {latest.node_id} failed with {kind}, as draft {same[0].node_id} did: debug it "
                                f"rather than draft again ({drafts} of {target} drafts)")
        return Decision("draft", None, f"initial drafting: draft {drafts + 1} of {target}"
                        + (f" (the draft count scales with the budget of {state.budget} steps)"
                           if _cfg(config, "num_drafts", None) is None else ""))
    if fixable and latest is not None:
        return Decision("debug", latest.node_id,
                        f"node {latest.node_id} failed ({_describe_failure(latest)}): debug it (debug depth "
                        f"{state.debug_depth(latest.node_id)} < {max_depth})")
    if selection.best(state, selection.current_criterion(state)) is not None:
        return None
    candidates = [n for n in state.nodes.values() if _fixable(state, n, max_depth)]
    if candidates:
        node = max(candidates, key=lambda n: n.node_id)
        return Decision("debug", node.node_id, f"no working node yet: debug node {node.node_id}, the latest failure "
                        f"that can still be debugged ({_describe_failure(node)})")
    return Decision("draft", None, "no working node and no failure left to debug: draft a new pipeline")


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

    num_drafts = draft_target(config, budget)
    drafts = sum(1 for n in state.nodes.values() if n.stage == "draft" and n.origin == "agent")
    aide = str(_cfg(config, "policy", "befair")) == "aide"
    if not aide:
        decision = _befair_step(state, config, drafts, num_drafts)
        if decision is not None:
            return decision
    elif drafts < num_drafts:
        return Decision("draft", None, f"initial drafting: draft {drafts + 1} of {num_drafts}")

    debug_prob = float(_cfg(config, "debug_prob", 0.5)) if aide else 0.0  # befair's rule debugged above
    max_depth = int(_cfg(config, "max_debug_depth", 3))
    roll = rng.random()
    if roll < debug_prob:
        candidates = debuggable(state, max_depth, aide=aide)
        if candidates:
            node = rng.choice(sorted(candidates, key=lambda n: n.node_id))
            return Decision("debug", node.node_id,
                            f"debug branch (drew {roll:.2f} < debug_prob {debug_prob:g}): node {node.node_id} is a "
                            f"buggy leaf ({_describe_failure(node)}; debug depth "
                            f"{state.debug_depth(node.node_id)} {'<=' if aide else '<'} {max_depth})")

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
