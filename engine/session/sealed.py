"""Blinded test metrics, sealed: kept out of everything a participant can read in the database.

A session that blinds test metrics (`SessionConfig.blind_test`) has each blinded test
evaluation written in two parts. The `evaluated` event keeps its verdict, says `sealed: true`
and loses its figures (`summary`, `medfair`); the figures go to the `sealed_metrics` table,
keyed by the event's (session_id, seq). The nodes table is folded from the event, so its test
columns stay empty.

When the session ends, unless it belongs to a study (`study_id` set: a study keeps them blind
for good), the writer reveals them: before `session_finished` it emits each sealed evaluation
again with its figures and `revealed: true`. Every reader's fold, the console following the
log, and the nodes table then have them.

A researcher reads sealed figures before that, or in a study, with `--unblind`:
`unsealed_events` puts them back into the events before the fold, so the reducer gives the
same state as if nothing had been sealed.

The sealed figures are in the same SQLite file: whoever can read the raw file can read them.
What this guarantees is that they are in no table a participant is shown (`events`, `nodes`,
the Datasette views) until they are revealed.
"""
from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from engine.session import events as ev
from engine.session.state import SessionState, fold

if TYPE_CHECKING:
    from engine.session.store import SessionStore, SessionWriter

SEALED_KEYS = ("summary", "medfair")  # an evaluated payload's figures
PREDICTIONS_KEY = "predictions"       # sealed with them: each image's prediction (never in an event)


def sealable(kind: str, payload: dict[str, Any]) -> bool:
    """A blinded test evaluation not yet revealed."""
    return (kind == ev.EVALUATED and payload.get("split") == "test" and bool(payload.get("blinded"))
            and not payload.get("revealed") and not payload.get("sealed"))


def seal(writer: SessionWriter, kind: str, payload: dict[str, Any],
         predictions: Mapping[str, float] | None = None) -> tuple[dict[str, Any], bool]:
    """The writer's hook, called just before it appends an event (its seq is the state's
    last_seq + 1): (the payload to write in clear, whether `predictions` were sealed with it). A
    blinded test evaluation's figures and predictions go to sealed_metrics; a session_finished
    first reveals what the session sealed."""
    if kind == ev.SESSION_FINISHED:
        reveal(writer)
        return payload, False
    if not sealable(kind, payload):
        return payload, False
    figures: dict[str, Any] = {k: payload[k] for k in SEALED_KEYS if k in payload}
    if predictions is not None:
        figures[PREDICTIONS_KEY] = dict(predictions)
    writer.store.db.conn.execute(
        "insert or replace into sealed_metrics (session_id, seq, node_id, split, payload, sealed_at) "
        "values (?, ?, ?, ?, ?, ?)",
        (writer.session_id, writer.state.last_seq + 1, payload.get("node_id"), payload.get("split"),
         json.dumps(figures, sort_keys=True), time.time()))
    return {**{k: v for k, v in payload.items() if k not in SEALED_KEYS}, "sealed": True}, predictions is not None


def kept_blind(state: SessionState) -> bool:
    """A study keeps its blinded test metrics blind after the end (see engine.session.views)."""
    return bool(state.config.get("study_id"))


def reveal(writer: SessionWriter) -> list[int]:
    """Emit each sealed, unrevealed evaluation of the session with its figures (unless a study
    keeps them blind); returns the seqs of the events written."""
    if kept_blind(writer.state):
        return []
    conn = writer.store.db.conn
    rows = conn.execute(
        "select m.seq, m.payload, e.payload from sealed_metrics m join events e "
        "on e.session_id = m.session_id and e.seq = m.seq "
        "where m.session_id = ? and m.revealed_seq is null order by m.seq", [writer.session_id]).fetchall()
    written = []
    for seq, figures, clear in rows:
        payload = {k: v for k, v in json.loads(clear).items() if k not in ("sealed", "predictions_kept")}
        opened = json.loads(figures)
        predictions = opened.pop(PREDICTIONS_KEY, None)
        event = writer.emit(ev.EVALUATED, {**payload, **opened, "revealed": True}, predictions=predictions)
        conn.execute("update sealed_metrics set revealed_seq = ? where session_id = ? and seq = ?",
                     (event.seq, writer.session_id, seq))
        written.append(event.seq)
    return written


def unsealed_events(store: SessionStore, session_id: str, events: Sequence[ev.Event]) -> list[ev.Event]:
    """The events with every sealed evaluation's figures put back (a researcher's --unblind)."""
    figures = {int(seq): json.loads(payload) for seq, payload in store.db.conn.execute(
        "select seq, payload from sealed_metrics where session_id = ?", [session_id])}
    if not figures:
        return list(events)
    out = []
    for e in events:
        if e.seq in figures and e.kind == ev.EVALUATED:
            payload = {k: v for k, v in e.payload.items() if k != "sealed"}
            opened = {k: v for k, v in figures[e.seq].items() if k != PREDICTIONS_KEY}
            e = ev.Event(seq=e.seq, kind=e.kind, payload={**payload, **opened}, ts=e.ts, session_id=e.session_id)
        out.append(e)
    return out


def sealed_predictions(store: SessionStore, session_id: str, node_id: int, split: str) -> tuple[str] | None:
    """The predictions sealed with a node's latest unrevealed evaluation on a split, as a
    one-column row (a researcher's --unblind); None when none were sealed."""
    row = store.db.execute(
        "select json_extract(payload, '$.predictions') from sealed_metrics where session_id = ? and node_id = ? "
        "and split = ? and revealed_seq is null and json_extract(payload, '$.predictions') is not null "
        "order by seq desc limit 1", [session_id, int(node_id), split]).fetchone()
    return (str(row[0]),) if row is not None else None


def open_sealed(store: SessionStore, session_id: str, *, unblind: bool = False) -> SessionState:
    """The session's state for a reader: a participant's fold of the events as stored, or, with
    `unblind` (a researcher), with the sealed figures put back."""
    events = store.events(session_id)
    if unblind:
        events = unsealed_events(store, session_id, events)
    return fold(events, session_id)
