"""The session store: an append-only event log in SQLite, a steering-command queue, and the
materialised nodes table.

One writer per session (the runner) appends events through a `SessionWriter`, which folds each
event into its in-memory state and, in the same transaction, upserts the node row it touched and
the session's summary row: so the nodes table always equals `fold(events)`, and a kill -9 loses
nothing that was committed. Any number of readers in other processes (console, Datasette,
`befair sessions`) read concurrently thanks to WAL. One connection per thread.
"""
from __future__ import annotations

import gc
import hashlib
import json
import os
import secrets
import sqlite3
import sys
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, cast
from array import array
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager

import orjson
import sqlite_utils

from engine.errors import BefairError, DatabaseError, UsageError, WorkError
from engine.session import events as ev
from engine.session import sealed
from engine.session.schema import check_schema, migrate
from engine.session import figures, selection
from engine.session.state import NodeState, SessionState, apply, fold


class SessionNotFound(UsageError):
    pass


def database_error(exc: BaseException, path: str | os.PathLike[str]) -> BefairError:
    """One clear error naming the database for an sqlite3 error met opening or reading it."""
    msg = str(exc).strip() or type(exc).__name__
    low = msg.lower()
    if "not a database" in low:
        return DatabaseError(f"{path} is not a befair session database (not an SQLite file, or its "
                             "header is damaged); give another --db")
    if "malformed" in low or "corrupt" in low:
        return DatabaseError(f"{path} is damaged ({msg}); restore it from a backup, or give another --db")
    if "readonly" in low or "read-only" in low:
        return DatabaseError(f"{path} is read-only ({msg}); befair writes to its session database: make "
                             "the file and its folder writable, or work on a copy")
    if "unable to open" in low:
        return DatabaseError(f"cannot open the session database {path} ({msg}); check that its folder "
                             "exists and is writable")
    if "locked" in low or "busy" in low:
        return WorkError(f"{path} is locked by another process ({msg}); try again")
    if "disk" in low and ("full" in low or "i/o" in low):
        return WorkError(f"cannot write {path} ({msg})")
    return DatabaseError(f"session database {path}: {msg}")


def payload_loads(text: str) -> Any:
    """An event's payload: orjson (several times faster, which is most of opening a long session),
    the standard library for what it refuses (NaN and Infinity, which json.dumps writes)."""
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return json.loads(text)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a session's events are decoded and folded: they make
    hundreds of thousands of small acyclic containers, and the collector's passes over them cost
    more than the decoding (a 1,000-node session loaded in 312 ms with it, 155 ms without)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def new_session_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


