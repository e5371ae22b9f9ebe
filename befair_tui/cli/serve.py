"""`befair serve`: the console in a browser, through textual-serve.

Three ways, each browser tab getting its own process on the same session database:

- `befair serve` (or `--researcher`): the whole console in every tab. It listens on this machine
  only (127.0.0.1): the console starts, steers, exports and deletes any session.
- `befair serve --study SPEC.toml|NAME`: a study with people. Every tab gets the participant's
  app (`befair participate`): their id and secret code (from their link, `?participant=ID&code=…`
  from `befair study links`, or a form), the study's
  instructions and consent, then their own sessions with steering only. The researcher's view (the
  live grid and the whole console, `befair study watch`) needs the token printed at start:
  `/?researcher=TOKEN`. Only this mode may listen beyond this machine (`--host 0.0.0.0`).
- `befair serve --study NAME --researcher`: the researcher's view in every tab, this machine only.

A page load gets a one-time ticket for its websocket (`/ws/<ticket>`): the server decides what the
tab runs when the page is asked for, from its URL, and the websocket can ask for nothing else.
"""
from __future__ import annotations

import argparse
import os
import secrets
import sys
from pathlib import Path
from typing import Any

from engine.errors import BefairError, UsageError
from engine.paths import add_db_arg, db_from_args

from befair_tui.cli.serve_web import (  # noqa: F401 - BefairServer and the commands: this module's API
    BefairServer, TabCommand, console_command, is_loopback, participant_command, researcher_command,
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve", help="the console in a browser (textual-serve); --study: a study's participants, each their own",
        description="Serve befair over HTTP, each browser tab its own process. Without --study: the whole console, "
        "on this machine only. With --study: the participant's view of that study in every tab (their own "
        "sessions, steering only), the researcher's view with the token printed at start.")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (default 127.0.0.1; another needs --study: participants only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--study", default=None, metavar="SPEC|NAME",
                   help="a study with people: its spec (TOML; recorded on first use) or the name of a recorded one")
    p.add_argument("--researcher", action="store_true",
                   help="the researcher's view in every tab (with --study: its live grid), on this machine only")
    p.add_argument("--dry-run", action="store_true",
                   help="with --study SPEC: the study with the offline coder (no API key), as NAME-dry-run")
    p.add_argument("--max-running", type=int, default=None, metavar="N",
                   help="with --study: at most N of the study's sessions running at once; later starts wait "
                   "(overrides [people] max_running)")
    add_db_arg(p)
    p.set_defaults(func=cmd_serve)



def _cap_running(args: argparse.Namespace) -> None:
    """--max-running reaches every tab's app through the environment (textual-serve copies it)."""
    if args.max_running is None:
        return
    if not args.study:
        raise UsageError("--max-running needs --study SPEC: it caps a study's sessions")
    if args.max_running < 1:
        raise UsageError(f"--max-running must be 1 or more, not {args.max_running}")
    from engine.study.people import MAX_RUNNING_ENV

    os.environ[MAX_RUNNING_ENV] = str(args.max_running)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from textual_serve.server import Server  # noqa: F401 - checked before anything else
    except ImportError:
        raise BefairError("befair serve needs textual-serve: pip install 'befair[serve]'") from None
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, not {args.port}")
    if args.dry_run and not args.study:
        raise UsageError("--dry-run needs --study SPEC")
    _cap_running(args)
    local = is_loopback(args.host)
    if not local and (args.researcher or not args.study):
        raise UsageError(f"--host {args.host}: the whole console (and a researcher's view) is served on this machine "
                         "only (127.0.0.1); beyond it, serve a study's participants: befair serve --study SPEC")
    db = db_from_args(args).resolve()
    study = _prepare_study(db, args) if args.study else None
    token = None if args.researcher or study is None else secrets.token_urlsafe(18)
    server = BefairServer(db, study=study, researcher_only=bool(args.researcher), token=token, host=args.host,
                          port=args.port)
    _announce(args, db, study, token, local)
    server.serve()
    print(f"befair: stopped ({server.stop_summary()})", file=sys.stderr, flush=True)
    if study is not None:
        print(f"befair: {_left_running(db, study)}", file=sys.stderr, flush=True)
    return 0


def _prepare_study(db: Path, args: argparse.Namespace) -> str:
    """Record the study of a spec file (or find a recorded one), check it can run, build its data;
    each participant has their link's code from here on."""
    from engine.progress import task_progress
    from engine.session.runner_control import open_store
    from engine.session.store import SessionStore
    from engine.study import grid, links, people
    from engine.study.pool import prepare_data
    from engine.study.spec import load_spec

    from_spec = Path(args.study).suffix == ".toml" or Path(args.study).is_file()
    store = SessionStore(db) if from_spec else open_store(db)  # a spec may start a new database
    try:
        if from_spec:
            spec = load_spec(args.study)
            if args.dry_run:
                spec = people.dry_run_spec(spec)
            people.people_of(spec)
            grid.ensure_study(store, spec, source=str(Path(args.study).resolve()))
        else:
            if args.dry_run:
                raise UsageError("--dry-run takes the study's spec file (--study SPEC.toml), not a name")
            spec = grid.stored_spec(store, args.study)
            people.people_of(spec)
        links.ensure_codes(store, spec)   # a study recorded before links had none
    finally:
        store.close()
    _check_coders(spec)
    with task_progress("study data", quiet=False) as progress:
        prepare_data(spec, progress=progress)
    return str(spec.name)


def _check_coders(spec: Any) -> None:
    """An LLM agent without a key or server would fail every participant's session: refuse now."""
    from engine.coders.llm.config import LlmConfig

    for coder in spec.coders:
        if coder.name != "openai":
            continue
        problem = LlmConfig.load({k: v for k, v in {"model": coder.model, **coder.llm}.items() if v}).problem()
        if problem:
            raise UsageError(f"study {spec.name}: its agent {coder.label} cannot reach a model ({problem}); "
                             "try the study first with --dry-run (the offline coder, no API key)")


def _announce(args: argparse.Namespace, db: Path, study: str | None, token: str | None, local: bool) -> None:
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if study is None:
        say(f"befair: serving the console on {url} (this machine only; database {db}); Ctrl+C stops")
    elif token is None:
        say(f"befair: serving the researcher's view of study {study} on {url} (this machine only; database {db}); "
            "Ctrl+C stops")
    else:
        say(f"befair: serving study {study} to its participants on {url} (database {db}); each participant opens "
            f"their own link: befair study links {study} --base-url {url} prints them")
        say(f"befair: the researcher's view (keep this link to yourself): {url}/?researcher={token}")
        if not local:
            say(f"befair: listening on {args.host}: a participant's view needs their link's code, the researcher's "
                "view the token; nothing is encrypted (use a trusted network, or a TLS proxy in front)")
        say("befair: Ctrl+C stops the server; participants' sessions keep running, their tabs reconnect when it is "
            "back")


def _left_running(db: Path, study: str) -> str:
    """The participants' sessions whose workers go on after the server stopped."""
    from engine.session.store import SessionStore
    from engine.study import grid

    store = SessionStore(db)
    try:
        rows = [r for r in grid.grid_rows(store, study) if r["state"] == grid.RUNNING]
    finally:
        store.close()
    if not rows:
        return "no participant session left running"
    shown = ", ".join(f"{r['participant_id']} ({r['level']}{', paused' if r['session_status'] == 'paused' else ''})"
                      for r in rows)
    return (f"left {len(rows)} participant session{'s' if len(rows) != 1 else ''} running: {shown}; they go on, "
            "and their tabs reconnect when the server is back")

