"""What the agent is shown of befair's own measurements: a session setting, the same at every level.

- none: nothing beyond its own output (as AIDE's agent: its own printed metric and its review);
- auc: the measured validation AUROC of each earlier node (the default: no word of skin tone);
- groups: the AUROC, each skin-tone group's AUROC and the gap between them.

A level is its instruction alone: so the default is the same, fairness-neutral, at every level.
Turning `groups` on is a recorded setting at setup (SessionConfig.feedback) or a recorded steering
act while the session runs (the `set_feedback` command, a `feedback_set` event).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from engine.measures.summary import EvaluationSummary

if TYPE_CHECKING:
    from engine.session.state import SessionState

FEEDBACK = ("none", "auc", "groups")
DEFAULT_FEEDBACK = "auc"
# sessions recorded before the setting existed showed the agent every figure
LEGACY_FEEDBACK = "groups"
FEEDBACK_WORDS = {
    "none": "only its own output and its review, as AIDE's agent",
    "auc": "the validation AUC befair measured for each of its earlier pipelines",
    "groups": "the validation AUC, each skin-tone group's AUC and the gap between them",
}
FEEDBACK_LABEL = {"none": "nothing measured", "auc": "measured AUC", "groups": "AUC + skin-tone groups"}
FEEDBACK_SHORT = {"none": "nothing", "auc": "AUC", "groups": "AUC+groups"}
_SHOWN_KEYS = {"none": frozenset(), "auc": frozenset({"auc"}),
               "groups": frozenset({"auc", "auc_gap", "group_auc", "worst_auc", "best_auc"})}


def check(feedback: str) -> str:
    if feedback not in FEEDBACK:
        raise ValueError(f"feedback must be one of {FEEDBACK}, not {feedback!r}")
    return feedback


def current_feedback(state: SessionState) -> str:
    """What the agent is shown now: the session's setting, or the expert's last switch."""
    value = state.feedback or str(state.config.get("feedback") or LEGACY_FEEDBACK)
    return value if value in FEEDBACK else LEGACY_FEEDBACK


def shown(measured: EvaluationSummary | None, feedback: str) -> EvaluationSummary | None:
    """The part of a node's measured summary that the agent may see under `feedback`."""
    if measured is None:
        return None
    return measured.only(_SHOWN_KEYS[check(feedback)])
