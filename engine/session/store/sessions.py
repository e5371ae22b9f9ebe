"""The store's sessions: their rows, event logs, node rows and steering commands, and the
baselines and reference rows beside them."""
from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator
from typing import Any, cast

from engine.errors import UsageError
from engine.session import event_types as et
from engine.session import events as ev
from engine.session.state import SessionState, fold
from engine.session.store.connection import SessionNotFound, StoreConnection, gc_paused, payload_loads


class SessionRows(StoreConnection):
    """Reading and writing the sessions' tables, apart from appending events (SessionWriter)."""

    # -- sessions -------------------------------------------------------------------------
    def sessions(self) -> list[dict[str, Any]]:
        return list(self.db.query("select * from sessions order by created_at desc"))

    def session(self, session_id: str) -> dict[str, Any]:
        rows = list(self.db.query("select * from sessions where id = ?", [session_id]))
        if not rows:
            raise SessionNotFound(f"no session {session_id!r} in {self.path}")
        return rows[0]

    def resolve(self, ref: str) -> str:
        """A full id, a unique prefix, or 'last' (the newest session)."""
        ref = (ref or "").strip()
        if not ref:
            raise SessionNotFound("no session given")
        if ref == "last":
            rows = list(self.db.query("select id from sessions order by created_at desc, id desc limit 1"))
        else:
            exact = list(self.db.query("select id from sessions where id = ?", [ref]))
            if exact:
                found: str = exact[0]["id"]
                return found
            # substr, not LIKE: '_' and '%' in a reference are not wildcards
            rows = list(self.db.query(
                "select id from sessions where substr(id, 1, ?) = ? order by id", [len(ref), ref]
            ))
        if not rows:
            raise SessionNotFound(f"no session matches {ref!r} in {self.path}")
        if len(rows) > 1:
            ids = ", ".join(r["id"] for r in rows[:5])
            more = "…" if len(rows) > 5 else ""
            raise UsageError(f"{ref!r} matches several sessions ({ids}{more}); give more of the id")
        only: str = rows[0]["id"]
        return only

    def delete_session(self, session_id: str) -> None:
        """Delete a session's row and every row that refers to it (events, nodes, commands and any
        table a later migration adds with a foreign key to sessions), in one transaction. The
        caller stops a live runner first (engine.session.cli.cmd_delete)."""
        self.session(session_id)
        conn = self.db.conn
        with self.transaction():
            for table, column in self._session_references():
                conn.execute(f'delete from "{table}" where "{column}" = ?', [session_id])
            conn.execute("delete from sessions where id = ?", [session_id])

    def _session_references(self) -> list[tuple[str, str]]:
        """(table, column) of every foreign key to sessions.id, a table before those it refers to
        (predictions before prediction_files), so that deleting in this order breaks no key."""
        refs: list[tuple[str, str]] = []
        targets: dict[str, set[str]] = {}
        for (table,) in self.db.conn.execute("select name from sqlite_master where type = 'table' "
                                             "and name not like 'sqlite_%' order by name"):
            for fk in self.db.conn.execute(f'pragma foreign_key_list("{table}")'):
                # (id, seq, table, from, to, on_update, on_delete, match)
                targets.setdefault(table, set()).add(fk[2])
                if fk[2] == "sessions" and table != "sessions":
                    refs.append((table, fk[3]))
        referring = {t for t, _ in refs}

        def depth(table: str, seen: frozenset[str] = frozenset()) -> int:
            """How many referring tables this one's rows depend on, down the chain."""
            below = [t for t in targets.get(table, ()) if t in referring and t != table and t not in seen]
            return 1 + max((depth(t, seen | {table}) for t in below), default=0)

        return sorted(refs, key=lambda r: -depth(r[0]))

    # -- events ---------------------------------------------------------------------------
    def events(self, session_id: str, after_seq: int = 0, limit: int | None = None) -> list[ev.Event]:
        sql = "select seq, ts, kind, payload from events where session_id = ? and seq > ? order by seq"
        params: list[Any] = [session_id, after_seq]
        if limit is not None:
            sql += " limit ?"
            params.append(limit)
        loads, Event, typed = payload_loads, ev.Event, et.parse_or_none
        with gc_paused():
            return [Event(seq, kind, body := loads(payload), ts, session_id, typed(kind, body))
                    for seq, ts, kind, payload in self.db.conn.execute(sql, params)]

    def last_seq(self, session_id: str) -> int:
        row = self.db.execute("select max(seq) from events where session_id = ?", [session_id]).fetchone()
        return int(row[0] or 0)

    def state(self, session_id: str) -> SessionState:
        events = self.events(session_id)
        with gc_paused():
            return fold(events, session_id)

    def nodes(self, session_id: str) -> list[dict[str, Any]]:
        return list(self.db.query("select * from nodes where session_id = ? order by node_id", [session_id]))

    # -- commands (the steering queue) ----------------------------------------------------
    def issue_command(self, session_id: str, kind: str, payload: dict[str, Any] | None = None, *,
                      by: str = "user", participant_id: str | None = None) -> int:
        """Queue a steering command. `participant_id`: the study participant issuing it (the
        runner refuses it for a session that is not theirs; engine.session.participants checks
        first and records a refusal in the study's log)."""
        if kind not in ev.COMMAND_KINDS:
            raise UsageError(f"unknown command {kind!r}; one of {', '.join(sorted(ev.COMMAND_KINDS))}")
        self.session(session_id)
        row: dict[str, Any] = {"session_id": session_id, "kind": kind, "payload": json.dumps(payload or {}),
                               "issued_by": by, "issued_at": time.time()}
        if participant_id is not None:
            row["participant_id"] = participant_id
        with self.transaction():
            table = self.db.table("commands").insert(row)
        return int(cast(int, table.last_pk))  # set by the insert just made

    def pending_commands(self, session_id: str) -> list[dict[str, Any]]:
        rows = self.db.query(
            "select * from commands where session_id = ? and consumed_at is null order by id", [session_id]
        )
        return [{**r, "payload": json.loads(r["payload"] or "{}")} for r in rows]

    def command(self, command_id: int) -> dict[str, Any]:
        rows = list(self.db.query("select * from commands where id = ?", [int(command_id)]))
        if not rows:
            raise UsageError(f"no command {command_id} in {self.path}")
        return {**rows[0], "payload": json.loads(rows[0]["payload"] or "{}")}

    def wait_command(self, command_id: int, timeout: float = 30.0, poll: float = 0.01) -> dict[str, Any] | None:
        """Poll until the command is consumed; returns its row, or None after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            row = self.command(command_id)
            if row["consumed_at"] is not None:
                return row
            if time.monotonic() >= deadline:
                return None
            time.sleep(poll)

    def commands(self, session_id: str) -> list[dict[str, Any]]:
        rows = self.db.query("select * from commands where session_id = ? order by id", [session_id])
        return [{**r, "payload": json.loads(r["payload"] or "{}")} for r in rows]

    # -- baselines and reference rows -----------------------------------------------------
    def add_baseline(self, row: dict[str, Any]) -> int:
        row = {k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in row.items()}
        row.setdefault("created_at", time.time())
        with self.transaction():
            table = self.db.table("baselines").insert(row, alter=True)
        return int(cast(int, table.last_pk))  # set by the insert just made

    def baselines(self) -> list[dict[str, Any]]:
        return list(self.db.query("select * from baselines order by variant, seed, id"))

    def upsert_reference_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        with self.transaction():
            self.db.table("reference_rows").upsert_all(list(rows), pk="id")

    def reference_rows(self) -> list[dict[str, Any]]:
        return list(self.db.query("select * from reference_rows order by id"))

    # -- what the CLI, the liveness check, the runner and the importers ask -------------------
    def node_status_counts(self) -> dict[str, dict[str, int]]:
        """{session id: {node status: how many nodes}} over every session."""
        counts: dict[str, dict[str, int]] = {}
        for session_id, status, n in self.db.conn.execute(
                "select session_id, status, count(*) from nodes group by session_id, status"):
            counts.setdefault(session_id, {})[status] = n
        return counts

    def pending_command_counts(self) -> dict[str, int]:
        """{session id: commands not yet consumed} for the sessions that have any."""
        return {session_id: n for session_id, n in self.db.conn.execute(
            "select session_id, count(*) from commands where consumed_at is null group by session_id")}

    def liveness_row(self, session_id: str) -> dict[str, Any]:
        """The columns engine.session.heartbeat decides from: status, heartbeat_at, pid, updated_at."""
        cursor = self.db.conn.execute(
            "select status, heartbeat_at, pid, updated_at from sessions where id = ?", [session_id])
        found = cursor.fetchone()
        if found is None:
            raise SessionNotFound(f"no session {session_id!r} in {self.path}")
        return dict(zip([d[0] for d in cursor.description], found, strict=True))

    def set_runner_pid(self, session_id: str, pid: int) -> None:
        """The process that runs the session now (a resume taking it over)."""
        with self.transaction():
            self.db.conn.execute("update sessions set pid = ? where id = ?", (pid, session_id))

    def session_exists(self, session_id: str) -> bool:
        return self.db.conn.execute("select 1 from sessions where id = ?", [session_id]).fetchone() is not None

    def imported_sessions(self, study_id: str) -> list[tuple[str, dict[str, Any]]]:
        """(id, config) of each session imported into a study, in the database's order."""
        rows = self.db.conn.execute("select id, config from sessions where study_id = ? and origin = 'import'",
                                    [study_id])
        return [(str(session_id), json.loads(config or "{}")) for session_id, config in rows]

    def has_imported_sessions(self, study_id: str) -> bool:
        return self.db.conn.execute("select 1 from sessions where study_id = ? and origin = 'import' limit 1",
                                    [study_id]).fetchone() is not None

    def evaluated_payloads(self, session_id: str) -> Iterator[dict[str, Any]]:
        """The session's `evaluated` payloads, the newest first (read lazily)."""
        for (payload,) in self.db.conn.execute(
                "select payload from events where session_id = ? and kind = 'evaluated' order by seq desc",
                [session_id]):
            yield json.loads(payload)
