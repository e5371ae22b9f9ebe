"""The `befair` command line: one entry point for the console and every headless command.

Each area registers its own sub-commands (`register(subparsers)`); a handler returns an exit
code. Errors meant for the user (BefairError) print one clear line, never a traceback.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from engine.errors import BefairError


def build_parser() -> argparse.ArgumentParser:
    from baselines import cli as baselines_cli
    from befair_tui import commands as tui_commands
    from befair_tui import serve as serve_cli
    from engine.agent import cli as agent_cli
    from engine.data import cli as data_cli
    from engine.evaluation import cli as evaluation_cli
    from engine.session import cli as session_cli

    parser = argparse.ArgumentParser(
        prog="befair",
        description="Steer ML-engineering agents under a fairness constraint. "
        "With no command, opens the console's setup screen.",
    )
    # `befair --db PATH` (no command) opens the setup screen on that database; a distinct dest so
    # a sub-command's own --db default cannot clobber it.
    parser.add_argument("--db", dest="console_db", type=Path, default=None,
                        help="session database for the console (default: $BEFAIR_DB or sessions/befair.db)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (agent_cli, session_cli, data_cli, evaluation_cli, baselines_cli, tui_commands, serve_cli):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        from befair_tui.commands import open_setup

        args.db = args.console_db
        return open_setup(args)
    if getattr(args, "db", None) is None and getattr(args, "console_db", None) is not None:
        args.db = args.console_db  # `befair --db PATH COMMAND ...`
    try:
        if args.command == "run" and not args.headless:
            from befair_tui.commands import open_console_from_args
            from engine.agent.cli import validate_run_args

            validate_run_args(args)
            return int(open_console_from_args(args) or 0)
        return int(args.func(args) or 0)
    except BefairError as exc:
        print(f"befair: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("befair: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
