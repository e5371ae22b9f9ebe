"""A study's grid in the session database: the `studies` and `study_sessions` tables (004_study).

The study runner is the only writer of a cell's `status`; the truth about a cell's session is its
own row (status, heartbeat, pid). `cell_status` reconciles the two, so `befair study status`, the
Study screen and the next `befair study run` agree on what is queued, running, finished, failed
or interrupted, even after the study runner was killed.
"""
from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from engine.errors import UsageError
from engine.session.liveness import runner_status
from engine.session.store import SessionStore
from engine.study.spec import StudySpec, parse_spec

QUEUED, RUNNING, FINISHED, FAILED, INTERRUPTED = "queued", "running", "finished", "failed", "interrupted"
RUNNABLE = (QUEUED, INTERRUPTED)
EXIT_BUSY = 75  # a worker found its session alive in another process

_GRID_SQL = """
    select g.*, s.status as session_status, s.heartbeat_at, s.pid, s.updated_at, s.steps, s.budget,
           s.n_nodes, s.best_auc, s.best_gap
    from study_sessions g left join sessions s on s.id = g.session_id
    where g.study = ? order by g.cell"""


class StudyNotFound(UsageError):
    pass


def runner_id() -> str:
    """Who claims a cell: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


@contextmanager
def _transaction(store: SessionStore) -> Iterator[Any]:
    conn = store.db.conn
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


# --------------------------------------------------------------------------- the study


def ensure_study(store: SessionStore, spec: StudySpec, *, source: str | None = None) -> bool:
    """Record the study and every cell of its grid (status queued); True when it is new.

    Running the same spec again adds nothing; a different spec under a recorded name is refused
    (its sessions would no longer match their cells)."""
    now = time.time()
    cells = spec.cells()
    with _transaction(store) as conn:
        row = conn.execute("select spec_sha256 from studies where name = ?", [spec.name]).fetchone()
        if row is not None and row[0] != spec.digest:
            raise UsageError(f"study {spec.name!r} is recorded in {store.path} with another spec; "
                             "give the new one another name (or delete the old study's sessions first)")
        if row is None:
            conn.execute("insert into studies (name, created_at, updated_at, spec, spec_sha256, source, n_cells) "
                         "values (?, ?, ?, ?, ?, ?, ?)",
                         [spec.name, now, now, spec.to_json(), spec.digest, source, len(cells)])
        for cell in cells:  # cells deleted with their session come back queued
            conn.execute(
                "insert or ignore into study_sessions (study, cell, agent, level, instruction_level, participant_id, "
                "repeat_index, seed, status) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [spec.name, cell.index, cell.coder.label, cell.level.label, cell.level.level, cell.participant,
                 cell.repeat, cell.seed, QUEUED])
    return row is None


def stored_spec(store: SessionStore, name: str) -> StudySpec:
    row = store.db.conn.execute("select spec from studies where name = ?", [name]).fetchone()
    if row is None:
        known = ", ".join(study_names(store)) or "none"
        raise StudyNotFound(f"no study {name!r} in {store.path} (studies: {known})")
    return parse_spec(json.loads(row[0]), where=f"study {name} in {store.path}")


def study_names(store: SessionStore) -> list[str]:
    return [r[0] for r in store.db.conn.execute("select name from studies order by created_at, name")]


def study_row(store: SessionStore, name: str) -> dict[str, Any]:
    cursor = store.db.conn.execute("select * from studies where name = ?", [name])
    found = cursor.fetchone()
    if found is None:
        raise StudyNotFound(f"no study {name!r} in {store.path}")
    return dict(zip([d[0] for d in cursor.description], found, strict=True))


# --------------------------------------------------------------------------- cells


def grid_rows(store: SessionStore, name: str) -> list[dict[str, Any]]:
    """Every cell with its session's summary columns and its reconciled `state`."""
    cursor = store.db.conn.execute(_GRID_SQL, [name])
    columns = [d[0] for d in cursor.description]
    now = time.time()
    rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
    for row in rows:
        row["state"] = cell_status(row, now=now)
    return rows


