"""A study's people in the session database (008_participants): the study's own event log, one row
per participant folded from it, their presence, and the steering commands they issue.

`study_events` is append-only, like a session's `events`: each study has its own `seq` (1, 2, ...),
and the participant row (`study_participants`) is written in the same transaction as the event it
folds, so a killed process loses nothing that was recorded. Kinds and payloads:

consent          consent_sha256: str (of the consent text shown), instructions_sha256: str
profile          the participant fields the spec asks: role: str, years_dermatology: float,
                 years_ml: float, notes: str (each only when asked)
cell_started     the participant started (or went back to) a cell: cell, session_id, position: int
                 (1-based place in their order), level: str
answers          the answers after a session: cell, session_id, answers: {question id: int | str},
                 session_status: str (how the session ended)
command_refused  a command for a session that is not the participant's: kind, target: str (the
                 session), reason: str
completed        the participant reached the closing page

Presence (`touch`) is not an event: a participant's tab writes `seen_at` and its cell every few
seconds, so the researcher's grid can say who is on which cell now.
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

from engine.errors import UsageError
from engine.session.store import SessionNotFound, SessionStore

CONSENT, PROFILE, CELL_STARTED, ANSWERS, COMMAND_REFUSED, COMPLETED = (
    "consent", "profile", "cell_started", "answers", "command_refused", "completed")
KINDS = frozenset({CONSENT, PROFILE, CELL_STARTED, ANSWERS, COMMAND_REFUSED, COMPLETED})
PROFILE_COLUMNS = ("role", "years_dermatology", "years_ml", "notes")
ONLINE_S = 10.0  # a tab seen this recently is on its cell now


class CommandRefused(UsageError):
    """A participant's command for a session that is not theirs (recorded before it is raised)."""


@dataclass(frozen=True)
class StudyEvent:
    study: str
    seq: int
    ts: float
    kind: str
    participant_id: str | None
    session_id: str | None = None
    cell: int | None = None
    payload: dict[str, Any] = field(default_factory=dict)


def append(store: SessionStore, study: str, kind: str, *, participant_id: str | None,
           payload: dict[str, Any] | None = None, session_id: str | None = None, cell: int | None = None,
           ts: float | None = None) -> StudyEvent:
    """Append one study event (durable on return) and fold it into the participant's row."""
    if kind not in KINDS:
        raise ValueError(f"unknown study event kind {kind!r}")
    payload = dict(payload or {})
    now = time.time() if ts is None else float(ts)
    conn = store.db.conn
    with store._write():
        seq = int(conn.execute("select coalesce(max(seq), 0) + 1 from study_events where study = ?",
                               [study]).fetchone()[0])
        conn.execute("insert into study_events (study, seq, ts, kind, participant_id, session_id, cell, payload) "
                     "values (?, ?, ?, ?, ?, ?, ?, ?)",
                     [study, seq, now, kind, participant_id, session_id, cell, json.dumps(payload, sort_keys=True)])
        if participant_id is not None:
            _fold(conn, study, participant_id, kind, payload, cell, now)
    return StudyEvent(study, seq, now, kind, participant_id, session_id, cell, payload)


def _fold(conn: Any, study: str, participant_id: str, kind: str, payload: dict[str, Any], cell: int | None,
          ts: float) -> None:
    conn.execute("insert or ignore into study_participants (study, participant_id) values (?, ?)",
                 [study, participant_id])
    where = [study, participant_id]
    if kind == CONSENT:
        conn.execute("update study_participants set joined_at = coalesce(joined_at, ?), consent_sha256 = ? "
                     "where study = ? and participant_id = ?", [ts, payload.get("consent_sha256"), *where])
    elif kind == PROFILE:
        values = [payload.get(c) for c in PROFILE_COLUMNS]
        conn.execute("update study_participants set role = ?, years_dermatology = ?, years_ml = ?, notes = ?, "
                     "profile_at = ? where study = ? and participant_id = ?", [*values, ts, *where])
    elif kind == CELL_STARTED:
        conn.execute("update study_participants set cell = ? where study = ? and participant_id = ?", [cell, *where])


def events(store: SessionStore, study: str, *, participant_id: str | None = None,
           kinds: tuple[str, ...] | None = None) -> list[StudyEvent]:
    """The study's events in seq order (one participant's, some kinds only)."""
    sql = "select study, seq, ts, kind, participant_id, session_id, cell, payload from study_events where study = ?"
    params: list[Any] = [study]
    if participant_id is not None:
        sql += " and participant_id = ?"
        params.append(participant_id)
    if kinds:
        sql += f" and kind in ({', '.join('?' * len(kinds))})"
        params += list(kinds)
    rows = store.db.conn.execute(sql + " order by seq", params).fetchall()
    return [StudyEvent(r[0], int(r[1]), float(r[2]), r[3], r[4], r[5], r[6], json.loads(r[7])) for r in rows]


def participant(store: SessionStore, study: str, participant_id: str) -> dict[str, Any] | None:
    rows = list(store.db.query("select * from study_participants where study = ? and participant_id = ?",
                               [study, participant_id]))
    return rows[0] if rows else None


def participants(store: SessionStore, study: str, *, now: float | None = None) -> list[dict[str, Any]]:
    """Every participant row of the study, with `online` (their tab was seen in the last ONLINE_S s)."""
    now = time.time() if now is None else now
    rows = list(store.db.query("select * from study_participants where study = ? order by participant_id", [study]))
    for row in rows:
        row["online"] = row.get("seen_at") is not None and now - float(row["seen_at"]) <= ONLINE_S
    return rows


def touch(store: SessionStore, study: str, participant_id: str, *, cell: int | None, client: str) -> None:
    """Presence: this participant's tab is open, on `cell` (not an event: it changes nothing recorded)."""
    with store._write():
        store.db.conn.execute("insert or ignore into study_participants (study, participant_id) values (?, ?)",
                              [study, participant_id])
        store.db.conn.execute("update study_participants set seen_at = ?, cell = coalesce(?, cell), client = ? "
                              "where study = ? and participant_id = ?",
                              [time.time(), cell, client, study, participant_id])


def leave(store: SessionStore, study: str, participant_id: str, *, client: str) -> None:
    """The tab closed: not seen any more (only when no other tab of theirs took over)."""
    with store._write():
        store.db.conn.execute("update study_participants set seen_at = null where study = ? and participant_id = ? "
                              "and client = ?", [study, participant_id, client])


def issue_command(store: SessionStore, study: str, participant_id: str, session_id: str, kind: str,
                  payload: dict[str, Any] | None = None) -> int:
    """Queue a steering command from a participant for their own session of this study. A command
    for any other session (another participant's, another study's, one that does not exist) is
    refused: recorded as a `command_refused` study event, then CommandRefused is raised."""
    try:
        row = store.session(session_id)
    except SessionNotFound:
        row = None
    reason = None
    if row is None:
        reason = f"no session {session_id!r}"
    elif row.get("study_id") != study:
        reason = f"session {session_id} is not in study {study}"
    elif row.get("participant_id") != participant_id:
        reason = f"session {session_id} is {row.get('participant_id') or 'no participant'}'s, not {participant_id}'s"
    if reason is not None:
        append(store, study, COMMAND_REFUSED, participant_id=participant_id, session_id=session_id,
               payload={"kind": kind, "target": session_id, "reason": reason, "command": payload or {}})
        raise CommandRefused(f"command refused: {reason}")
    return store.issue_command(session_id, kind, payload or {}, by=f"participant {participant_id}",
                               participant_id=participant_id)
