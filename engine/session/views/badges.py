"""Badges: one spelling, one legend, each with the evidence it came from."""
from __future__ import annotations

from dataclasses import dataclass

from engine.measures.claims import CLAIM_DIFFERENCE_FLAG
from engine.offline_grammar import injected_failure
from engine.session.figure_text import fmt
from engine.session.state import NodeState

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
    "?": "not audited: its code could not be read, so what it does about skin tone is unknown",
}
NOT_AUDITED = "?"


@dataclass(frozen=True)
class Badge:
    code: str          # one of BADGE_HELP's keys
    meaning: str       # BADGE_HELP[code]
    evidence: str      # the line of code, the claim or the guidance it came from


def node_badges(node: NodeState) -> list[Badge]:
    """The node's badges in BADGE_HELP's order, each with its evidence."""
    out = [Badge(code, BADGE_HELP[code], node.audit_evidence.get(flag, ""))
           for flag, code in AUDIT_BADGES.items() if node.audit_flags.get(flag)]
    if node.audit_note:  # its flags are unknown, not "no": say so before anything else
        out.insert(0, Badge(NOT_AUDITED, BADGE_HELP[NOT_AUDITED], node.audit_note))
    claim = node.claim or {}
    if claim.get("unsupported"):
        out.append(Badge("!", BADGE_HELP["!"], str(claim.get("reason") or
                                                     f"claimed {fmt(claim.get('claimed'), 4)}, no measurement")))
    elif claim.get("difference") is not None and abs(claim["difference"]) >= CLAIM_DIFFERENCE_FLAG:
        out.append(Badge("≠", BADGE_HELP["≠"], f"claimed {fmt(claim.get('claimed'), 4)}, measured "
                                               f"{fmt(claim.get('measured'), 4)} ({claim['difference']:+.3f})"))
    if node.guidance_ids:
        out.append(Badge("G", BADGE_HELP["G"], "guidance " + ", ".join(f"#{g}" for g in node.guidance_ids)))
    return out


def audit_badges(node: NodeState) -> list[str]:
    """The node's badge codes, in BADGE_HELP's order and spelling (node_badges without the evidence)."""
    return [b.code for b in node_badges(node)]


def simulated_failure(node: NodeState) -> str | None:
    """"simulated agent: this node was made to …" when the offline coder (a simulated agent) made
    this node fail on purpose, so that the debug path runs; None otherwise."""
    return injected_failure(node.components) if node.components else None