class SessionStore:
    def __init__(self, path: str | os.PathLike[str]):
        self.path = Path(path)
        if self.path.is_dir():
            raise DatabaseError(f"{self.path} is a folder, not a session database; give a file for --db")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise DatabaseError(f"cannot create the folder for the session database {self.path}: "
                                f"{exc.strerror or exc}") from None
        self._local = threading.local()
        self._check()
        try:
            migrate(self.db)
        except sqlite3.DatabaseError as exc:
            self.close()
            raise database_error(exc, self.path) from None

    def _check(self) -> None:
        """Refuse, before anything writes to it, a file that is not a session database this
        version may use (not SQLite, damaged, someone else's tables, a newer schema)."""
        try:
            if not self.path.exists() or self.path.stat().st_size == 0:
                return  # a new database
        except OSError as exc:
            raise DatabaseError(f"cannot read the session database {self.path}: {exc.strerror or exc}") from None
        # Read-only; without a -wal file beside it, also immutable, so that probing a file that is
        # not ours leaves no -wal/-shm files behind (with one, a writer may be live: read through it).
        wal = self.path.with_name(self.path.name + "-wal")
        mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
        try:
            conn = sqlite3.connect(f"{self.path.resolve().as_uri()}?{mode}", uri=True, timeout=30)
            try:
                check_schema(conn, self.path)
            finally:
                conn.close()
        except sqlite3.DatabaseError as exc:
            raise database_error(exc, self.path) from None

    # -- connections ----------------------------------------------------------------------
    @property
    def db(self) -> sqlite_utils.Database:
        db = getattr(self._local, "db", None)
        if db is None:
            conn = None
            try:
                conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")  # durable against process death in WAL mode
                conn.execute("PRAGMA foreign_keys=ON")
                conn.execute("PRAGMA busy_timeout=30000")
            except sqlite3.DatabaseError as exc:
                if conn is not None:
                    conn.close()
                raise database_error(exc, self.path) from None
            db = sqlite_utils.Database(conn)
            self._local.db = db
        return db

    def close(self) -> None:
        db = getattr(self._local, "db", None)
        if db is not None:
            db.conn.close()
            self._local.db = None

    def _write(self) -> _Transaction:
        return _Transaction(self.db)

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
        with self._write():
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
        loads, Event = payload_loads, ev.Event
        with gc_paused():
            return [Event(seq=seq, kind=kind, payload=loads(payload), ts=ts, session_id=session_id)
                    for seq, ts, kind, payload in self.db.conn.execute(sql, params)]

    def predictions(self, session_id: str, node_id: int, split: str, *,
                    unblind: bool = False) -> dict[str, float] | None:
        """A node's latest kept predictions on a split ({image file: probability}); a blinded test
        evaluation's only with `unblind` until revealed. None when none were kept."""
        row = self.db.execute(
            "select f.files, p.scores from predictions p join prediction_files f on f.session_id = p.session_id "
            "and f.files_sha256 = p.files_sha256 where p.session_id = ? and p.node_id = ? and p.split = ? "
            "order by p.seq desc limit 1", [session_id, int(node_id), split]).fetchone()
        if row is not None:
            scores = array("d")
            scores.frombytes(row[1])
            if sys.byteorder != "little":
                scores.byteswap()
            return dict(zip(json.loads(row[0]), scores.tolist(), strict=True))
        sealed_row = sealed.sealed_predictions(self, session_id, node_id, split) if unblind else None
        return {str(k): float(v) for k, v in json.loads(sealed_row[0]).items()} if sealed_row is not None else None

    def last_seq(self, session_id: str) -> int:
        row = self.db.execute("select max(seq) from events where session_id = ?", [session_id]).fetchone()
        return int(row[0] or 0)

    def state(self, session_id: str) -> SessionState:
        events = self.events(session_id)
        with gc_paused():
            return fold(events, session_id)

    def nodes(self, session_id: str) -> list[dict[str, Any]]:
        return list(self.db.query("select * from nodes where session_id = ? order by node_id", [session_id]))

    def writer(self, session_id: str) -> "SessionWriter":
        return SessionWriter(self, session_id)

    def create_session(
        self,
        config: dict[str, Any],
        *,
        instruction: str,
        coder: dict[str, Any],
        data: dict[str, Any],
        session_id: str | None = None,
        origin: str = "live",
        ts: float | None = None,
    ) -> "SessionWriter":
        """Create the session row and its session_started event; returns its writer.
        `ts`: the creation time (default now); imports and recorded fixtures pass their own."""
        session_id = session_id or new_session_id()
        now = time.time() if ts is None else float(ts)
        with self._write():
            self.db.table("sessions").insert(
                {
                    "id": session_id, "created_at": now, "updated_at": now, "status": "running",
                    "level": config.get("level"), "instruction": instruction,
                    "coder": coder.get("name"), "coder_label": coder.get("label"),
                    "simulated": int(bool(coder.get("simulated"))),
                    "participant_id": config.get("participant_id"), "study_id": config.get("study_id"),
                    "repeat_index": config.get("repeat_index"), "budget": config.get("steps"),
                    "steps": 0, "n_nodes": 0, "best_criterion": config.get("best"),
                    "tokens_in": 0, "tokens_out": 0, "cost": 0.0, "data": json.dumps(data),
                    "config": json.dumps(config), "pid": os.getpid(), "origin": origin,
                }
            )
        writer = SessionWriter(self, session_id)
        writer.emit(ev.SESSION_STARTED, {"config": config, "instruction": instruction, "coder": coder, "data": data},
                    ts=now)
        return writer

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
        with self._write():
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
        with self._write():
            table = self.db.table("baselines").insert(row, alter=True)
        return int(cast(int, table.last_pk))  # set by the insert just made

    def baselines(self) -> list[dict[str, Any]]:
        return list(self.db.query("select * from baselines order by variant, seed, id"))

    def upsert_reference_rows(self, rows: Iterable[dict[str, Any]]) -> None:
        with self._write():
            self.db.table("reference_rows").upsert_all(list(rows), pk="id")

    def reference_rows(self) -> list[dict[str, Any]]:
        return list(self.db.query("select * from reference_rows order by id"))


class _Transaction:
    """BEGIN IMMEDIATE ... COMMIT (ROLLBACK on error) on an autocommit connection. Inside a
    transaction already open on this thread's connection (a writer's batch: an event hook that
    issues a command) it joins that one, which commits or rolls back for both."""

    def __init__(self, db: sqlite_utils.Database):
        self.db = db
        self.joined = False

    def __enter__(self) -> sqlite_utils.Database:
        self.joined = self.db.conn.in_transaction
        if not self.joined:
            self.db.conn.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 _tb: TracebackType | None) -> Literal[False]:
        if not self.joined:
            self.db.conn.execute("ROLLBACK" if exc_type else "COMMIT")
        return False


def _ci(summary: dict[str, Any], figure: str) -> str | None:
    value = figures.interval(summary, figure)
    return json.dumps(value) if value is not None else None


