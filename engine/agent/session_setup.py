"""Setting a session up: the data workspace its settings name, and its session_started event.

    writer = start_session(store, SessionConfig(level="fairness-methods", steps=20))
    workspace = resolve_workspace(config, progress)    # the cached SynthDerm one, or a folder

`engine.agent.runner.run` then drives the session; `engine.agent.recovery.resume` continues one.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.agent.coder_registry import coder_info, make_coder
from engine.agent.session_config import SessionConfig
from engine.agent.task_protocol import task_protocol
from engine.coders.protocol import Coder
from engine.data.be_fair_layout import AgentWorkspace, open_workspace
from engine.errors import BefairError
from engine.evaluation.evaluator import label_digests
from engine.execution import Sandbox, guard_runs_root, prepare_session_input
from engine.paths import runs_dir
from engine.session.state import SessionState
from engine.session.store import SessionStore, SessionWriter

if TYPE_CHECKING:
    from engine.progress import ProgressFn


def synth_settings(config: SessionConfig) -> dict[str, int]:
    """The SynthDerm generator's settings for a session: the defaults, and what config.extra["synth"] sets."""
    from engine.data.synth import DEFAULTS

    synth = dict(DEFAULTS)
    synth.update({k: int(v) for k, v in (config.extra.get("synth") or {}).items() if k in DEFAULTS and v is not None})
    return synth


def resolve_workspace(config: SessionConfig, progress: ProgressFn | None = None) -> AgentWorkspace:
    """The data workspace a session's settings name: the cached SynthDerm one, or a folder; in
    the layout of the session's task protocol (engine.agent.task_protocol)."""
    return task_protocol(config.protocol).workspace(config.data, synth_settings(config), progress)


def data_summary(ws: AgentWorkspace) -> str | None:
    """session_started's data summary: the workspace's own, else the counts of its manifest."""
    summary = getattr(ws, "summary", None)
    if callable(summary):
        try:
            return str(summary())
        except Exception:
            pass
    manifest = getattr(ws, "manifest", None) or {}
    if not isinstance(manifest, dict):
        return None
    counts = manifest.get("counts") or {}
    if isinstance(counts, dict) and counts:
        return ", ".join(f"{k}: {v}" for k, v in counts.items() if not isinstance(v, (dict, list)))
    return None


def start_session(
    store: SessionStore,
    config: SessionConfig,
    *,
    workspace: AgentWorkspace | None = None,
    coder: Coder | None = None,
    session_id: str | None = None,
) -> SessionWriter:
    """Create a session (session_started) with its read-only input copy; `run` drives it."""
    if session_id:
        try:
            store.session(session_id)
        except BefairError:
            pass
        else:
            raise BefairError(f"session {session_id!r} already exists in {store.path}; use `befair resume`")
    Sandbox.create(config.sandbox)  # refuse before anything is recorded when bwrap cannot run here
    coder = coder if coder is not None else make_coder(config)
    task_protocol(config.protocol).check_coder(getattr(coder, "name", None))
    ws = workspace if workspace is not None else resolve_workspace(config)
    runs_root = runs_dir(store.path)
    guard_runs_root(runs_root, getattr(ws, "root", None))
    data: dict[str, Any] = {"kind": "synth" if config.data == "synth" else "workspace",
                            "path": str(Path(ws.root).resolve()), "summary": data_summary(ws),
                            "label_sha256": label_digests(ws)}
    writer = store.create_session(config.to_dict(), instruction=config.instruction, coder=coder_info(coder),
                                  data=data, session_id=session_id)
    prepare_session_input(runs_root, writer.session_id, Path(ws.agent_input))
    return writer


def open_session_workspace(state: SessionState, config: SessionConfig) -> AgentWorkspace:
    """The workspace a recorded session ran on (its session_started data path), else its settings'."""
    path = (state.data or {}).get("path")
    if path and Path(path).is_dir():
        return open_workspace(Path(path))
    return resolve_workspace(config)


__all__ = ["data_summary", "open_session_workspace", "resolve_workspace", "start_session", "synth_settings"]
