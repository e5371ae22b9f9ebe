"""Studies with people: where a participant is in their study, and starting their next cell.

A participant's cells are the grid's cells with their id, in their counterbalanced order: the
levels in row i of a balanced Latin square (i: their place in the spec's `participants`), or as
listed (`[people] order`), repeats in blocks. Where they are is read from the database alone
(the study's event log and the sessions), so a closed tab, a second tab or a restarted
`befair serve` all find the same place:

    consent    the study's instructions and consent text, not agreed to yet
    profile    the participant fields, not given yet (asked once)
    ready      the next cell's session is not started: a page says what comes, Start starts it
    live       its session runs (or was interrupted: it is resumed) in the participant's console
    questions  its session ended (budget, time limit, a failure or a researcher's stop): the
               spec's questions, then the next cell
    done       every cell answered: the closing page

Each cell's session runs in a detached study worker (`python -m engine.study.worker --detached`)
that outlives the tab and the server; starting one that already runs is harmless (the worker
claims its cell first).

`[people] max_running` caps the study's sessions running at once. A start beyond it waits: the
cell stays live with no session, its participant reads `waiting_line`, and the tab's next
`ensure_runner` starts it once a place is free. Places go first come, first started: by each
cell's first `cell_started` event (the Start press), among the participants whose tab is open, so
the queue is the database's and holds across server restarts, and an absent participant holds no
one up (their cell takes its place again when they come back). `$BEFAIR_MAX_RUNNING` overrides
the spec's cap for the processes that see it (`befair serve --max-running N` sets it for its tabs).
"""
from __future__ import annotations

import hashlib
import os
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import UsageError
from engine.session.heartbeat import pid_alive
from engine.session import participants as log
from engine.session.store import SessionNotFound, SessionStore
from engine.study import grid
from engine.study.people_spec import PeopleSpec, balanced_latin_square
from engine.study.pool import log_dir, worker_command
from engine.study.spec import Cell, StudySpec, parse_spec

CONSENT, PROFILE, READY, LIVE, QUESTIONS, DONE = "consent", "profile", "ready", "live", "questions", "done"
OVER = ("finished", "failed")  # a study session over for good; "stopped" only when a person stopped it
DRY_RUN_SUFFIX = "-dry-run"
MAX_RUNNING_ENV = "BEFAIR_MAX_RUNNING"


class UnknownParticipant(UsageError):
    pass


@dataclass
class Position:
    """Where a participant is (see the module docstring)."""

    step: str
    cells: list[Cell]
    index: int                    # the current cell's place in `cells` (len(cells) when done)
    session: dict[str, Any] | None = None   # the current cell's session row, once it exists

    @property
    def cell(self) -> Cell | None:
        return self.cells[self.index] if self.index < len(self.cells) else None

    @property
    def number(self) -> int:
        """1-based: "session 2 of 4"."""
        return self.index + 1

    @property
    def total(self) -> int:
        return len(self.cells)


def people_of(spec: StudySpec) -> PeopleSpec:
    if spec.people is None:
        raise UsageError(f"study {spec.name} has no [people] table: its sessions are not steered by people "
                         "(see docs/study.md, \"Studies with people\")")
    return spec.people


def check_participant(spec: StudySpec, participant: str) -> str:
    people_of(spec)
    participant = (participant or "").strip()
    if participant not in spec.participants:
        raise UnknownParticipant(f"{participant!r} is not a participant of study {spec.name}; "
                                 "check the id you were given")
    return participant


def level_order(spec: StudySpec, participant: str) -> list[str]:
    """The participant's order of the levels (labels)."""
    labels = [lv.label for lv in spec.levels]
    if people_of(spec).order == "as-listed":
        return labels
    return balanced_latin_square(labels, spec.participants.index(participant))


def participant_cells(spec: StudySpec, participant: str) -> list[Cell]:
    """The participant's cells in their order: repeats in blocks, levels in their order, agents as listed."""
    participant = check_participant(spec, participant)
    rank = {label: i for i, label in enumerate(level_order(spec, participant))}
    coders = [c.label for c in spec.coders]
    cells = [c for c in spec.cells() if c.participant == participant]
    return sorted(cells, key=lambda c: (c.repeat, rank[c.level.label], coders.index(c.coder.label)))


def where(store: SessionStore, spec: StudySpec, participant: str) -> Position:
    """Where the participant is now (see the module docstring)."""
    cells = participant_cells(spec, participant)
    people = people_of(spec)
    events = log.events(store, spec.name, participant_id=participant)
    kinds = {e.kind for e in events}
    if log.CONSENT not in kinds:
        return Position(CONSENT, cells, 0)
    if people.fields and log.PROFILE not in kinds:
        return Position(PROFILE, cells, 0)
    answered = {e.cell for e in events if e.kind == log.ANSWERS}
    started = {e.cell for e in events if e.kind == log.CELL_STARTED}
    for i, cell in enumerate(cells):
        if cell.index in answered:
            continue
        try:
            row = store.session(cell.session_id)
        except SessionNotFound:
            return Position(LIVE if cell.index in started else READY, cells, i)
        if session_over(store, row):
            return Position(QUESTIONS, cells, i, row)
        return Position(LIVE, cells, i, row)
    return Position(DONE, cells, len(cells))


