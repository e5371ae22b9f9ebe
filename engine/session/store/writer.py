"""The session's one writer: appends its events, keeping the state, the nodes table and the
session's summary in step, and seals and reveals blinded test evaluations (engine.session.sealed)."""
from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from engine.session import events as ev
from engine.session import sealed, selection
from engine.session.event_types import TypedEvent
from engine.session.changes import Changes, apply_changes
from engine.session.redact import Redactor
from engine.session.store.rows import (
    INSERT_EVENT, INSERT_FILES, INSERT_PREDICTIONS, UNSET, UPDATE_SESSION, UPSERT_NODE, node_row, packed_scores,
    session_summary,
)

if TYPE_CHECKING:
    from engine.session.store.sessions import SessionRows

_INSERT_SEALED = ("insert or replace into sealed_metrics (session_id, seq, node_id, split, payload, sealed_at) "
                  "values (?, ?, ?, ?, ?, ?)")
_UNREVEALED = ("select m.seq, m.payload, e.payload from sealed_metrics m join events e "
               "on e.session_id = m.session_id and e.seq = m.seq "
               "where m.session_id = ? and m.revealed_seq is null order by m.seq")
_MARK_REVEALED = "update sealed_metrics set revealed_seq = ? where session_id = ? and seq = ?"
_MARK_CONSUMED = "update commands set consumed_at = ?, consumed_seq = ?, result = ? where id = ?"

# Events that change no node row and no session summary: skip the upserts for them.


