"""The session database's connection: one per thread, WAL, checked and migrated on opening, and
the transaction every write of the store runs in."""
from __future__ import annotations

import gc
import json
import os
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

import orjson
import sqlite_utils

from engine.errors import BefairError, DatabaseError, UsageError, WorkError
from engine.session.schema import check_schema, migrate


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


class StoreConnection:
    """The path, the per-thread connection and the transaction; the store's parts build on it."""

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

    def transaction(self) -> Transaction:
        """BEGIN IMMEDIATE ... COMMIT on this thread's connection (joins one already open)."""
        return Transaction(self.db)


class Transaction:
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
