"""Tables and migrations of the session database (sqlite-utils; WAL; foreign keys on).

Each migration runs once, in order, recorded in the `migrations` table. Add new ones at the
end; never edit one that has shipped.
"""
from __future__ import annotations

import os
import sqlite3
import time

import sqlite_utils

from engine.errors import DatabaseError, SchemaTooNew


def _m001_initial(db: sqlite_utils.Database) -> None:
    db.table("sessions").create(
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
    db.table("events").create(
        {"id": int, "session_id": str, "seq": int, "ts": float, "kind": str, "payload": str},
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "seq", "ts", "kind", "payload"},
    )
    db.table("events").create_index(["session_id", "seq"], unique=True)
    db.table("nodes").create(
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
    db.table("commands").create(
        {
            "id": int, "session_id": str, "kind": str, "payload": str, "issued_by": str,
            "issued_at": float, "consumed_at": float, "consumed_seq": int, "result": str,
        },
        pk="id",
        foreign_keys=[("session_id", "sessions", "id")],
        not_null={"session_id", "kind", "issued_at"},
    )
    db.table("commands").create_index(["session_id", "consumed_at"])
    db.table("baselines").create(
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
    db.table("reference_rows").create(
        {
            "id": str, "name": str, "agent": str, "level": str, "auc_mean": float,
            "auc_std": float, "gap_mean": float, "gap_std": float, "group_auc": str,
            "source": str,
        },
        pk="id",
    )


def _m002_heartbeat(db: sqlite_utils.Database) -> None:
    """sessions.heartbeat_at: written every second by a live runner (engine.session.heartbeat)."""
    if "heartbeat_at" not in db.table("sessions").columns_dict:
        db.table("sessions").add_column("heartbeat_at", float)


def _iso(column: str) -> str:
    return f"strftime('%Y-%m-%dT%H:%M:%fZ', {column}, 'unixepoch')"


_VIEWS = {
    "session_overview": f"""
        select id, {_iso('created_at')} as created, {_iso('updated_at')} as updated, status, level,
               coder_label as coder, simulated, participant_id, study_id, repeat_index,
               json_extract(config, '$.sandbox') as sandbox, steps, budget, n_nodes,
               best_criterion, best_node, best_auc as best_val_auc, best_gap as best_val_gap,
               tokens_in, tokens_out, cost, {_iso('heartbeat_at')} as last_heartbeat, origin
        from sessions""",
    "node_overview": """
        select session_id, node_id, parent_id, step, stage, status, origin, exec_time, exc_type,
               claimed_metric, val_auc, val_gap, val_worst,
               test_auc, test_gap, val_verdict, test_verdict, audit_flags, claim_unsupported, pruned,
               tokens_in, tokens_out, cost
        from nodes""",
    "event_log": f"""
        select session_id, seq, {_iso('ts')} as time, kind, payload from events""",
    "command_log": f"""
        select id, session_id, kind, payload, issued_by, {_iso('issued_at')} as issued,
               {_iso('consumed_at')} as consumed, result from commands""",
}


# node_overview since 007_predictions: each figure beside its 95 % interval
_NODE_OVERVIEW_007 = """
        select session_id, node_id, parent_id, step, stage, status, origin, exec_time, exc_type,
               claimed_metric, val_auc, val_auc_ci, val_gap, val_gap_ci, val_worst,
               test_auc, test_auc_ci, test_gap, test_gap_ci, val_verdict, test_verdict, audit_flags,
               claim_unsupported, pruned, tokens_in, tokens_out, cost
        from nodes"""


def _m003_readable(db: sqlite_utils.Database) -> None:
    """Datasette-ready: views with ISO timestamps and names that say what a number is, and a
    foreign key from a node's parent to its parent node."""
    for name in _VIEWS:
        db.execute(f"drop view if exists [{name}]")
    _parent_foreign_key(db)
    for name, sql in _VIEWS.items():
        db.execute(f"create view [{name}] as {sql}")


def _parent_foreign_key(db: sqlite_utils.Database) -> None:
    schema = db.table("nodes").schema
    if "parent_id]) REFERENCES" in schema or '"parent_id") REFERENCES' in schema:
        return
    fk = ',\n   FOREIGN KEY("session_id", "parent_id") REFERENCES "nodes"("session_id", "node_id")'
    head, _, body = schema.partition("(")  # CREATE TABLE "nodes" (  ... whatever quoting was used
    new = 'CREATE TABLE "nodes_new" (' + body
    new = new[: new.rstrip().rfind(")")] + fk + "\n)"
    db.execute(new)
    columns = ", ".join(f"[{c}]" for c in db.table("nodes").columns_dict)
    # a parent that was never recorded (an old import) is not a parent: keep the row, drop the link
    db.execute(f"insert into nodes_new ({columns}) select {columns} from nodes")
    db.execute("""update nodes_new set parent_id = null where parent_id is not null and not exists (
                    select 1 from nodes p
                    where p.session_id = nodes_new.session_id and p.node_id = nodes_new.parent_id)""")
    db.execute("drop table nodes")
    db.execute("alter table nodes_new rename to nodes")


STUDY_STATUSES = ("queued", "running", "finished", "failed", "interrupted")


def _m004_study(db: sqlite_utils.Database) -> None:
    """User studies (engine.study): a study's spec, and its grid of sessions, one row per cell.
    A cell's session_id is null until its session is created (foreign keys are checked at once);
    `status` is the study runner's last word, which `befair study status` reconciles with the
    session's own status and heartbeat."""
    statuses = ", ".join(f"'{s}'" for s in STUDY_STATUSES)
    db.execute("""create table if not exists studies (
        name text primary key, created_at float not null, updated_at float not null,
        spec text not null, spec_sha256 text not null, source text, n_cells integer not null)""")
    db.execute(f"""create table if not exists study_sessions (
        study text not null references studies(name), cell integer not null,
        session_id text references sessions(id), agent text not null, level text not null,
        instruction_level text not null, participant_id text, repeat_index integer not null,
        seed integer not null, status text not null default 'queued' check (status in ({statuses})),
        attempts integer not null default 0, runner text, claimed_at float, started_at float,
        finished_at float, exit_code integer, error text,
        primary key (study, cell))""")
    db.execute("create unique index if not exists study_sessions_session on study_sessions(session_id)")
    db.execute("create index if not exists study_sessions_status on study_sessions(study, status)")
    db.execute("drop view if exists study_overview")
    db.execute(f"""create view study_overview as
        select g.study, g.cell, g.agent, g.level, g.participant_id, g.repeat_index, g.seed,
               g.status as grid_status, s.status as session_status, g.session_id, g.attempts,
               s.steps, s.budget, s.best_auc as best_val_auc, s.best_gap as best_val_gap,
               {_iso('g.started_at')} as started, {_iso('g.finished_at')} as finished, g.error
        from study_sessions g left join sessions s on s.id = g.session_id""")


def _m006_sealed(db: sqlite_utils.Database) -> None:
    """Blinded test metrics, sealed (engine.session.sealed): a blinded test evaluation's figures
    are kept here, out of `events` and `nodes`, until the session ends (never, in a study).
    Sessions recorded before this migration whose blinded figures are not revealed yet (still
    running, or a study's) are sealed the same way."""
    db.execute("""create table if not exists sealed_metrics (
        session_id text not null references sessions(id), seq integer not null, node_id integer,
        split text not null, payload text not null, sealed_at float not null, revealed_seq integer,
        primary key (session_id, seq))""")
    unrevealed = """from events e join sessions s on s.id = e.session_id
        where e.kind = 'evaluated' and json_extract(e.payload, '$.split') = 'test'
          and json_extract(e.payload, '$.blinded') and not coalesce(json_extract(e.payload, '$.revealed'), 0)
          and not coalesce(json_extract(e.payload, '$.sealed'), 0)
          and (s.study_id is not null or s.status not in ('finished', 'stopped', 'failed'))"""
    db.execute(f"""insert or ignore into sealed_metrics (session_id, seq, node_id, split, payload, sealed_at)
        select e.session_id, e.seq, json_extract(e.payload, '$.node_id'), 'test',
               json_object('medfair', json(coalesce(json_extract(e.payload, '$.medfair'), 'null')),
                           'summary', json(coalesce(json_extract(e.payload, '$.summary'), 'null'))), e.ts
        {unrevealed}""")
    db.execute("""update events set payload = json_set(json_remove(payload, '$.summary', '$.medfair'),
                                                      '$.sealed', json('true'))
        where exists (select 1 from sealed_metrics m where m.session_id = events.session_id and m.seq = events.seq
                      and m.revealed_seq is null)""")
    db.execute("""update nodes set test_auc = null, test_gap = null, test_worst = null
        where exists (select 1 from sealed_metrics m where m.session_id = nodes.session_id
                      and m.node_id = nodes.node_id and m.revealed_seq is null)""")


def _m007_predictions(db: sqlite_utils.Database) -> None:
    """Each image's prediction of an evaluation (engine.measures.uncertainty recomputes intervals
    and paired comparisons from them), keyed by the `evaluated` event's seq: the probabilities as
    little-endian float64 (`scores`), in the order of a list of image files kept once per list
    (`prediction_files`, keyed by the list's SHA-256). Compact on purpose: rows beside the events
    slow down reading a long session's log. A blinded test evaluation's predictions stay in
    sealed_metrics with its figures until they are revealed."""
    db.execute("""create table if not exists prediction_files (
        session_id text not null references sessions(id), files_sha256 text not null, files text not null,
        primary key (session_id, files_sha256))""")
    db.execute("""create table if not exists predictions (
        session_id text not null references sessions(id), seq integer not null, node_id integer not null,
        split text not null, n integer not null, files_sha256 text not null, scores blob not null,
        created_at float not null, primary key (session_id, seq),
        foreign key (session_id, files_sha256) references prediction_files(session_id, files_sha256))""")
    db.execute("create index if not exists predictions_node on predictions(session_id, node_id, split)")
    for column in INTERVAL_COLUMNS:
        if column not in db.table("nodes").columns_dict:
            db.execute(f"alter table nodes add column {column} text")

    db.execute("drop view if exists node_overview")
    db.execute(f"create view node_overview as {_NODE_OVERVIEW_007}")


INTERVAL_COLUMNS = ("val_auc_ci", "val_gap_ci", "test_auc_ci", "test_gap_ci")  # JSON [lo, hi] or null


def _m008_participants(db: sqlite_utils.Database) -> None:
    """Studies with people (engine.study.people): the study's own append-only event log
    (`study_events`: consent, a participant's profile, the answers after each session, a refused
    command), one row per participant folded from it with where they are now (`study_participants`),
    and the participant who issued each steering command (`commands.participant_id`)."""
    db.execute("""create table if not exists study_events (
        study text not null references studies(name), seq integer not null, ts float not null,
        kind text not null, participant_id text, session_id text, cell integer, payload text not null,
        primary key (study, seq))""")
    db.execute("create index if not exists study_events_participant on study_events(study, participant_id, kind)")
    db.execute("""create table if not exists study_participants (
        study text not null references studies(name), participant_id text not null, joined_at float,
        consent_sha256 text, role text, years_dermatology float, years_ml float, notes text,
        profile_at float, cell integer, seen_at float, client text,
        primary key (study, participant_id))""")
    if "participant_id" not in db.table("commands").columns_dict:
        db.table("commands").add_column("participant_id", str)
    db.execute("drop view if exists command_log")
    db.execute(f"""create view command_log as
        select id, session_id, kind, payload, issued_by, participant_id, {_iso('issued_at')} as issued,
               {_iso('consumed_at')} as consumed, result from commands""")


def _m009_best_intervals(db: sqlite_utils.Database) -> None:
    """The sessions row's ★ node with its 95 % validation intervals (JSON [lo, hi] or null)."""
    for column in ("best_auc_ci", "best_gap_ci"):
        if column not in db.table("sessions").columns_dict:
            db.execute(f"alter table sessions add column {column} text")


def _m010_participant_links(db: sqlite_utils.Database) -> None:
    """Each participant's link secret (engine.study.links): the code their link carries, without
    which their id opens nothing. Made when a study with people is recorded (or first served)."""
    db.execute("""create table if not exists participant_links (
        study text not null references studies(name), participant_id text not null, code text not null,
        created_at float not null, primary key (study, participant_id))""")


MIGRATIONS = [("001_initial", _m001_initial), ("002_heartbeat", _m002_heartbeat), ("003_readable", _m003_readable),
              ("004_study", _m004_study), ("006_sealed", _m006_sealed), ("007_predictions", _m007_predictions),
              ("008_participants", _m008_participants), ("009_best_intervals", _m009_best_intervals),
              ("010_participant_links", _m010_participant_links)]


def migrate(db: sqlite_utils.Database) -> list[str]:
    """Apply pending migrations; returns the names applied."""
    applied: list[str] = []
    db.execute("BEGIN IMMEDIATE")  # one migrating process at a time
    try:
        if "migrations" not in db.table_names():
            db.table("migrations").create({"name": str, "applied_at": float}, pk="name")
        done = {row["name"] for row in db.table("migrations").rows}
        for name, step in MIGRATIONS:
            if name not in done:
                step(db)
                db.table("migrations").insert({"name": name, "applied_at": time.time()})
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
