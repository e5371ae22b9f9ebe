"""Tables and migrations of the session database (sqlite-utils; WAL; foreign keys on).

Each migration runs once, in order, recorded in the `migrations` table. Add new ones at the
end; never edit one that has shipped.
"""
from __future__ import annotations

import os
import sqlite3
import time

import sqlite_utils


def _m001_initial(db: sqlite_utils.Database) -> None:
    db["sessions"].create(
        {
            "id": str, "created_at": float, "updated_at": float, "status": str, "level": str,
            "instruction": str, "coder": str, "coder_label": str, "simulated": int,
            "participant_id": str, "study_id": str, "repeat_index": int, "budget": int,
            "steps": int, "n_nodes": int, "best_criterion": str, "best_node": int,
            "best_auc": float, "best_gap": float, "tokens_in": int, "tokens_out": int,
            "cost": float, "data": str, "config": str, "pid": int, "origin": str,
        },
        pk="id",
        not_null={"created_at", "status"},
    )
    db["events"].create(
        {"id": int, "session_id": str, "seq": int, "ts": float, "kind": str, "payload": str},
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "seq", "ts", "kind", "payload"},
    )
    db["events"].create_index(["session_id", "seq"], unique=True)
    db["nodes"].create(
        {
            "session_id": str, "node_id": int, "parent_id": int, "step": int, "stage": str,
            "status": str, "origin": str, "plan": str, "code": str, "exec_time": float,
            "exit_code": int, "exc_type": str, "output_head": str, "output_tail": str,
            "claimed_metric": float, "val_auc": float, "val_gap": float, "val_worst": float,
            "test_auc": float, "test_gap": float, "test_worst": float, "val_verdict": str,
            "test_verdict": str, "audit_flags": str, "claim_unsupported": int, "tokens_in": int,
            "tokens_out": int, "cost": float, "guidance_ids": str, "pruned": int,
            "created_seq": int,
        },
        pk=("session_id", "node_id"),
        foreign_keys=[("session_id", "sessions", "id")],
    )
    db["commands"].create(
        {
            "id": int, "session_id": str, "kind": str, "payload": str, "issued_by": str,
            "issued_at": float, "consumed_at": float, "consumed_seq": int, "result": str,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "kind", "issued_at"},
    )
    db["commands"].create_index(["session_id", "consumed_at"])
    db["baselines"].create(
        {
            "id": int, "created_at": float, "variant": str, "seed": int, "dataset": str,
            "device": str, "epochs": int, "selected_epoch": int, "weights": str,
            "val_auc": float, "val_gap": float, "val_worst": float, "test_auc": float,
            "test_gap": float, "test_worst": float, "val_metrics": str, "test_metrics": str,
            "epoch_metrics": str, "checkpoint": str, "wall_s": float, "images_per_s": float,
            "peak_rss_mb": float, "peak_gpu_mb": float, "notes": str,
        },
        pk="id",
        not_null={"created_at", "variant", "seed"},
    )
    db["reference_rows"].create(
        {
            "id": str, "name": str, "agent": str, "level": str, "auc_mean": float,
            "auc_std": float, "gap_mean": float, "gap_std": float, "group_auc": str,
            "source": str,
        },
        pk="id",
    )


def _m002_heartbeat(db: sqlite_utils.Database) -> None:
    """sessions.heartbeat_at: written every second by a live runner (engine.session.liveness)."""
    if "heartbeat_at" not in db["sessions"].columns_dict:
        db["sessions"].add_column("heartbeat_at", float)


MIGRATIONS = [("001_initial", _m001_initial), ("002_heartbeat", _m002_heartbeat)]


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations; returns the names applied."""
    applied: list[str] = []
    db.execute("BEGIN IMMEDIATE")  # one migrating process at a time
    try:
        if "migrations" not in db.table_names():
            db["migrations"].create({"name": str, "applied_at": float}, pk="name")
        done = {row["name"] for row in db["migrations"].rows}
        for name, step in MIGRATIONS:
            if name not in done:
                step(db)
                db["migrations"].insert({"name": name, "applied_at": time.time()})
                applied.append(name)
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return applied


# -- refusing databases this version cannot use (read-only: runs before `migrate`) --------------

def schema_version(name: str) -> int | None:
    """The number a migration's name starts with ("002_heartbeat" -> 2), or None."""
    head = name.split("_", 1)[0]
    return int(head) if head.isdigit() else None


def known_schema_version() -> int:
    """The newest schema this version of befair knows (its last migration's number)."""
    return max((schema_version(name) or 0 for name, _ in MIGRATIONS), default=0)


def check_schema(conn: sqlite3.Connection, path: str | os.PathLike[str]) -> None:
    """Raise DatabaseError when the database at `path` (open on `conn`, read-only is enough) is
    not one this version may migrate and use: an SQLite file holding someone else's tables, or a
    session database written by a newer befair (its `migrations` table names a migration this
    code does not know). An empty database passes (it becomes a new session database)."""
    from engine.errors import DatabaseError, SchemaTooNew

    tables = sorted(r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")
                    if not str(r[0]).startswith("sqlite_"))
    if not tables:
        return

    def foreign() -> DatabaseError:
        shown = ", ".join(tables[:6]) + (", …" if len(tables) > 6 else "")
        return DatabaseError(f"{path} is an SQLite database but not a befair session database "
                             f"(its tables: {shown}); give another --db")

    if "migrations" not in tables:
        raise foreign()
    try:
        names = {str(r[0]) for r in conn.execute("select name from migrations")}
    except sqlite3.OperationalError:  # a `migrations` table of another shape
        raise foreign() from None
    if not names:
        if tables == ["migrations"]:
            return
        raise foreign()
    known = {name for name, _ in MIGRATIONS}
    if MIGRATIONS[0][0] not in names:
        raise foreign()
    unknown = sorted(names - known)
    if not unknown:
        missing = [t for t in ("sessions", "events", "nodes", "commands") if t not in tables]
        if missing:
            raise DatabaseError(f"{path} is damaged or not a befair session database: table(s) "
                                f"{', '.join(missing)} missing; give another --db")
        return
    ours = known_schema_version()
    theirs = max((schema_version(n) or 0 for n in names), default=0)
    if theirs > ours:
        raise SchemaTooNew(f"{path} was written by a newer befair (schema {theirs}; this version knows up "
                           f"to {ours}); open it with that version, or give another --db")
    raise SchemaTooNew(f"{path} has schema migration(s) this version of befair does not know "
                       f"({', '.join(unknown[:5])}; it knows up to schema {ours}); open it with the befair "
                       "that wrote it, or give another --db")
