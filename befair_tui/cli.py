"""The `befair` command line: one entry point for the console and every headless command.

Each area registers its own sub-commands (`register(subparsers)`); a handler returns an exit
code. Errors meant for the user (BefairError) print one clear line, never a traceback.
"""
from __future__ import annotations

import argparse
import sys

from engine.errors import BefairError


def build_parser() -> argparse.ArgumentParser:
    from baselines import cli as baselines_cli
    from befair_tui import commands as tui_commands
    from engine.agent import cli as agent_cli
    from engine.data import cli as data_cli
    from engine.evaluation import cli as evaluation_cli
    from engine.session import cli as session_cli

    parser = argparse.ArgumentParser(
        prog="befair",
        description="Steer ML-engineering agents under a fairness constraint. "
        "With no command, opens the console's setup screen.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in (agent_cli, session_cli, data_cli, evaluation_cli, baselines_cli, tui_commands):
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        from befair_tui.commands import open_setup

        return open_setup(args)
    try:
        return int(args.func(args) or 0)
    except BefairError as exc:
        print(f"befair: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("befair: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
