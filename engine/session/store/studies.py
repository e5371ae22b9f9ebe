"""The store's study grids: the `studies` and `study_sessions` tables (004_study). What a cell's
status means is decided in engine.study.grid; this module only reads and writes the rows."""
from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import astuple, dataclass
from typing import Any

from engine.session.store.connection import StoreConnection

_GRID_SQL = """
    select g.*, s.status as session_status, s.heartbeat_at, s.pid, s.updated_at, s.steps, s.budget,
           s.n_nodes, s.best_auc, s.best_gap
    from study_sessions g left join sessions s on s.id = g.session_id
    where g.study = ?"""


@dataclass(frozen=True)
class GridCell:
    """One cell of a study's grid as first recorded (its status: queued)."""
    cell: int
    agent: str
    level: str
    instruction_level: str
    participant_id: str | None
    repeat_index: int
    seed: int
    status: str


@dataclass(frozen=True)
class NewStudy:
    name: str
    created_at: float
    spec: str          # the spec as JSON
    spec_sha256: str
    source: str | None
    cells: Sequence[GridCell]


class StudyRows(StoreConnection):
    """Reading and writing the study grid's rows."""

    def record_study(self, study: NewStudy) -> str | None:
        """Record a study and each cell of its grid not recorded yet, in one transaction, and
        return the spec digest recorded before (None when the study is new). A study recorded
        under that name with another digest is left as it is."""
        conn = self.db.conn
        with self.transaction():
            row = conn.execute("select spec_sha256 from studies where name = ?", [study.name]).fetchone()
            before = None if row is None else str(row[0])
            if before is not None and before != study.spec_sha256:
                return before
            if before is None:
                conn.execute("insert into studies (name, created_at, updated_at, spec, spec_sha256, source, n_cells) "
                             "values (?, ?, ?, ?, ?, ?, ?)",
                             [study.name, study.created_at, study.created_at, study.spec, study.spec_sha256,
                              study.source, len(study.cells)])
            for cell in study.cells:  # cells deleted with their session come back queued
                conn.execute(
                    "insert or ignore into study_sessions (study, cell, agent, level, instruction_level, "
                    "participant_id, repeat_index, seed, status) values (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [study.name, *astuple(cell)])
        return before

    def study_spec(self, name: str) -> dict[str, Any] | None:
        """The recorded spec of a study (parsed JSON), None when there is no such study."""
        row = self.db.conn.execute("select spec from studies where name = ?", [name]).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def study_names(self) -> list[str]:
        return [str(r[0]) for r in self.db.conn.execute("select name from studies order by created_at, name")]

    def study_row(self, name: str) -> dict[str, Any] | None:
        cursor = self.db.conn.execute("select * from studies where name = ?", [name])
        found = cursor.fetchone()
        return None if found is None else dict(zip([d[0] for d in cursor.description], found, strict=True))

    def grid_rows(self, name: str) -> list[dict[str, Any]]:
        """Every cell of the study with its session's summary columns (session_status, heartbeat_at,
        pid, updated_at, steps, budget, n_nodes, best_auc, best_gap), in cell order."""
        cursor = self.db.conn.execute(_GRID_SQL + " order by g.cell", [name])
        columns = [d[0] for d in cursor.description]
        return [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]

    def grid_cell(self, name: str, cell: int) -> dict[str, Any] | None:
        """One cell's grid row (as grid_rows), None when the study has no such cell."""
        cursor = self.db.conn.execute(_GRID_SQL + " and g.cell = ?", [name, cell])
        found = cursor.fetchone()
        return None if found is None else dict(zip([d[0] for d in cursor.description], found, strict=True))

    def mark_cell_claimed(self, name: str, cell: int, *, status: str, runner: str, at: float) -> None:
        """A study runner took the cell: a new attempt, its last outcome cleared."""
        with self.transaction():
            self.db.conn.execute(
                "update study_sessions set status = ?, runner = ?, claimed_at = ?, attempts = attempts + 1, "
                "exit_code = null, error = null, finished_at = null where study = ? and cell = ?",
                [status, runner, at, name, cell])

    def link_cell_session(self, name: str, cell: int, session_id: str, *, at: float) -> None:
        with self.transaction():
            self.db.conn.execute("update study_sessions set session_id = ?, started_at = coalesce(started_at, ?) "
                                 "where study = ? and cell = ?", [session_id, at, name, cell])

    def settle_cell(self, name: str, cell: int, *, status: str, exit_code: int | None, error: str | None,
                    at: float) -> None:
        """The cell's worker ended: its outcome, and the study's updated_at."""
        with self.transaction():
            self.db.conn.execute("update study_sessions set status = ?, exit_code = ?, error = ?, finished_at = ? "
                                 "where study = ? and cell = ?", [status, exit_code, error, at, name, cell])
            self.db.conn.execute("update studies set updated_at = ? where name = ?", [at, name])

    def study_of_session(self, session_id: str) -> str | None:
        """The study whose grid holds the session, None when none does."""
        found = self.db.conn.execute("select study from study_sessions where session_id = ?",
                                     [session_id]).fetchone()
        return None if found is None else str(found[0])
