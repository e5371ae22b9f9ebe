"""Which steering key can act in which state, and why not (Textual-free: the console's keys table
is in befair_tui/screens/console_keys.py). The footer and the command palette offer only the keys
that can act; pressing another one says why."""
from __future__ import annotations

from collections.abc import Mapping

from engine.session.state import SessionState

STEERING = {"pause", "resume", "stop", "guide", "expand", "prune", "add_steps", "choose_feedback"}
STEERING_VERB = {"pause": "pause it", "resume": "resume it", "stop": "stop it", "guide": "guide the agent",
                 "expand": "expand a node", "prune": "prune a node", "add_steps": "add steps",
                 "choose_feedback": "change what the agent is shown"}
NEEDS_RUNNER = {"pause", "resume", "stop"}  # steering that only a live runner can carry out
OFFERED_WHEN_ABLE = STEERING | {"resume_runner", "train_baselines"}  # offered only while they can act


def fits_the_p_key(action: str, status: str) -> bool:
    """One key, p: "Pause" while running, "Resume" while paused."""
    if action == "pause":
        return status != "paused"
    if action == "resume":
        return status == "paused"
    return True


def steering_refusal(action: str, state: SessionState, *, read_only: bool, runner: str | None,
                     keys: Mapping[str, str]) -> str | None:
    """Why a steering key (or u, resume the runner) cannot act in this state (None: it can).
    `keys`: the key the screen has for an action; a way out is named only with a key the screen
    has (a participant's console has no u and no sessions screen)."""
    resume, sessions = keys.get("resume_runner"), keys.get("sessions")
    if action == "resume_runner":
        if read_only:
            return "This is a replay: it shows what happened and cannot be resumed from here."
        if runner == "stopped" and state.status in ("running", "paused"):
            return None
        return f"The session is {state.status} and its runner is not stopped: nothing to resume ({resume})."
    if action not in STEERING:
        return None
    what = STEERING_VERB[action]
    if read_only:
        return (f"This is a replay of what happened: it cannot {what}." + (
            f" Open the session from Sessions ({sessions}) to steer it." if sessions else ""))
    status = state.status
    if status == "finished":
        return f"The session has finished: nothing runs any more, so there is no way to {what}."
    if status in ("stopped", "failed"):
        way = f" To {what}, resume it first (Sessions, {sessions}, then {resume})." if sessions and resume else ""
        return f"The session {status}: nothing runs any more.{way}"
    if action in NEEDS_RUNNER and runner == "stopped" and status in ("running", "paused"):
        if resume:
            return f"Nothing runs this session now (its runner stopped): press {resume} to resume it, then {what}."
        return f"Nothing runs this session now (its runner stopped): it is being resumed; then {what}."
    return None
