"""Where things live by default."""
from __future__ import annotations

import argparse

import os
from pathlib import Path

DB_ENV = "BEFAIR_DB"
HOME_ENV = "BEFAIR_HOME"


def default_db() -> Path:
    """`--db` wins over $BEFAIR_DB, which wins over sessions/befair.db under the current folder."""
    return Path(os.environ.get(DB_ENV) or Path("sessions") / "befair.db")


def runs_dir(db_path: Path) -> Path:
    """Run directories (node workspaces) sit next to the database that records them."""
    return Path(db_path).resolve().parent / "runs"


def session_run_dir(runs_root: Path, session_id: str) -> Path:
    """A session's folder of node runs under `runs_root` (runs_dir of its database)."""
    return Path(runs_root) / session_id


def cache_dir() -> Path:
    """Generated data (SynthDerm, prepared workspaces, tensor caches): $BEFAIR_HOME, else the
    platform's user cache folder ($XDG_CACHE_HOME/befair, ~/.cache/befair on Linux)."""
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV])
    import platformdirs

    return Path(platformdirs.user_cache_dir("befair", appauthor=False))


def add_db_arg(parser: argparse._ActionsContainer) -> None:
    """Every command takes --db (default: $BEFAIR_DB or sessions/befair.db)."""
    parser.add_argument(
        "--db", type=Path, default=None,
        help=f"session database (default: ${DB_ENV} or sessions/befair.db)",
    )


def db_from_args(args: argparse.Namespace) -> Path:
    return Path(args.db) if getattr(args, "db", None) else default_db()
