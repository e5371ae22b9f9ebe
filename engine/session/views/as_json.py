"""A session and its nodes as JSON (`befair show --json`, the exports): the same decisions as every
other surface, test metrics only where this reader may see them."""
from __future__ import annotations

from collections.abc import Mapping, Set
from dataclasses import asdict
from typing import Any

from engine.session import figure_text
from engine.session.state import NodeState, SessionState
from engine.session.views.agent_settings import settings_json
from engine.session.views.badges import BADGE_HELP, node_badges, simulated_failure
from engine.session.views.best import best_by_criterion, session_criterion
from engine.session.views.blinding import test_visible, test_withheld, visibility
from engine.session.views.like_with_like import Comparison, data_kind
from engine.session.views.nodes import node_summary, tree_order
from engine.session.views.trust import trust_fields


def node_json(state: SessionState, node: NodeState, *, unblind: bool = False, best: int | None = None,
              pruned: Set[int] | None = None) -> dict[str, Any]:
    summary = node_summary(state, node, unblind=unblind, best=best, pruned=pruned)
    show_test = test_visible(state, node, unblind) and node.test is not None
    return {
        "node_id": node.node_id,
        "parent_id": node.parent_id,
        "step": node.step,
        "stage": node.stage,
        "status": node.status,
        "origin": node.origin,
        "pruned": summary.pruned,
        "best": summary.best,
        "summary": summary.line(),
        "plan": node.plan,
        "exec_time": node.exec_time,
        "exc_type": node.exc_type,
        "failure": node.failure_reason,
        "claimed_metric": node.claimed_metric,
        "validation": figure_text.public(node.validation),
        "validation_verdict": node.eval_verdicts.get("validation"),
        "test": figure_text.public(node.test) if show_test else None,
        "test_verdict": node.eval_verdicts.get("test"),
        "test_blinded": test_withheld(state, node, unblind) or not test_visible(state, node, unblind),
        "simulated_failure": simulated_failure(node),
        "audit": {
            "audited": not node.audit_note,
            "note": node.audit_note,
            "flags": dict(node.audit_flags),
            "claim": node.claim,
            "badges": [b.code for b in node_badges(node)],
            "evidence": [asdict(b) for b in node_badges(node)],
        },
        "guidance_ids": list(node.guidance_ids),
        "tokens_in": node.tokens_in,
        "tokens_out": node.tokens_out,
        "cost": round(node.cost, 10),
        "llm_calls": [call_json(call) for call in node.conversation],
        "children": list(node.children),
    }


_CALL_FIELDS = ("seq", "role", "model", "ok", "error", "tokens_in", "tokens_out", "latency_s", "cost")


def call_json(payload: Mapping[str, Any]) -> dict[str, Any]:
    """One llm_call without its messages and reply: its usage, and the reply rule its reply hit
    (`check`: {rule, attempt, message}, or None; engine.agent.reply_rules)."""
    return {**{k: payload.get(k) for k in _CALL_FIELDS}, "check": payload.get("check")}


def rule_hits(state: SessionState) -> dict[str, int]:
    """How many replies hit each reply rule, over the session's calls."""
    calls = [*state.unassigned_calls, *(c for n in state.nodes.values() for c in n.conversation)]
    hits: dict[str, int] = {}
    for check in (c.get("check") for c in calls):
        if isinstance(check, Mapping) and isinstance(check.get("rule"), str):
            hits[check["rule"]] = hits.get(check["rule"], 0) + 1
    return dict(sorted(hits.items(), key=lambda kv: (-kv[1], kv[0])))


def session_json(state: SessionState, *, unblind: bool = False,
                 comparisons: Mapping[str, Comparison] | None = None) -> dict[str, Any]:
    criterion = session_criterion(state)
    choices = best_by_criterion(state)
    star, pruned = choices[criterion].node_id, state.pruned_ids()
    out = {
        "session_id": state.session_id,
        "status": state.status,
        "level": state.level,
        "instruction": state.instruction,
        "coder": state.coder,
        "simulated": state.simulated,
        **trust_fields(state),
        "data": data_kind(state),
        "participant_id": state.config.get("participant_id"),
        "study_id": state.config.get("study_id"),
        "repeat_index": state.config.get("repeat_index"),
        "steps": state.agent_steps,
        "budget": state.budget,
        "best_criterion": criterion,
        "best_node": star,
        "agent_settings": settings_json(state),
        "final_choice": {c: b.node_id for c, b in choices.items()},
        "best": {c: {**asdict(b), "uncertainty": b.uncertainty} for c, b in choices.items()},
        "visibility": visibility(state, unblind),
        "tokens_in": state.tokens_in,
        "tokens_out": state.tokens_out,
        "cost": round(state.cost, 10),
        "started_ts": state.started_ts,
        "last_ts": state.last_ts,
        "finished_ts": state.finished_ts,
        "finish_reason": state.finish_reason,
        "guidance": [
            {"guidance_id": g.guidance_id, "text": g.text, "scope": g.scope, "node_id": g.node_id,
             "by": g.by, "used_by": list(g.used_by)}
            for g in sorted(state.guidance.values(), key=lambda g: g.guidance_id)
        ],
        "errors": list(state.errors),
        "llm_calls_unassigned": [call_json(call) for call in state.unassigned_calls],
        "rule_hits": rule_hits(state),
        "badge_legend": dict(BADGE_HELP),
        "nodes": [node_json(state, n, unblind=unblind, best=star, pruned=pruned) for n, _ in tree_order(state)],
    }
    if comparisons is not None:
        out["comparison"] = {split: c.to_json() for split, c in comparisons.items()}
    return out
