"""A study's grid in the session database: the `studies` and `study_sessions` tables (004_study).

The study runner is the only writer of a cell's `status`; the truth about a cell's session is its
own row (status, heartbeat, pid). `cell_status` reconciles the two, so `befair study status`, the
Study screen and the next `befair study run` agree on what is queued, running, finished, failed
or interrupted, even after the study runner was killed.
"""
from __future__ import annotations

import os
import socket
import time
from typing import Any

from engine.errors import UsageError
from engine.session.heartbeat import pid_alive, runner_status
from engine.session.store import SessionStore
from engine.session.store.studies import GridCell, NewStudy
from engine.study.links import ensure_codes
from engine.study.spec import StudySpec, parse_spec

QUEUED, RUNNING, FINISHED, FAILED, INTERRUPTED = "queued", "running", "finished", "failed", "interrupted"
RUNNABLE = (QUEUED, INTERRUPTED)
EXIT_BUSY = 75  # a worker found its session alive in another process


class StudyNotFound(UsageError):
    pass


def runner_id() -> str:
    """Who claims a cell: this host and process."""
    return f"{socket.gethostname()}:{os.getpid()}"


# --------------------------------------------------------------------------- the study


def ensure_study(store: SessionStore, spec: StudySpec, *, source: str | None = None) -> bool:
    """Record the study and every cell of its grid (status queued); True when it is new.

    Running the same spec again adds nothing; a different spec under a recorded name is refused
    (its sessions would no longer match their cells)."""
    cells = [GridCell(cell.index, cell.coder.label, cell.level.label, cell.level.level, cell.participant,
                      cell.repeat, cell.seed, QUEUED) for cell in spec.cells()]
    before = store.record_study(NewStudy(spec.name, time.time(), spec.to_json(), spec.digest, source, cells))
    if before is not None and before != spec.digest:
        raise UsageError(f"study {spec.name!r} is recorded in {store.path} with another spec; "
                         "give the new one another name (or delete the old study's sessions first)")
    ensure_codes(store, spec)  # a study with people: each participant's link secret
    return before is None


def stored_spec(store: SessionStore, name: str) -> StudySpec:
    recorded = store.study_spec(name)
    if recorded is None:
        known = ", ".join(study_names(store)) or "none"
        raise StudyNotFound(f"no study {name!r} in {store.path} (studies: {known})")
    return parse_spec(recorded, where=f"study {name} in {store.path}")


def study_names(store: SessionStore) -> list[str]:
    return store.study_names()


def study_row(store: SessionStore, name: str) -> dict[str, Any]:
    found = store.study_row(name)
    if found is None:
        raise StudyNotFound(f"no study {name!r} in {store.path}")
    return found


# --------------------------------------------------------------------------- cells


def grid_rows(store: SessionStore, name: str) -> list[dict[str, Any]]:
    """Every cell with its session's summary columns and its reconciled `state`."""
    now = time.time()
    rows = store.grid_rows(name)
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
    host, _, pid = str(runner or "").rpartition(":")
    if host != socket.gethostname():
        return bool(runner)
    return pid_alive(pid) is True


def claim(store: SessionStore, name: str, cell: int, *, retry_failed: bool = False) -> bool:
    """Take a runnable cell for this process; False when it is not runnable (any more)."""
    with store.transaction():
        row = store.grid_cell(name, cell)
        if row is None:
            return False
        state = cell_status(row)
        if state not in RUNNABLE and not (retry_failed and state == FAILED):
            return False
        store.mark_cell_claimed(name, cell, status=RUNNING, runner=runner_id(), at=time.time())
    return True


def link_session(store: SessionStore, name: str, cell: int, session_id: str) -> None:
    store.link_cell_session(name, cell, session_id, at=time.time())


def settle(store: SessionStore, name: str, cell: int, *, exit_code: int | None, error: str | None = None) -> str:
    """Record a cell's outcome once its worker ended: the status its session says."""
    with store.transaction():
        row = store.grid_cell(name, cell)
        if row is None:
            raise StudyNotFound(f"no cell {cell} in study {name!r} in {store.path}")
        row["status"] = INTERRUPTED if row.get("status") == RUNNING else row.get("status")
        row["finished_at"] = None if exit_code == EXIT_BUSY else time.time()
        state = cell_status(row)
        if state == RUNNING and exit_code != EXIT_BUSY:  # our worker is gone: its session is not running
            state = INTERRUPTED
        if state == QUEUED and exit_code not in (0, None):
            state = FAILED if error else QUEUED
        # finished_at: when the cell's worker ended, whatever its outcome (see _beat_before_settled)
        store.settle_cell(name, cell, status=state, exit_code=exit_code, error=error, at=time.time())
    return state


def counts(rows: list[dict[str, Any]]) -> dict[str, int]:
    out = {s: 0 for s in (QUEUED, RUNNING, FINISHED, FAILED, INTERRUPTED)}
    for row in rows:
        out[row["state"]] = out.get(row["state"], 0) + 1
    return out
