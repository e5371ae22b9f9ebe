"""Continuing a session after a crash, kill -9 or stop.

    writer, interrupted = recover(store, session_id)   # nodes left running marked, session_resumed
    state = resume(store, session_id)                  # recover, then run to the end of the budget
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.agent.runner import EventHook, run
from engine.coders.protocol import Coder
from engine.data.be_fair_layout import AgentWorkspace
from engine.errors import BefairError
from engine.execution import Executor, kill_group
from engine.execution.run_dirs import pgid_file
from engine.paths import session_run_dir
from engine.paths import runs_dir
from engine.session import event_types as et
from engine.session.heartbeat import pid_alive
from engine.session.state import SessionState
from engine.session.store import SessionStore, SessionWriter

INTERRUPTED_ON_RESUME = "process ended while running"


def recover(store: SessionStore, session_id: str, *, by: str = "user", force: bool = False,
            writer: SessionWriter | None = None) -> tuple[SessionWriter, list[int]]:
    """Mark the nodes a dead process left running as interrupted and record session_resumed."""
    row = store.session(session_id)
    writer = writer or store.writer(session_id)
    state = writer.state
    if not force and state.status in ("running", "paused") and pid_alive(row.get("pid"), own_counts=False):
        raise BefairError(f"session {session_id} still seems to be running (process {row['pid']}); "
                          "stop it first, or resume with --force")
    interrupted = []
    run_dir = session_run_dir(runs_dir(store.path), session_id)
    for node in sorted(state.nodes.values(), key=lambda n: n.node_id):
        if node.status in ("running", "queued"):
            noted = pgid_file(Path(node.workdir or run_dir / f"node_{node.node_id}"))
            try:
                kill_group(int(noted.read_text().strip()))  # a pipeline the dead engine left behind
            except (OSError, ValueError):
                pass
            writer.emit(et.NodeInterrupted(node_id=node.node_id, reason=INTERRUPTED_ON_RESUME))
            interrupted.append(node.node_id)
    writer.emit(et.SessionResumed(by=by, interrupted=interrupted))
    store.set_runner_pid(session_id, os.getpid())
    return writer, interrupted


def resume(store: SessionStore, session_id: str, *, coder: Coder | None = None, executor: Executor | None = None,
           on_event: EventHook | None = None, workspace: AgentWorkspace | None = None, by: str = "user",
           force: bool = False, **runner_kw: Any) -> SessionState:
    """Continue a session after a crash, kill -9 or stop: interrupted nodes are marked, the search
    goes on from the folded state until the budget is spent."""
    writer, _ = recover(store, session_id, by=by, force=force)
    return run(store, session_id, coder=coder, executor=executor, on_event=on_event, workspace=workspace,
               writer=writer, **runner_kw)


__all__ = ["INTERRUPTED_ON_RESUME", "recover", "resume"]
