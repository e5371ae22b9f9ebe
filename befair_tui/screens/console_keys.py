"""The console's keys: its bindings table, and which steering key can act in which state. The
footer and the command palette offer only the keys that can act; pressing another one says why."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

from textual.binding import Binding

from engine.session.state import SessionState

from befair_tui.bindings import (ADD_STEPS, CHOOSE_CRITERION, CHOOSE_FEEDBACK, EXPAND, GUIDE, PAUSE, PRUNE, QUIT,
                                 RESUME, STOP, TOGGLE_SPLIT, detail_tab_bindings)

CONSOLE_BINDINGS: list[Binding] = [
    PAUSE, RESUME, STOP, GUIDE, EXPAND, PRUNE, ADD_STEPS, TOGGLE_SPLIT, CHOOSE_CRITERION, CHOOSE_FEEDBACK,
    Binding("r", "summary", "Summary", id="session-summary"),
    Binding("u", "resume_runner", "Resume run", id="resume-runner"),
    Binding("b", "train_baselines", "Train baselines", id="train-baselines"),
    Binding("l", "sessions", "Sessions", id="sessions"),
    QUIT,
    *detail_tab_bindings(),
]
# widgets/keys_footer.py: the keys a narrow footer leaves out first (they stay in the help and palette)
FOOTER_DROP = ("app.quit", "sessions", "choose_feedback", "choose_criterion", "train_baselines", "add_steps", "prune",
               "expand")

STEERING = {"pause", "resume", "stop", "guide", "expand", "prune", "add_steps", "choose_feedback"}
STEERING_VERB = {"pause": "pause it", "resume": "resume it", "stop": "stop it", "guide": "guide the agent",
                 "expand": "expand a node", "prune": "prune a node", "add_steps": "add steps",
                 "choose_feedback": "change what the agent is shown"}
NEEDS_RUNNER = {"pause", "resume", "stop"}  # steering that only a live runner can carry out
OFFERED_WHEN_ABLE = STEERING | {"resume_runner", "train_baselines"}  # offered only while they can act


def key_actions(bindings: Iterable[Binding]) -> dict[str, tuple[str, ...]]:
    """Key -> the actions offered only while they can act that it stands for (ConsoleScreen.on_key
    explains a key that cannot act)."""
    out: dict[str, tuple[str, ...]] = {}
    for binding in bindings:
        if binding.action in OFFERED_WHEN_ABLE:
            for key in binding.key.split(","):
                out[key.strip()] = (*out.get(key.strip(), ()), binding.action)
    return out


KEY_ACTIONS = key_actions(CONSOLE_BINDINGS)


def fits_the_p_key(action: str, status: str) -> bool:
    """One key, p: "Pause" while running, "Resume" while paused."""
    if action == "pause":
        return status != "paused"
    if action == "resume":
        return status == "paused"
    return True


def steering_refusal(action: str, state: SessionState, *, read_only: bool, runner: str | None,
                     keys: Mapping[str, str] | None = None) -> str | None:
    """Why a steering key (or u, resume the runner) cannot act in this state (None: it can).
    `keys`: the key the screen has for an action (default: the console's); a way out is named only
    with a key the screen has (a participant's console has no u and no sessions screen)."""
    keys = CONSOLE_KEYS if keys is None else keys
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


def screen_keys(bindings: Iterable[tuple[str, Binding]]) -> dict[str, str]:
    """Action -> the first key a screen binds to it."""
    out: dict[str, str] = {}
    for key, binding in bindings:
        out.setdefault(binding.action, key)
    return out


CONSOLE_KEYS = screen_keys((k.strip(), b) for b in CONSOLE_BINDINGS for k in b.key.split(","))
