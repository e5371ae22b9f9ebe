"""`befair import ...`: bring recorded agent runs into the session database.

    befair import aide PATH [--json] [--db DB]     (alias: befair import-aide PATH)
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.paths import add_db_arg, db_from_args
from engine.session.lifecycle import open_store


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = subparsers.add_parser("import", help="import recorded agent runs (AIDE) as sessions")
    sub = group.add_subparsers(dest="import_source", metavar="SOURCE", required=True)
    _add_aide(sub.add_parser("aide", help="import an AIDE run (log directory or journal.json) as a session"))
    _add_aide(subparsers.add_parser("import-aide", help="the same as `befair import aide`"))


def _add_aide(p: argparse.ArgumentParser) -> None:
    p.add_argument("path", type=Path)
    p.add_argument("--json", action="store_true", help="print the new session as JSON")
    add_db_arg(p)
    p.set_defaults(func=cmd_import_aide)


def _json_out(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def cmd_import_aide(args: argparse.Namespace) -> int:
    from engine.session.aide_import import import_aide

    store = open_store(db_from_args(args), must_exist=False)
    started = time.perf_counter()
    sid = import_aide(store, args.path)
    state = store.state(sid)
    if args.json:
        _json_out({"session_id": sid, "n_nodes": len(state.nodes), "level": state.level})
        return 0
    drafts = sum(1 for n in state.nodes.values() if n.stage == "draft")
    buggy = sum(1 for n in state.nodes.values() if n.status != "ok")
    print(f"imported {len(state.nodes)} nodes ({drafts} drafts, {buggy} failed) as session {sid} "
          f"[{state.level}] in {time.perf_counter() - started:.2f} s")
    return 0


