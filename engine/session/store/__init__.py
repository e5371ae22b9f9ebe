"""The session store: an append-only event log in SQLite, a steering-command queue, and the
materialised nodes table; beside them the study grids, the study's people, and the predictions.

One writer per session (the runner) appends events through a `SessionWriter`, which folds each
event into its in-memory state and, in the same transaction, upserts the node row it touched and
the session's summary row: so the nodes table always equals `fold(events)`, and a kill -9 loses
nothing that was committed. Any number of readers in other processes (console, Datasette,
`befair sessions`) read concurrently thanks to WAL. One connection per thread.

Only this package (and engine.session.schema, its migrations) writes SQL; everything else calls
named methods of `SessionStore`:

- connection: the per-thread connection, checked and migrated on opening, and `transaction()`;
- sessions: sessions, events, node rows, commands, baselines and reference rows;
- writer: `SessionWriter`, appending events, sealing and revealing blinded test figures;
- rows: the node row and session summary the writer keeps in step with the log;
- predictions: kept predictions and sealed figures;
- studies: the study grids; participants: the study's people; heartbeat: the runner's heartbeat.
"""
from __future__ import annotations

import json
import os
import time
from typing import Any

from engine.session import event_types as et
from engine.session.store.connection import (
    SessionNotFound, StoreConnection, Transaction, database_error, gc_paused, new_session_id, payload_loads,
)
from engine.session.store.participants import ParticipantRows, StudyEvent
from engine.session.store.predictions import PredictionRows
from engine.session.store.rows import node_row, session_summary
from engine.session.store.sessions import SessionRows
from engine.session.store.studies import GridCell, NewStudy, StudyRows
from engine.session.store.writer import SessionWriter

__all__ = [
    "GridCell", "NewStudy", "SessionNotFound", "SessionStore", "SessionWriter", "StoreConnection", "StudyEvent",
    "Transaction", "database_error", "gc_paused", "new_session_id", "node_row", "payload_loads", "session_summary",
]


class SessionStore(SessionRows, PredictionRows, StudyRows, ParticipantRows):
    """The session database: open one per process (it keeps one connection per thread)."""

    def writer(self, session_id: str) -> SessionWriter:
        return SessionWriter(self, session_id)

    def create_session(
        self,
        config: dict[str, Any],
        *,
        instruction: str,
        coder: dict[str, Any],
        data: dict[str, Any],
        session_id: str | None = None,
        origin: str = "live",
        ts: float | None = None,
    ) -> SessionWriter:
        """Create the session row and its session_started event; returns its writer.
        `ts`: the creation time (default now); imports and recorded fixtures pass their own."""
        session_id = session_id or new_session_id()
        now = time.time() if ts is None else float(ts)
        with self.transaction():
            self.db.table("sessions").insert(
                {
                    "id": session_id, "created_at": now, "updated_at": now, "status": "running",
                    "level": config.get("level"), "instruction": instruction,
                    "coder": coder.get("name"), "coder_label": coder.get("label"),
                    "simulated": int(bool(coder.get("simulated"))),
                    "participant_id": config.get("participant_id"), "study_id": config.get("study_id"),
                    "repeat_index": config.get("repeat_index"), "budget": config.get("steps"),
                    "steps": 0, "n_nodes": 0, "best_criterion": config.get("best"),
                    "tokens_in": 0, "tokens_out": 0, "cost": 0.0, "data": json.dumps(data),
                    "config": json.dumps(config), "pid": os.getpid(), "origin": origin,
                }
            )
        writer = SessionWriter(self, session_id)
        writer.emit(et.SessionStarted(config=config, instruction=instruction, coder=coder, data=data), ts=now)
        return writer
