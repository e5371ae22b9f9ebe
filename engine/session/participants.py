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
tab_opened       a tab (a connection: `befair serve` gives each browser tab an id; a terminal has its
                 own) became the participant's live one: tab: str, previous: str | None (the tab it
                 replaced), previous_online: bool (that tab was open: a takeover), via: str (link,
                 form, reconnect, terminal, take-back)

One live tab per participant: the newest tab takes over (`claim_tab`); the one it replaced sees
that its presence write is refused (`touch` returns False), says so, and steers no more: a command
from a store whose `tab` is not the live one is refused and recorded (`command_refused`). Every
command records its tab in `issued_by` ("participant p02 · tab Ab3…"), which the session's events
carry as `by`.

Presence (`touch`) is not an event: a participant's tab writes `seen_at` and its cell every few
seconds, so the researcher's grid can say who is on which cell now.
"""
from __future__ import annotations

import time
from typing import Any

from engine.errors import UsageError
from engine.session.store import SessionNotFound, SessionStore
from engine.session.store.participants import StudyEvent

CONSENT, PROFILE, CELL_STARTED, ANSWERS, COMMAND_REFUSED, COMPLETED, TAB_OPENED = (
    "consent", "profile", "cell_started", "answers", "command_refused", "completed", "tab_opened")
KINDS = frozenset({CONSENT, PROFILE, CELL_STARTED, ANSWERS, COMMAND_REFUSED, COMPLETED, TAB_OPENED})
PROFILE_COLUMNS = ("role", "years_dermatology", "years_ml", "notes")
ONLINE_S = 10.0  # a tab seen this recently is on its cell now


class CommandRefused(UsageError):
    """A participant's command for a session that is not theirs (recorded before it is raised)."""


def append(store: SessionStore, study: str, kind: str, *, participant_id: str | None,
           payload: dict[str, Any] | None = None, session_id: str | None = None, cell: int | None = None,
           ts: float | None = None) -> StudyEvent:
    """Append one study event (durable on return) and fold it into the participant's row."""
    if kind not in KINDS:
        raise ValueError(f"unknown study event kind {kind!r}")
    payload = dict(payload or {})
    now = time.time() if ts is None else float(ts)
    with store.transaction():
        event = store.insert_study_event(study, kind, ts=now, participant_id=participant_id, session_id=session_id,
                                         cell=cell, payload=payload)
        if participant_id is not None:
            _fold(store, study, participant_id, kind, payload, cell, now)
    return event


def _fold(store: SessionStore, study: str, participant_id: str, kind: str, payload: dict[str, Any],
          cell: int | None, ts: float) -> None:
    store.ensure_participant(study, participant_id)
    if kind == CONSENT:
        store.record_consent(study, participant_id, at=ts, consent_sha256=payload.get("consent_sha256"))
    elif kind == PROFILE:
        store.record_profile(study, participant_id, at=ts, **{c: payload.get(c) for c in PROFILE_COLUMNS})
    elif kind == CELL_STARTED:
        store.record_cell(study, participant_id, cell)


def events(store: SessionStore, study: str, *, participant_id: str | None = None,
           kinds: tuple[str, ...] | None = None) -> list[StudyEvent]:
    """The study's events in seq order (one participant's, some kinds only)."""
    return store.study_events(study, participant_id=participant_id, kinds=kinds)


def participant(store: SessionStore, study: str, participant_id: str) -> dict[str, Any] | None:
    return store.participant_row(study, participant_id)


def participants(store: SessionStore, study: str, *, now: float | None = None) -> list[dict[str, Any]]:
    """Every participant row of the study, with `online` (their tab was seen in the last ONLINE_S s)."""
    now = time.time() if now is None else now
    rows = store.participant_rows(study)
    for row in rows:
        row["online"] = row.get("seen_at") is not None and now - float(row["seen_at"]) <= ONLINE_S
    return rows


def touch(store: SessionStore, study: str, participant_id: str, *, cell: int | None, client: str) -> bool:
    """Presence: this participant's tab is open, on `cell` (not an event: it changes nothing recorded).
    False when another tab of theirs took over (nothing is written then)."""
    return store.touch_participant(study, participant_id, cell=cell, client=client, at=time.time())


def claim_tab(store: SessionStore, study: str, participant_id: str, tab: str, *, via: str) -> StudyEvent | None:
    """Make `tab` the participant's live tab; the `tab_opened` event recorded (None when it already was)."""
    now = time.time()
    with store.transaction():
        row = store.participant_row(study, participant_id) or {}
        seen = row.get("seen_at")
        previous = store.claim_participant_tab(study, participant_id, client=tab, at=now)
        if previous is None and row.get("client") == tab:
            return None
        online = previous is not None and seen is not None and now - float(seen) <= ONLINE_S
        return append(store, study, TAB_OPENED, participant_id=participant_id, ts=now,
                      payload={"tab": tab, "previous": previous, "previous_online": online, "via": via})


def live_tab(store: SessionStore, study: str, participant_id: str) -> tuple[str | None, float | None]:
    """The participant's live tab and when it became theirs (None, None: no tab yet)."""
    row = store.participant_row(study, participant_id) or {}
    tab = row.get("client")
    if tab is None:
        return None, None
    opened = [e for e in events(store, study, participant_id=participant_id, kinds=(TAB_OPENED,))
              if e.payload.get("tab") == tab]
    return str(tab), (opened[-1].ts if opened else None)


def participant_of_tab(store: SessionStore, study: str, tab: str) -> str | None:
    """Whose live tab `tab` is (None: nobody's now)."""
    return store.participant_of_tab(study, tab)


def leave(store: SessionStore, study: str, participant_id: str, *, client: str) -> None:
    """The tab closed: not seen any more (only when no other tab of theirs took over)."""
    store.leave_participant(study, participant_id, client=client)


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
    tab = store.tab
    if reason is None and tab is not None:
        live, since = live_tab(store, study, participant_id)
        if live is not None and live != tab:
            at = time.strftime("%H:%M", time.localtime(since)) if since else "another time"
            reason = f"this tab no longer steers: the session was opened in another tab or browser at {at}"
    if reason is not None:
        append(store, study, COMMAND_REFUSED, participant_id=participant_id, session_id=session_id,
               payload={"kind": kind, "target": session_id, "reason": reason, "command": payload or {},
                        "tab": tab})
        raise CommandRefused(f"command refused: {reason}")
    by = f"participant {participant_id}" + (f" · tab {tab}" if tab else "")
    return store.issue_command(session_id, kind, payload or {}, by=by, participant_id=participant_id)