def node_row(session_id: str, node: NodeState) -> dict[str, Any]:
    """The nodes table's projection of a node (what `fold` must reproduce exactly)."""
    val, test = node.validation or {}, node.test or {}
    return {
        "session_id": session_id, "node_id": node.node_id, "parent_id": node.parent_id,
        "step": node.step, "stage": node.stage, "status": node.status, "origin": node.origin,
        "plan": node.plan, "code": node.code, "exec_time": node.exec_time,
        "exit_code": node.exit_code, "exc_type": node.exc_type, "output_head": node.output_head,
        "output_tail": node.output_tail, "claimed_metric": node.claimed_metric,
        "val_auc": val.get("auc"), "val_gap": val.get("auc_gap"), "val_worst": val.get("worst_auc"),
        "test_auc": test.get("auc"), "test_gap": test.get("auc_gap"), "test_worst": test.get("worst_auc"),
        "val_auc_ci": _ci(val, "auc"), "val_gap_ci": _ci(val, "auc_gap"),
        "test_auc_ci": _ci(test, "auc"), "test_gap_ci": _ci(test, "auc_gap"),
        "val_verdict": node.eval_verdicts.get("validation"), "test_verdict": node.eval_verdicts.get("test"),
        "audit_flags": json.dumps(node.audit_flags, sort_keys=True),
        "claim_unsupported": int(bool((node.claim or {}).get("unsupported"))),
        "tokens_in": node.tokens_in, "tokens_out": node.tokens_out, "cost": round(node.cost, 10),
        "guidance_ids": json.dumps(node.guidance_ids), "pruned": int(node.pruned),
        "created_seq": node.created_seq,
    }


_UNSET: Any = object()


def session_summary(state: SessionState, best: int | None = _UNSET) -> dict[str, Any]:
    """The sessions table's summary columns. `best`: the ★ node's id when the caller already
    knows it (the writer caches it: finding it is O(nodes))."""
    if best is _UNSET:
        best = selection.choice(state)
    node = state.nodes.get(best) if best is not None else None
    return {
        "status": state.status, "updated_at": state.last_ts, "budget": state.budget,
        "steps": state.agent_steps, "n_nodes": len(state.nodes), "best_criterion": selection.current_criterion(state),
        "best_node": node.node_id if node else None,
        "best_auc": node.val_auc if node else None, "best_gap": node.val_gap if node else None,
        "best_auc_ci": _ci(node.validation or {}, "auc") if node else None,
        "best_gap_ci": _ci(node.validation or {}, "auc_gap") if node else None,
        "tokens_in": state.tokens_in, "tokens_out": state.tokens_out, "cost": round(state.cost, 10),
    }


_NODE_COLUMNS = tuple(node_row("", NodeState(node_id=0, parent_id=None, step=0, stage="draft")))
_UPSERT_NODE = (
    f"insert into nodes ({', '.join(_NODE_COLUMNS)}) values ({', '.join('?' * len(_NODE_COLUMNS))}) "
    "on conflict(session_id, node_id) do update set "
    + ", ".join(f"{c} = excluded.{c}" for c in _NODE_COLUMNS if c not in ("session_id", "node_id"))
)
_SUMMARY_COLUMNS = tuple(session_summary(SessionState()))
_UPDATE_SESSION = f"update sessions set {', '.join(c + ' = ?' for c in _SUMMARY_COLUMNS)} where id = ?"
_INSERT_EVENT = "insert into events (session_id, seq, ts, kind, payload) values (?, ?, ?, ?, ?)"
_INSERT_FILES = "insert or ignore into prediction_files (session_id, files_sha256, files) values (?, ?, ?)"
_INSERT_PREDICTIONS = ("insert or replace into predictions (session_id, seq, node_id, split, n, files_sha256, scores, "
                       "created_at) values (?, ?, ?, ?, ?, ?, ?, ?)")

# Events that change no node row and no session summary: skip the upserts for them.
_NO_ROW_CHANGE = {ev.OUTPUT, ev.POLICY_DECISION, ev.ERROR}