class SessionWriter:
    """Appends a session's events, keeping the state, nodes table and summary in step.

    `emit` commits each event on return. Inside `with writer.batch():` (or `emit_many`) events
    share one transaction: the node rows they touched and the session summary are written once,
    at the batch's end, and the whole batch is durable when the block exits (a crash inside it
    loses the batch, never part of it)."""

    def __init__(self, store: SessionRows, session_id: str, *, redactor: Redactor | None = None):
        self.store = store
        self.session_id = session_id
        self.redactor = redactor  # the session's secrets (a coder's API key): never written
        self.state = store.state(session_id)
        self._best: Any = UNSET  # cached ★ node id (selection.choice)
        self._batch_depth = 0
        self._batch_owns = False
        self._changes = Changes()  # what the batch's events changed (engine.session.changes)

    def emit(
        self,
        event: TypedEvent,
        *,
        ts: float | None = None,
        consumes: dict[str, Any] | None = None,
        result: str = "applied",
        predictions: Mapping[str, float] | None = None,
    ) -> ev.Event:
        """Append one event (durable on return, or at the end of the enclosing batch).
        `consumes`: the steering command this event carries out, marked consumed in the same
        transaction (so never applied twice). `predictions`: an `evaluated` event's per-image
        predictions, kept in the same transaction (sealed with a blinded test evaluation).
        `event`: a typed event (engine.session.event_types)."""
        if not isinstance(event, TypedEvent):
            raise TypeError(f"the writer appends typed events (engine.session.event_types), not {event!r}")
        if self.redactor is not None:
            event = self.redactor.typed(event)
        if predictions is not None and event.kind != ev.EVALUATED:
            raise ValueError("only an evaluated event keeps predictions")
        with self.batch():
            if event.kind == ev.SESSION_FINISHED:
                self._reveal_sealed()  # appended before the end, in the same transaction
            return self._append(event.kind, event.to_payload(), ts, consumes, result, predictions, typed=event)

    def emit_many(self, items: Iterable[TypedEvent], *, ts: float | None = None) -> list[ev.Event]:
        """Append typed events in one transaction; durable on return."""
        with self.batch():
            return [self.emit(item, ts=ts) for item in items]

    def batch(self) -> _Batch:
        """One transaction for every event emitted inside (nested batches join the outer one).
        Keep a batch short: it holds the database's write lock until it ends."""
        return _Batch(self)

    def _append(self, kind: str, payload: dict[str, Any], ts: float | None, consumes: dict[str, Any] | None,
                result: str, predictions: Mapping[str, float] | None = None,
                typed: TypedEvent | None = None) -> ev.Event:
        """`typed`: the event `payload` was written from, kept on the Event for the reducer (None
        where this method changes the payload: the reducer then parses what was written)."""
        if predictions is not None:
            payload, typed = {**payload, "predictions_kept": True}, None
        kept_sealed = False
        if sealed.sealable(kind, payload):  # blinded test figures: kept apart
            self._seal(payload, predictions)
            payload, kept_sealed, typed = sealed.clear_part(payload), predictions is not None, None
        event = ev.Event(seq=self.state.last_seq + 1, kind=kind, payload=payload,
                         ts=time.time() if ts is None else ts, session_id=self.session_id, typed=typed)
        if predictions is not None and not kept_sealed:
            self._keep_predictions(event, predictions)
        # Plain SQL on the raw connection: sqlite-utils' insert/upsert introspect the table on
        # every call, which cost ~4x the ingest rate. The rows are the same.
        self.store.db.conn.execute(INSERT_EVENT, (self.session_id, event.seq, event.ts, kind,
                                                   json.dumps(payload, sort_keys=True)))
        apply_changes(self.state, event, self._changes)
        if consumes is not None:
            self._mark_consumed(consumes, result, event.seq)
        return event

    def _keep_predictions(self, event: ev.Event, predictions: Mapping[str, float]) -> None:
        """The evaluation's predictions: its files' list once per session, the scores as float64."""
        files = sorted(predictions)
        listed = json.dumps(files)
        digest = hashlib.sha256(listed.encode()).hexdigest()
        conn = self.store.db.conn
        conn.execute(INSERT_FILES, (self.session_id, digest, listed))
        conn.execute(INSERT_PREDICTIONS, (self.session_id, event.seq, event.payload.get("node_id"),
                                          event.payload.get("split"), len(files), digest,
                                          packed_scores(predictions, files), event.ts))

    def _seal(self, payload: dict[str, Any], predictions: Mapping[str, float] | None) -> None:
        """A blinded test evaluation's figures and predictions, to sealed_metrics under the seq
        its event is about to get."""
        figures = sealed.sealed_part(payload, dict(predictions) if predictions is not None else None)
        self.store.db.conn.execute(_INSERT_SEALED, (
            self.session_id, self.state.last_seq + 1, payload.get("node_id"), payload.get("split"),
            json.dumps(figures, sort_keys=True), time.time()))

    def _reveal_sealed(self) -> list[int]:
        """Append each sealed, unrevealed evaluation again with its figures (unless a study keeps
        them blind); returns the seqs of the events written."""
        if sealed.kept_blind(self.state):
            return []
        conn = self.store.db.conn
        written = []
        for seq, figures, clear in conn.execute(_UNREVEALED, [self.session_id]).fetchall():
            payload, predictions = sealed.revealed(json.loads(clear), json.loads(figures))
            event = self._append(ev.EVALUATED, payload, None, None, "applied", predictions)
            conn.execute(_MARK_REVEALED, (event.seq, self.session_id, seq))
            written.append(event.seq)
        return written

    def _write_rows(self) -> None:
        """The node rows and session summary folded from the batch's events."""
        conn = self.store.db.conn
        nodes = self.state.nodes
        conn.executemany(UPSERT_NODE, [tuple(node_row(self.session_id, nodes[n]).values())
                                        for n in sorted(self._changes.rows) if n in nodes])
        if self._changes.summary:
            if self._changes.best or self._best is UNSET:
                self._best = selection.choice(self.state)
            summary = session_summary(self.state, self._best)
            conn.execute(UPDATE_SESSION, (*summary.values(), self.session_id))
        self._clear_dirty()

    def _clear_dirty(self) -> None:
        self._changes = Changes()

    def _rolled_back(self) -> None:
        """The batch's events were not written: forget them in memory too."""
        self._clear_dirty()
        self.state = self.store.state(self.session_id)
        self._best = UNSET

    def consume_command(self, command: dict[str, Any], result: str) -> None:
        """Mark a command consumed without an event (e.g. rejected: unknown node)."""
        with self.batch():
            self._mark_consumed(command, result, None)

    def _mark_consumed(self, command: dict[str, Any], result: str, seq: int | None) -> None:
        self.store.db.conn.execute(_MARK_CONSUMED, (time.time(), seq, result, int(command["id"])))


class _Batch:
    """The writer's transaction: BEGIN IMMEDIATE at the outermost entry; at its exit the rows
    folded from the events, then COMMIT (or ROLLBACK and a state reloaded from the log)."""

    def __init__(self, writer: SessionWriter):
        self.writer = writer

    def __enter__(self) -> SessionWriter:
        w = self.writer
        if w._batch_depth == 0:
            conn = w.store.db.conn
            w._batch_owns = not conn.in_transaction  # else the store's open transaction commits it
            if w._batch_owns:
                conn.execute("BEGIN IMMEDIATE")
        w._batch_depth += 1
        return w

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 _tb: TracebackType | None) -> Literal[False]:
        w = self.writer
        w._batch_depth -= 1
        if w._batch_depth > 0:
            return False
        conn = w.store.db.conn
        if exc_type is None:
            try:
                w._write_rows()
                if w._batch_owns:
                    conn.execute("COMMIT")
                return False
            except BaseException:
                if w._batch_owns:
                    conn.execute("ROLLBACK")
                w._rolled_back()
                raise
        if w._batch_owns:
            conn.execute("ROLLBACK")
        w._rolled_back()
        return False