def session_over(store: SessionStore, row: dict[str, Any]) -> bool:
    """The session ended for good: finished (budget or time limit), failed, or stopped by a person.
    A session stopped by a signal (its worker killed) is not over: it is resumed."""
    status = row.get("status")
    if status in OVER:
        return True
    return status == "stopped" and store.state(str(row["id"])).stop_requested


# --------------------------------------------------------------------------- what a participant does


def consent(store: SessionStore, spec: StudySpec, participant: str) -> None:
    people = people_of(spec)
    log.append(store, spec.name, log.CONSENT, participant_id=check_participant(spec, participant),
               payload={"consent_sha256": _sha(people.consent), "instructions_sha256": _sha(people.instructions)})


def give_profile(store: SessionStore, spec: StudySpec, participant: str, values: dict[str, Any]) -> dict[str, Any]:
    """Record the participant's fields (ValueError naming a bad one; nothing is recorded then)."""
    profile = people_of(spec).check_profile(values)
    log.append(store, spec.name, log.PROFILE, participant_id=check_participant(spec, participant), payload=profile)
    return profile


def answer(store: SessionStore, spec: StudySpec, participant: str, cell: Cell, answers: dict[str, Any]) -> None:
    """Record the answers after a cell's session (ValueError naming a bad one; nothing recorded then)."""
    people = people_of(spec)
    checked = {q.id: q.check(answers.get(q.id)) for q in people.questions}
    row = store.session(cell.session_id)
    log.append(store, spec.name, log.ANSWERS, participant_id=check_participant(spec, participant),
               session_id=cell.session_id, cell=cell.index,
               payload={"answers": checked, "session_status": row.get("status")})
    if where(store, spec, participant).step == DONE:
        log.append(store, spec.name, log.COMPLETED, participant_id=participant)


def start_cell(store: SessionStore, spec: StudySpec, participant: str,
               position: Position) -> subprocess.Popen[bytes] | None:
    """Start (or resume) the participant's current cell: record it (the start request, whose place
    in the log is its place in the queue) and make sure a worker runs it unless it must wait.
    Returns the worker process started here (None when one already ran it, or it waits)."""
    cell = position.cell
    if cell is None or cell.participant != participant:
        raise UsageError("no cell to start")
    log.append(store, spec.name, log.CELL_STARTED, participant_id=participant, session_id=cell.session_id,
               cell=cell.index, payload={"position": position.number, "level": cell.level.label})
    return ensure_runner(store, spec, cell)


def ensure_runner(store: SessionStore, spec: StudySpec, cell: Cell) -> subprocess.Popen[bytes] | None:
    """A detached worker for the cell unless something already runs it, it ended, or it waits for
    a free place (`[people] max_running`: see waiting_line).

    Counting the places and claiming the cell for the new worker happen in one write transaction,
    so two tabs never both take the last free place; the claim, in the worker's name, counts as
    running until the worker's session runs (engine.study.worker accepts it as its own)."""
    with store.transaction():
        rows = grid.grid_rows(store, spec.name)
        row = next((r for r in rows if r["cell"] == cell.index), None)
        if row is None or not _waits(store, row):
            return None
        if not queue_place(store, spec, cell, rows).free:
            return None
        proc = spawn_worker(store.path, spec.name, cell.index)
        store.mark_cell_claimed(spec.name, cell.index, status=grid.RUNNING,
                                runner=f"{socket.gethostname()}:{proc.pid}", at=time.time())
    return proc


def max_running(spec: StudySpec) -> int | None:
    """The study's cap on sessions running at once: $BEFAIR_MAX_RUNNING, else `[people] max_running`."""
    raw = os.environ.get(MAX_RUNNING_ENV, "").strip()
    if not raw:
        return people_of(spec).max_running
    if not raw.isdigit() or int(raw) < 1:
        raise UsageError(f"${MAX_RUNNING_ENV} must be a whole number of 1 or more, not {raw!r}")
    return int(raw)


@dataclass(frozen=True)
class QueuePlace:
    """A cell's place under the study's cap on sessions running at once."""

    running: int            # the study's sessions running now (or their workers starting)
    limit: int | None       # `[people] max_running` (None: no limit)
    ahead: int              # start requests before this cell's, still waiting, their participant here

    @property
    def free(self) -> bool:
        return self.limit is None or self.running + self.ahead < self.limit


def queue_place(store: SessionStore, spec: StudySpec, cell: Cell,
                rows: list[dict[str, Any]] | None = None) -> QueuePlace:
    """Where the cell stands: the sessions running, and the waiting start requests before its own
    (first `cell_started` event per cell; only participants whose tab is open, and this cell)."""
    rows = grid.grid_rows(store, spec.name) if rows is None else rows
    running = sum(1 for r in rows if _running(r))
    limit = max_running(spec)
    if limit is None:
        return QueuePlace(running, None, 0)
    here = {p["participant_id"] for p in log.participants(store, spec.name) if p["online"]}
    owner = {c.index: c.participant for c in spec.cells()}
    by_cell = {r["cell"]: r for r in rows}
    requested: dict[int, int] = {}
    for event in log.events(store, spec.name, kinds=(log.CELL_STARTED,)):
        if event.cell is not None:
            requested.setdefault(event.cell, event.seq)
    mine = requested.get(cell.index, float("inf"))
    ahead = sum(1 for c, seq in requested.items()
                if c != cell.index and seq < mine and owner.get(c) in here and c in by_cell
                and _waits(store, by_cell[c]))
    return QueuePlace(running, limit, ahead)


