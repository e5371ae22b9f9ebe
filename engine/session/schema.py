"""Tables and migrations of the session database (sqlite-utils; WAL; foreign keys on).

Each migration runs once, in order, recorded in the `migrations` table. Add new ones at the
end; never edit one that has shipped.
"""
from __future__ import annotations

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