def cell_status(row: dict[str, Any], *, now: float | None = None) -> str:
    """A cell's status from its grid row and its session's row (see the module docstring)."""
    session_status = row.get("session_status")
    if row.get("session_id") is None or session_status is None:
        if row.get("status") == RUNNING and _claim_alive(row.get("runner")):
            return RUNNING  # claimed, the session not created yet
        return QUEUED if row.get("status") in (QUEUED, RUNNING, INTERRUPTED) else str(row.get("status"))
    if session_status == "finished":
        return FINISHED
    if session_status == "failed":
        return FAILED
    if session_status == "stopped":
        return INTERRUPTED
    session_row = {"status": session_status, "heartbeat_at": row.get("heartbeat_at"), "pid": row.get("pid"),
                   "updated_at": row.get("updated_at")}
    if runner_status(session_row, now=now) != "alive" or _beat_before_settled(row):
        return INTERRUPTED
    return RUNNING


def _beat_before_settled(row: dict[str, Any]) -> bool:
    """The cell's worker ended (the driver settled it) and no runner has beaten since: a fresh
    heartbeat left by a worker killed a moment ago is not a live runner."""
    settled, beat = row.get("finished_at"), row.get("heartbeat_at")
    return row.get("status") != RUNNING and settled is not None and (beat is None or float(beat) <= float(settled))


def _claim_alive(runner: Any) -> bool:
    """A claim by a study runner on this host whose process is gone is void; one from another host
    is trusted (the session's heartbeat decides once the session exists)."""
    from engine.session.liveness import pid_alive

    host, _, pid = str(runner or "").rpartition(":")
    if host != socket.gethostname():
        return bool(runner)
    return pid_alive(pid) is True


def claim(store: SessionStore, name: str, cell: int, *, retry_failed: bool = False) -> bool:
    """Take a runnable cell for this process; False when it is not runnable (any more)."""
    with _transaction(store) as conn:
        cursor = conn.execute(_GRID_SQL.replace("order by g.cell", "and g.cell = ?"), [name, cell])
        found = cursor.fetchone()
        if found is None:
            return False
        row = dict(zip([d[0] for d in cursor.description], found, strict=True))
        state = cell_status(row)
        if state not in RUNNABLE and not (retry_failed and state == FAILED):
            return False
        conn.execute("update study_sessions set status = ?, runner = ?, claimed_at = ?, attempts = attempts + 1, "
                     "exit_code = null, error = null, finished_at = null where study = ? and cell = ?",
                     [RUNNING, runner_id(), time.time(), name, cell])
    return True


def link_session(store: SessionStore, name: str, cell: int, session_id: str) -> None:
    with _transaction(store) as conn:
        conn.execute("update study_sessions set session_id = ?, started_at = coalesce(started_at, ?) "
                     "where study = ? and cell = ?", [session_id, time.time(), name, cell])


def settle(store: SessionStore, name: str, cell: int, *, exit_code: int | None, error: str | None = None) -> str:
    """Record a cell's outcome once its worker ended: the status its session says."""
    with _transaction(store) as conn:
        cursor = conn.execute(_GRID_SQL.replace("order by g.cell", "and g.cell = ?"), [name, cell])
        row = dict(zip([d[0] for d in cursor.description], cursor.fetchone(), strict=True))
        row["status"] = INTERRUPTED if row.get("status") == RUNNING else row.get("status")
        row["finished_at"] = None if exit_code == EXIT_BUSY else time.time()
        state = cell_status(row)
        if state == RUNNING and exit_code != EXIT_BUSY:  # our worker is gone: its session is not running
            state = INTERRUPTED
        if state == QUEUED and exit_code not in (0, None):
            state = FAILED if error else QUEUED
        # finished_at: when the cell's worker ended, whatever its outcome (see _beat_before_settled)
        conn.execute("update study_sessions set status = ?, exit_code = ?, error = ?, finished_at = ? "
                     "where study = ? and cell = ?", [state, exit_code, error, time.time(), name, cell])
        conn.execute("update studies set updated_at = ? where name = ?", [time.time(), name])
    return state


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {s: 0 for s in (QUEUED, RUNNING, FINISHED, FAILED, INTERRUPTED)}
    for row in rows:
        out[row["state"]] = out.get(row["state"], 0) + 1
    return out
