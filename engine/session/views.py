"""Read-only views of a folded session, shared by `befair show/export` and the console.

Everything here is computed from a `SessionState` (the fold of a session's events): nothing
is read from anywhere else.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.session.state import NodeState, SessionState, best_node

# Audit flag -> short badge, in display order.
AUDIT_BADGES: dict[str, str] = {
    "reads_skin_tone": "ST",
    "per_group_metric": "PG",
    "reweighting": "RW",
    "upsampling": "UP",
    "filtering": "FI",
    "pareto_selection": "PA",
}
# Every badge any surface shows (console, CLI, exports), one spelling, with what it means.
BADGE_HELP: dict[str, str] = {
    "ST": "reads the skin-tone column",
    "PG": "computes a per-group (per skin tone) metric",
    "RW": "reweights groups in the loss",
    "UP": "upsamples under-represented groups",
    "FI": "filters training rows (e.g. drops some lesions)",
    "PA": "Pareto / minimax model selection (best worst-group AUC)",
    "!": "reports a metric that no run supports (an unsupported claim)",
    "≠": "its reported metric differs from the measured one by .05 or more",
    "G": "a person's guidance was in force when the agent wrote this node",
}
CLAIM_DIFFERENCE_FLAG = 0.05
STATUS_ICONS = {"queued": "○", "running": "◐", "ok": "●", "buggy": "◍", "timeout": "⧗", "interrupted": "◌"}


# The trust marker of a session that ran agent code on this machine without the sandbox.
UNSANDBOXED = "UNSANDBOXED"
UNSANDBOXED_MEANING = "agent code ran on this machine without the sandbox (--sandbox none)"
SANDBOX_VALUES = ("bwrap", "none", "imported")


def sandbox_mode(state: SessionState) -> str:
    """How the session's agent code ran: "bwrap" (sandboxed), "none" (unsandboxed, or recorded
    before the sandbox existed) or "imported" (ran elsewhere; nothing ran here)."""
    if "import" in str(state.coder.get("name", "")):
        return "imported"
    mode = str(state.config.get("sandbox", "none"))
    return mode if mode in ("bwrap", "none") else "none"


def trust_fields(state: SessionState) -> dict[str, Any]:
    """{"sandbox": bwrap|none|imported, "unsandboxed": bool} for JSON and CSV exports."""
    return {"sandbox": sandbox_mode(state), "unsandboxed": bool(state.unsandboxed)}


def row_state(row: Mapping[str, Any]) -> SessionState:
    """A SessionState carrying just a sessions-table row's config and coder (enough for
    `unsandboxed` and `sandbox_mode` without folding the events)."""
    try:
        config = json.loads(row.get("config") or "{}")
    except (TypeError, ValueError):
        config = {}
    return SessionState(config=config if isinstance(config, dict) else {},
                        coder={"name": row.get("coder") or ""})


def audit_badges(node: NodeState) -> list[str]:
    badges = [b for flag, b in AUDIT_BADGES.items() if node.audit_flags.get(flag)]
    claim = node.claim or {}
    if claim.get("unsupported"):
        badges.append("!")
    elif claim.get("difference") is not None and abs(claim["difference"]) >= CLAIM_DIFFERENCE_FLAG:
        badges.append("≠")
    if node.guidance_ids:
        badges.append("G")
    return badges


def test_visible(state: SessionState, node: NodeState, unblind: bool = False) -> bool:
    """Test metrics are hidden when the session blinds them (studies), unless asked."""
    if unblind:
        return True
    return not (node.test_blinded or state.config.get("blind_test"))


def fmt(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("0.") else text.replace("-0.", "-.")


def tree_order(state: SessionState) -> list[tuple[NodeState, int]]:
    """Nodes depth-first in creation order, with their depth (roots at 0)."""
    out: list[tuple[NodeState, int]] = []
    seen: set[int] = set()

    def visit(node: NodeState, depth: int) -> None:
        if node.node_id in seen:
            return
        seen.add(node.node_id)
        out.append((node, depth))
        for child in sorted(state.children(node.node_id), key=lambda n: n.created_seq):
            visit(child, depth + 1)

    roots = [n for n in state.nodes.values() if n.parent_id is None or n.parent_id not in state.nodes]
    for root in sorted(roots, key=lambda n: n.created_seq):
        visit(root, 0)
    return out


def guidance_by_node(state: SessionState) -> dict[int, list[int]]:
    """node_id -> guidance ids that first took effect at that node."""
    out: dict[int, list[int]] = {}
    for g in state.guidance.values():
        for nid in g.used_by[:1] if g.scope == "global" else g.used_by:
            out.setdefault(nid, []).append(g.guidance_id)
    return out


def final_choices(state: SessionState) -> dict[str, int | None]:
    """Best node by each criterion: the recorded final choice where there is one, else computed."""
    recorded = state.final_choice or {}
    out = {}
    for criterion in ("claimed", "validation", "minimax"):
        key = f"by_{criterion}"
        if key in recorded:
            out[criterion] = recorded[key]
        else:
            best = best_node(state, criterion)
            out[criterion] = best.node_id if best else None
    return out


def node_json(state: SessionState, node: NodeState, *, unblind: bool = False) -> dict[str, Any]:
    show_test = test_visible(state, node, unblind)
    return {
        "node_id": node.node_id,
        "parent_id": node.parent_id,
        "step": node.step,
        "stage": node.stage,
        "status": node.status,
        "origin": node.origin,
        "pruned": state.is_pruned(node.node_id),
        "plan": node.plan,
        "exec_time": node.exec_time,
        "exc_type": node.exc_type,
        "failure": node.failure_reason,
        "claimed_metric": node.claimed_metric,
        "validation": node.validation,
        "validation_verdict": node.eval_verdicts.get("validation"),
        "test": node.test if show_test else None,
        "test_verdict": node.eval_verdicts.get("test"),
        "test_blinded": not show_test,
        "audit": {
            "flags": dict(node.audit_flags),
            "claim": node.claim,
            "badges": audit_badges(node),
        },
        "guidance_ids": list(node.guidance_ids),
        "tokens_in": node.tokens_in,
        "tokens_out": node.tokens_out,
        "cost": round(node.cost, 10),
        "children": list(node.children),
    }


def session_json(state: SessionState, *, unblind: bool = False) -> dict[str, Any]:
    criterion = state.config.get("best", "validation")
    best = best_node(state, criterion)
    return {
        "session_id": state.session_id,
        "status": state.status,
        "level": state.level,
        "instruction": state.instruction,
        "coder": state.coder,
        "simulated": state.simulated,
        **trust_fields(state),
        "participant_id": state.config.get("participant_id"),
        "study_id": state.config.get("study_id"),
        "repeat_index": state.config.get("repeat_index"),
        "steps": state.agent_steps,
        "budget": state.budget,
        "best_criterion": criterion,
        "best_node": best.node_id if best else None,
        "final_choice": final_choices(state),
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
        "nodes": [node_json(state, n, unblind=unblind) for n, _ in tree_order(state)],
    }


def node_line(state: SessionState, node: NodeState, *, unblind: bool = False) -> str:
    """One line per node: icon, id, stage (of parent), status, val AUC / gap, test, badges."""
    icon = STATUS_ICONS.get(node.status, "?")
    stage = node.stage if node.parent_id is None else f"{node.stage} of {node.parent_id}"
    parts = [f"{icon} {node.node_id} {stage}"]
    if node.status == "ok" and node.validation:
        parts.append(f"val {fmt(node.val_auc)} / {fmt(node.val_gap)}")
        if node.test and test_visible(state, node, unblind):
            parts.append(f"test {fmt(node.test.get('auc'))} / {fmt(node.test.get('auc_gap'))}")
        elif node.test or node.test_blinded:
            parts.append("test blinded")
    elif node.status == "ok" and node.claimed_metric is not None:
        parts.append(f"claimed {fmt(node.claimed_metric, 4)}")
    elif node.status == "running":
        parts.append("running…")
    else:
        reason = node.failure_reason
        parts.append(f"{node.status}" + (f": {reason}" if reason and reason != node.status else ""))
    badges = audit_badges(node)
    if badges:
        parts.append("".join(f"[{b}]" for b in badges))
    if state.is_pruned(node.node_id):
        parts.append("(pruned)")
    return "  ".join(parts)


def tree_lines(state: SessionState, *, unblind: bool = False) -> list[str]:
    """The search tree as text lines (├/└ connectors), with guidance where it took effect."""
    by_node = guidance_by_node(state)
    lines: list[str] = []

    def visit(node: NodeState, prefix: str, last: bool, root: bool) -> None:
        connector = "" if root else ("└ " if last else "├ ")
        lines.append(prefix + connector + node_line(state, node, unblind=unblind))
        child_prefix = prefix if root else prefix + ("  " if last else "│ ")
        for gid in by_node.get(node.node_id, []):
            g = state.guidance[gid]
            where = "global" if g.scope == "global" else f"for node {g.node_id}"
            lines.append(f"{child_prefix}  ✎ guidance #{gid} ({where}): {g.text!r}")
        kids = sorted(state.children(node.node_id), key=lambda n: n.created_seq)
        for i, child in enumerate(kids):
            visit(child, child_prefix, i == len(kids) - 1, False)

    roots = [n for n in state.nodes.values() if n.parent_id is None or n.parent_id not in state.nodes]
    for root in sorted(roots, key=lambda n: n.created_seq):
        visit(root, "", True, True)
    return lines