class SessionWriter:
    """Appends a session's events, keeping the state, nodes table and summary in step.

    `emit` commits each event on return. Inside `with writer.batch():` (or `emit_many`) events
    share one transaction: the node rows they touched and the session summary are written once,
    at the batch's end, and the whole batch is durable when the block exits (a crash inside it
    loses the batch, never part of it)."""

    def __init__(self, store: SessionStore, session_id: str):
        self.store = store
        self.session_id = session_id
        self.state = store.state(session_id)
        self._best: Any = _UNSET  # cached ★ node id (selection.choice)
        self._batch_depth = 0
        self._batch_owns = False
        self._dirty_nodes: set[int] = set()
        self._summary_dirty = False
        self._best_dirty = False

    def emit(
        self,
        kind: str,
        payload: dict[str, Any],
        *,
        ts: float | None = None,
        consumes: dict[str, Any] | None = None,
        result: str = "applied",
        predictions: Mapping[str, float] | None = None,
    ) -> ev.Event:
        """Append one event (durable on return, or at the end of the enclosing batch).
        `consumes`: the steering command this event carries out, marked consumed in the same
        transaction (so never applied twice). `predictions`: an `evaluated` event's per-image
        predictions, kept in the same transaction (sealed with a blinded test evaluation)."""
        if kind not in ev.KINDS:
            raise ValueError(f"unknown event kind {kind!r}")
        if predictions is not None and kind != ev.EVALUATED:
            raise ValueError("only an evaluated event keeps predictions")
        with self.batch():
            return self._append(kind, payload, ts, consumes, result, predictions)

    def emit_many(self, items: Iterable[tuple[str, dict[str, Any]]], *, ts: float | None = None) -> list[ev.Event]:
        """Append (kind, payload) events in one transaction; durable on return."""
        with self.batch():
            return [self.emit(kind, payload, ts=ts) for kind, payload in items]

    def batch(self) -> _Batch:
        """One transaction for every event emitted inside (nested batches join the outer one).
        Keep a batch short: it holds the database's write lock until it ends."""
        return _Batch(self)

    def _append(self, kind: str, payload: dict[str, Any], ts: float | None, consumes: dict[str, Any] | None,
                result: str, predictions: Mapping[str, float] | None = None) -> ev.Event:
        if predictions is not None:
            payload = {**payload, "predictions_kept": True}
        payload, kept_sealed = sealed.seal(self, kind, payload, predictions)  # blinded test figures: kept apart
        event = ev.Event(seq=self.state.last_seq + 1, kind=kind, payload=payload,
                         ts=time.time() if ts is None else ts, session_id=self.session_id)
        if predictions is not None and not kept_sealed:
            self._keep_predictions(event, predictions)
        # Plain SQL on the raw connection: sqlite-utils' insert/upsert introspect the table on
        # every call, which cost ~4x the ingest rate. The rows are the same.
        self.store.db.conn.execute(_INSERT_EVENT, (self.session_id, event.seq, event.ts, kind,
                                                   json.dumps(payload, sort_keys=True)))
        apply(self.state, event)
        if kind not in _NO_ROW_CHANGE:
            node_id = payload.get("node_id")
            if node_id is not None and node_id in self.state.nodes:
                self._dirty_nodes.add(node_id)
            self._best_dirty |= kind in selection.MAY_CHANGE_BEST or self._best is _UNSET
            self._summary_dirty = True
        if consumes is not None:
            self._mark_consumed(consumes, result, event.seq)
        return event

    def _keep_predictions(self, event: ev.Event, predictions: Mapping[str, float]) -> None:
        """The evaluation's predictions: its files' list once per session, the scores as float64."""
        files = sorted(predictions)
        listed = json.dumps(files)
        digest = hashlib.sha256(listed.encode()).hexdigest()
        conn = self.store.db.conn
        conn.execute(_INSERT_FILES, (self.session_id, digest, listed))
        scores = array("d", (float(predictions[f]) for f in files))
        if sys.byteorder != "little":
            scores.byteswap()
        conn.execute(_INSERT_PREDICTIONS, (self.session_id, event.seq, event.payload.get("node_id"),
                                           event.payload.get("split"), len(files), digest, scores.tobytes(), event.ts))

    def _write_rows(self) -> None:
        """The node rows and session summary folded from the batch's events."""
        conn = self.store.db.conn
        nodes = self.state.nodes
        conn.executemany(_UPSERT_NODE, [tuple(node_row(self.session_id, nodes[n]).values())
                                        for n in sorted(self._dirty_nodes) if n in nodes])
        if self._summary_dirty:
            if self._best_dirty:
                self._best = selection.choice(self.state)
            summary = session_summary(self.state, self._best)
            conn.execute(_UPDATE_SESSION, (*summary.values(), self.session_id))
        self._clear_dirty()

    def _clear_dirty(self) -> None:
        self._dirty_nodes.clear()
        self._summary_dirty = self._best_dirty = False

    def _rolled_back(self) -> None:
        """The batch's events were not written: forget them in memory too."""
        self._clear_dirty()
        self.state = self.store.state(self.session_id)
        self._best = _UNSET

    def consume_command(self, command: dict[str, Any], result: str) -> None:
        """Mark a command consumed without an event (e.g. rejected: unknown node)."""
        with self.batch():
            self._mark_consumed(command, result, None)

    def _mark_consumed(self, command: dict[str, Any], result: str, seq: int | None) -> None:
        self.store.db.conn.execute(
            "update commands set consumed_at = ?, consumed_seq = ?, result = ? where id = ?",
            (time.time(), seq, result, int(command["id"])),
        )


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
