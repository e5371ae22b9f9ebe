"""The console's sub-commands: `befair` (setup), `befair open SESSION`, `befair replay SESSION`,
and `befair run` without --headless (start the session detached, then watch it)."""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from engine.paths import add_db_arg, db_from_args

if TYPE_CHECKING:  # textual loads with the console, so `befair data` and `befair baselines` run without it
    from textual.app import App


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("open", help="open a session in the console (live if it is running)")
    p.add_argument("session", help="session id, a unique prefix of it, or 'last'")
    add_db_arg(p)
    p.set_defaults(func=cmd_open)

    p = subparsers.add_parser("replay", help="replay a stored session in the console")
    p.add_argument("session", help="session id, a unique prefix of it, or 'last'")
    p.add_argument("--speed", choices=("1x", "10x", "100x", "max"), default="10x",
                   help="session seconds per wall-clock second (default 10x; max: as fast as possible)")
    p.add_argument("--play", action="store_true", help="start playing at once")
    add_db_arg(p)
    p.set_defaults(func=cmd_replay)


def _resolve(db: Path, ref: str) -> str:
    from engine.session.store import SessionStore

    store = SessionStore(db)
    try:
        return store.resolve(ref)
    finally:
        store.close()


def check_database(db: Path) -> None:
    """Refuse, before the console starts and writes anything beside it (its settings file), a
    file that is not a befair session database: the same one-line error as every command. A
    database that does not exist yet is left to be created by what needs it."""
    from engine.session.store import SessionStore

    if Path(db).exists():
        SessionStore(db).close()


def _run(app: App[None]) -> int:
    app.run()
    if app.return_code:
        return int(app.return_code)
    return 0


def cmd_open(args: argparse.Namespace) -> int:
    from befair_tui.app import create_app

    db = db_from_args(args)
    return _run(create_app(db, start="console", session_id=_resolve(db, args.session)))


def cmd_replay(args: argparse.Namespace) -> int:
    from befair_tui.app import create_app

    db = db_from_args(args)
    sid = _resolve(db, args.session)
    return _run(create_app(db, start="replay", session_id=sid, autoplay=args.play, replay_speed=args.speed))


def open_setup(args: argparse.Namespace) -> int:
    from befair_tui.app import create_app

    db = db_from_args(args)
    check_database(db)
    return _run(create_app(db))


def open_console_from_args(args: argparse.Namespace) -> int:
    """`befair run ...` without --headless: start the same run detached and headless (so closing
    the console can leave it running), then open the console on it. The child reads the
    validated settings from a run request file; the API key travels in its environment."""
    from engine.paths import runs_dir
    from engine.session.store import new_session_id

    from befair_tui import launch
    from befair_tui.app import create_app
    from befair_tui.cli.run import write_run_request

    db = db_from_args(args)
    check_database(db)
    session_id = getattr(args, "session_id", None) or new_session_id()
    request = runs_dir(db) / f"{session_id}.request.json"
    write_run_request(request, args)
    env = launch.key_env(getattr(args, "api_key", None))
    proc = launch.spawn(launch.request_argv(request, db, session_id), db, session_id, env=env)
    return _run(create_app(db, start="console", session_id=session_id, proc=proc, child_env=env))
