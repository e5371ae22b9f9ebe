"""The `befair` command line: one entry point for the console and every headless command.

One module per command group in this package (COMMAND_MODULES); each registers its
sub-commands (`register(subparsers)`) and its handlers return an exit code. Handlers parse and
print; the work itself is done by engine/ and baselines/ functions. Errors meant for the user
(BefairError and its kinds in engine.errors) print one clear line, `befair: <what is wrong>`,
never a traceback, and end with the error's exit code (see `main`).
"""
from __future__ import annotations

import argparse
import io
import json
import os
import sqlite3
import sys
from pathlib import Path

from engine.errors import (EXIT_BROKEN_PIPE, EXIT_DATA, EXIT_FAILED, EXIT_INTERRUPTED, EXIT_USAGE,
                           BefairError)


# befair_tui.cli.<name>, in the order `befair --help` lists their commands
COMMAND_MODULES = ["run", "sessions", "prompts", "imports", "data", "evaluate", "baselines", "study", "console",
                   "serve", "people", "datasette", "llm"]


def build_parser() -> argparse.ArgumentParser:
    import importlib

    parser = argparse.ArgumentParser(
        prog="befair",
        description="Steer ML-engineering agents under a fairness constraint. "
        "With no command, opens the console's setup screen.",
    )
    # `befair --db PATH` (no command) opens the setup screen on that database; a distinct dest so
    # a sub-command's own --db default cannot clobber it.
    parser.add_argument("--db", dest="console_db", type=Path, default=None,
                        help="session database for the console (default: $BEFAIR_DB or sessions/befair.db)")
    parser.add_argument("--version", action="version", version=f"befair {package_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"{__name__}.{name}").register(sub)
    return parser


_JSON_ERRORS = False   # set by main() for commands run with --json


def _say(message: str, exit_code: int = 1) -> None:
    """One line on stderr: `befair: <what is wrong>`; with --json, also a JSON object on stdout
    ({"error": ..., "exit_code": ...}) so a script reading stdout gets a parseable answer."""
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip()) or "error"
    print(f"befair: {text}", file=sys.stderr)
    if _JSON_ERRORS:
        try:
            print(json.dumps({"error": text, "exit_code": int(exit_code)}), flush=True)
        except (OSError, ValueError):
            pass


def package_version() -> str:
    try:
        from importlib.metadata import version

        return version("befair")
    except Exception:  # running from a source tree that was never installed
        return "unknown (not installed)"


def _quiet_stdout() -> None:
    """stdout's reader went away (`befair sessions | head`): point stdout at /dev/null so the
    interpreter's final flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def _dispatch(args: argparse.Namespace) -> int:
    if args.command is None:
        from befair_tui.cli.console import open_setup

        args.db = args.console_db
        return int(open_setup(args) or 0)
    if getattr(args, "db", None) is None and getattr(args, "console_db", None) is not None:
        args.db = args.console_db  # `befair --db PATH COMMAND ...`
    if args.command == "run" and not args.headless:
        from befair_tui.cli.console import open_console_from_args

        return int(open_console_from_args(args) or 0)
    return int(args.func(args) or 0)


def main(argv: list[str] | None = None) -> int:
    """Exit codes (engine.errors): 0 ok; 1 the work failed; 2 usage (argparse's, bad flag values,
    an unknown session); 3 bad input data (a malformed CSV, a missing or oversized image, a
    database that is not SQLite, corrupt, read-only or from a newer befair, an unreadable
    journal); 130 interrupted; 141 stdout closed early (quiet, as if killed by SIGPIPE)."""
    global _JSON_ERRORS
    parser = build_parser()
    args = parser.parse_args(argv)
    _JSON_ERRORS = bool(getattr(args, "json", False))
    try:
        code = _dispatch(args)
        sys.stdout.flush()  # a closed pipe shows here, not in the interpreter's exit
        return code
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_BROKEN_PIPE
    except BefairError as exc:
        code = int(getattr(exc, "exit_code", EXIT_USAGE))
        _say(str(exc), code)
        return code
    except KeyboardInterrupt:
        _say("interrupted", EXIT_INTERRUPTED)
        return EXIT_INTERRUPTED
    except sqlite3.DatabaseError as exc:  # met after the store opened it: name the database
        from engine.paths import db_from_args
        from engine.session.store import database_error

        where = db_from_args(args) if hasattr(args, "db") else "the session database"
        err = database_error(exc, where)
        _say(str(err), err.exit_code)
        return err.exit_code
    except OSError as exc:
        if exc.filename is None:
            raise
        code = EXIT_DATA if isinstance(exc, _INPUT_ERRORS) else EXIT_FAILED
        _say(f"{exc.filename}: {exc.strerror or exc}", code)
        return code


_INPUT_ERRORS = (FileNotFoundError, PermissionError, IsADirectoryError, NotADirectoryError)
