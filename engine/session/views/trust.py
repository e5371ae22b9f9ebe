"""Trust markers: whether a session's agent code ran sandboxed, and whether its runner still lives."""
from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from engine.session.state import SessionState

# The trust marker of a session that ran agent code on this machine without the sandbox.
UNSANDBOXED = "UNSANDBOXED"
UNSANDBOXED_MEANING = "agent code ran on this machine without the sandbox (--sandbox none)"
SANDBOX_VALUES = ("bwrap", "none", "imported")
# The marker of a session that says it runs while its process is gone (killed or crashed); the
# sessions list writes it in lower case, as its other statuses.
RUNNER_STOPPED = "RUNNER STOPPED"


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