def waiting_line(store: SessionStore, spec: StudySpec, cell: Cell | None) -> str | None:
    """What a participant whose session waits for a free place reads; None when it does not wait
    (no cap, a place is free, or the session runs or ended)."""
    if cell is None or max_running(spec) is None:
        return None
    rows = grid.grid_rows(store, spec.name)
    row = next((r for r in rows if r["cell"] == cell.index), None)
    if row is None or not _waits(store, row):
        return None
    place = queue_place(store, spec, cell, rows)
    if place.free:
        return None
    sessions = "1 session" if place.running == 1 else f"{place.running} sessions"
    ahead = ""
    if place.ahead:
        ahead = f", {place.ahead} {'participant' if place.ahead == 1 else 'participants'} ahead of you"
    return (f"waiting for a free place: {sessions} running (the study runs at most {place.limit} at once)"
            f"{ahead}; you start automatically")


def _waits(store: SessionStore, row: dict[str, Any]) -> bool:
    """Nothing runs the cell and its session has not ended: not started, or interrupted (a session
    stopped by a person is over: its participant answers the questions)."""
    if row["state"] not in grid.RUNNABLE or _claimed(row):
        return False
    sid = row.get("session_id")
    return not (row.get("session_status") == "stopped" and sid and store.state(str(sid)).stop_requested)


def _running(row: dict[str, Any]) -> bool:
    """A cell takes a place: its session's runner is alive, or a live worker claimed it."""
    return row["state"] == grid.RUNNING or _claimed(row)


def _claimed(row: dict[str, Any]) -> bool:
    """Claimed by a worker that is still alive (on another host: trusted, as engine.study.grid does)."""
    if row.get("status") != grid.RUNNING or not row.get("runner"):
        return False
    host, _, pid = str(row["runner"]).rpartition(":")
    return host != socket.gethostname() or pid_alive(pid) is True


def spawn_worker(db: Path, study: str, cell: int) -> subprocess.Popen[bytes]:
    """`python -m engine.study.worker --detached` in its own process session (a closed tab or a
    killed server does not end it); output to runs/studies/<study>/cell-NNN.log."""
    logs = log_dir(db, study)
    logs.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    with (logs / f"cell-{cell:03d}.log").open("ab") as out:
        return subprocess.Popen([*worker_command(db, study, cell), "--detached"], stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def steer(store: SessionStore, spec: StudySpec, participant: str, session_id: str, kind: str,
          payload: dict[str, Any] | None = None) -> int:
    """A participant's steering command, only for their own session (engine.session.participants)."""
    return log.issue_command(store, spec.name, participant, session_id, kind, payload)


def dry_run_spec(spec: StudySpec) -> StudySpec:
    """The study as a dry run: the offline coder (no API key), under the name `<name>-dry-run`, so
    nothing of the real study is touched."""
    raw = {k: v for k, v in spec.raw.items() if k not in ("coder", "coders")}
    raw["name"] = spec.name if spec.name.endswith(DRY_RUN_SUFFIX) else spec.name + DRY_RUN_SUFFIX
    raw["coder"] = {"name": "offline"}
    return parse_spec(raw, where=f"the dry run of study {spec.name}")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def live_grid(store: SessionStore, spec: StudySpec, *, now: float | None = None) -> list[dict[str, Any]]:
    """The researcher's grid: one row per participant's cell in their order, with its state, and
    `here` when the participant's tab is open on it now (engine.session.participants.touch)."""
    cells = {r["cell"]: r for r in grid.grid_rows(store, spec.name)}
    present = {p["participant_id"]: p for p in log.participants(store, spec.name, now=now)}
    answered = {e.cell for e in log.events(store, spec.name, kinds=(log.ANSWERS,))}
    out = []
    for participant in spec.participants:
        assert participant is not None  # a study with people lists its participants
        who = present.get(participant) or {}
        for position, cell in enumerate(participant_cells(spec, participant), start=1):
            row = cells.get(cell.index) or {}
            out.append({"participant": participant, "role": who.get("role"), "online": bool(who.get("online")),
                        "position": position, "cell": cell.index, "level": cell.level.label,
                        "state": row.get("state", grid.QUEUED), "session_id": row.get("session_id"),
                        "session_status": row.get("session_status"), "steps": row.get("steps"),
                        "budget": row.get("budget"), "best_auc": row.get("best_auc"), "best_gap": row.get("best_gap"),
                        "answered": cell.index in answered,
                        "here": bool(who.get("online")) and who.get("cell") == cell.index})
    return out
