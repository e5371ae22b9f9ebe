"""The store's study people (008_participants): the study's own append-only event log
(`study_events`), the participant rows folded from it (`study_participants`), and each
participant's link secret (`participant_links`, 010). Which event changes which column is decided
in engine.session.participants; this module reads and writes rows."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.session.store.connection import StoreConnection


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


_WHERE = "where study = ? and participant_id = ?"


class ParticipantRows(StoreConnection):
    """Reading and writing a study's events and participant rows. Call the writing methods of one
    event inside `with store.transaction():` so that the event and its fold commit together."""

    tab: str | None = None
    """The connection (a browser tab of `befair serve`, or a terminal) whose participant's commands go
    through this store: a participant's app opens its own store and sets it, so every command it
    issues records where it came from, and one from a tab that another took over is refused."""

    def insert_study_event(self, study: str, kind: str, *, ts: float, participant_id: str | None,
                           session_id: str | None, cell: int | None, payload: dict[str, Any]) -> StudyEvent:
        """Append one study event under the study's next seq."""
        conn = self.db.conn
        with self.transaction():
            seq = int(conn.execute("select coalesce(max(seq), 0) + 1 from study_events where study = ?",
                                   [study]).fetchone()[0])
            conn.execute("insert into study_events (study, seq, ts, kind, participant_id, session_id, cell, payload) "
                         "values (?, ?, ?, ?, ?, ?, ?, ?)",
                         [study, seq, ts, kind, participant_id, session_id, cell, json.dumps(payload, sort_keys=True)])
        return StudyEvent(study, seq, ts, kind, participant_id, session_id, cell, payload)

    def ensure_participant(self, study: str, participant_id: str) -> None:
        self.db.conn.execute("insert or ignore into study_participants (study, participant_id) values (?, ?)",
                             [study, participant_id])

    def record_consent(self, study: str, participant_id: str, *, at: float, consent_sha256: Any) -> None:
        self.db.conn.execute(f"update study_participants set joined_at = coalesce(joined_at, ?), consent_sha256 = ? "
                             f"{_WHERE}", [at, consent_sha256, study, participant_id])

    def record_profile(self, study: str, participant_id: str, *, at: float, role: Any, years_dermatology: Any,
                       years_ml: Any, notes: Any) -> None:
        self.db.conn.execute("update study_participants set role = ?, years_dermatology = ?, years_ml = ?, "
                             f"notes = ?, profile_at = ? {_WHERE}",
                             [role, years_dermatology, years_ml, notes, at, study, participant_id])

    def record_cell(self, study: str, participant_id: str, cell: int | None) -> None:
        self.db.conn.execute(f"update study_participants set cell = ? {_WHERE}", [cell, study, participant_id])

    def study_events(self, study: str, *, participant_id: str | None = None,
                     kinds: Sequence[str] | None = None) -> list[StudyEvent]:
        """The study's events in seq order (one participant's, some kinds only)."""
        sql = ("select study, seq, ts, kind, participant_id, session_id, cell, payload from study_events "
               "where study = ?")
        params: list[Any] = [study]
        if participant_id is not None:
            sql += " and participant_id = ?"
            params.append(participant_id)
        if kinds:
            sql += f" and kind in ({', '.join('?' * len(kinds))})"
            params += list(kinds)
        rows = self.db.conn.execute(sql + " order by seq", params).fetchall()
        return [StudyEvent(r[0], int(r[1]), float(r[2]), r[3], r[4], r[5], r[6], json.loads(r[7])) for r in rows]

    def participant_row(self, study: str, participant_id: str) -> dict[str, Any] | None:
        rows = list(self.db.query(f"select * from study_participants {_WHERE}", [study, participant_id]))
        return rows[0] if rows else None

    def participant_rows(self, study: str) -> list[dict[str, Any]]:
        return list(self.db.query("select * from study_participants where study = ? order by participant_id",
                                  [study]))

    def touch_participant(self, study: str, participant_id: str, *, cell: int | None, client: str,
                          at: float) -> bool:
        """Presence: the participant's tab `client` is open, on `cell` (None: the cell recorded).
        Written only while `client` is their live tab (or none is); False when another tab holds it."""
        with self.transaction():
            self.ensure_participant(study, participant_id)
            cursor = self.db.conn.execute(
                f"update study_participants set seen_at = ?, cell = coalesce(?, cell), client = ? {_WHERE} "
                "and (client is null or client = ?)", [at, cell, client, study, participant_id, client])
            return cursor.rowcount > 0

    def claim_participant_tab(self, study: str, participant_id: str, *, client: str, at: float) -> str | None:
        """Make `client` the participant's live tab; returns the tab it replaced (None: none, or itself).
        Call inside the transaction that records the takeover."""
        self.ensure_participant(study, participant_id)
        row = self.db.conn.execute(f"select client from study_participants {_WHERE}",
                                   [study, participant_id]).fetchone()
        before = None if row is None or row[0] == client else row[0]
        self.db.conn.execute(f"update study_participants set client = ?, seen_at = ? {_WHERE}",
                             [client, at, study, participant_id])
        return None if before is None else str(before)

    def participant_of_tab(self, study: str, client: str) -> str | None:
        """The participant whose live tab is `client`, None when it is nobody's (now)."""
        row = self.db.conn.execute("select participant_id from study_participants where study = ? and client = ?",
                                   [study, client]).fetchone()
        return None if row is None else str(row[0])

    # -- link secrets (010_participant_links) --------------------------------------------------
    def add_participant_codes(self, study: str, codes: dict[str, str], *, at: float) -> None:
        """Record a code for each participant that has none yet (an existing code never changes)."""
        with self.transaction():
            for participant_id, code in codes.items():
                self.db.conn.execute("insert or ignore into participant_links (study, participant_id, code, "
                                     "created_at) values (?, ?, ?, ?)", [study, participant_id, code, at])

    def participant_codes(self, study: str) -> dict[str, str]:
        rows = self.db.conn.execute("select participant_id, code from participant_links where study = ?", [study])
        return {str(r[0]): str(r[1]) for r in rows.fetchall()}

    def leave_participant(self, study: str, participant_id: str, *, client: str) -> None:
        """The tab `client` closed: not seen any more (unless another tab of theirs took over)."""
        with self.transaction():
            self.db.conn.execute(f"update study_participants set seen_at = null {_WHERE} and client = ?",
                                 [study, participant_id, client])
