"""`befair import ...`: bring recorded agent runs into the session database (engine.imports).

    befair import aide PATH [--predictions FILE --metadata DDI.csv] [--json] [--db DB]
                                                   (alias: befair import-aide PATH)
    befair import mlzero PATH [--predictions FILE --metadata DDI.csv] [--json] [--db DB]
    befair import be-fair PATH --metadata DDI.csv [--table OUT.csv [--all-runs]] [--json] [--db DB]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.paths import add_db_arg, db_from_args
from engine.session import figure_text
from engine.session.runner_control import open_store

PREDICTIONS_HELP = "the run's published DDI predictions (DDI_file,predicted_probability), scored here"
METADATA_HELP = "DDI metadata CSV (DDI_file,skin_tone,malignant) the published predictions are scored against"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    group = subparsers.add_parser("import", help="import recorded agent runs (AIDE, MLZero, the be-fair study)")
    sub = group.add_subparsers(dest="import_source", metavar="SOURCE", required=True)
    _add_run(sub.add_parser("aide", help="import an AIDE run (log directory or journal.json) as a session"),
             cmd_import_aide)
    _add_run(subparsers.add_parser("import-aide", help="the same as `befair import aide`"), cmd_import_aide)
    _add_run(sub.add_parser("mlzero", help="import an MLZero run folder as a session"), cmd_import_mlzero)
    study = sub.add_parser(
        "be-fair", help="import the published be-fair artifact tree (every AIDE and MLZero run) as the study be-fair",
        description="Import a checkout of the be-fair repository: aide/logs/*, aide/failed_runs/*, mlzero/*, and "
        "each run's published DDI predictions under evaluation/, scored here. A run that cannot be read is named "
        "and skipped; runs already in the database are left as they are.")
    study.add_argument("path", type=Path, help="the artifact tree (a checkout of anna-richter/be-fair)")
    study.add_argument("--metadata", type=Path, required=True, help=METADATA_HELP)
    study.add_argument("--table", type=Path, default=None,
                       help="also write the study's aggregated table (mean/std/ci95 per agent x prompt) to this CSV")
    study.add_argument("--all-runs", action="store_true",
                       help="aggregate every scored run, also those the published table leaves out (MLZero run 48)")
    study.add_argument("--json", action="store_true", help="print the import report as JSON")
    add_db_arg(study)
    study.set_defaults(func=cmd_import_be_fair)


def _add_run(p: argparse.ArgumentParser, func: Any) -> None:
    p.add_argument("path", type=Path)
    p.add_argument("--predictions", type=Path, default=None, help=PREDICTIONS_HELP)
    p.add_argument("--metadata", type=Path, default=None, help=METADATA_HELP)
    p.add_argument("--json", action="store_true", help="print the new session as JSON")
    add_db_arg(p)
    p.set_defaults(func=func)


def _json_out(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def _report_run(store: Any, sid: str, started: float, as_json: bool) -> int:
    state = store.state(sid)
    published = next((n for n in state.nodes.values() if n.test is not None), None)
    tokens = state.tokens_in + state.tokens_out
    if as_json:
        _json_out({"session_id": sid, "n_nodes": len(state.nodes), "level": state.level, "tokens": tokens,
                   "published_node": published.node_id if published else None,
                   "published_test_auc": published.test.auc if published and published.test else None,
                   "published_test_auc_gap": published.test.auc_gap if published and published.test else None,
                   "seconds": round(time.perf_counter() - started, 3)})
        return 0
    drafts = sum(1 for n in state.nodes.values() if n.stage == "draft")
    buggy = sum(1 for n in state.nodes.values() if n.status != "ok")
    print(f"imported {len(state.nodes)} nodes ({drafts} drafts, {buggy} failed) as session {sid} "
          f"[{state.level}] in {time.perf_counter() - started:.2f} s; {tokens:,} tokens")
    if published is not None and published.test is not None:
        print(f"node {published.node_id}: test AUC {figure_text.fmt(published.test.auc, 4)}, gap "
              f"{figure_text.fmt(published.test.auc_gap, 4)} (published predictions, scored here)")
    return 0


def cmd_import_aide(args: argparse.Namespace) -> int:
    from engine.imports.aide import import_aide

    store = open_store(db_from_args(args), must_exist=False)
    started = time.perf_counter()
    sid = import_aide(store, args.path, predictions=args.predictions, metadata=args.metadata)
    return _report_run(store, sid, started, args.json)


def cmd_import_mlzero(args: argparse.Namespace) -> int:
    from engine.imports.mlzero import import_mlzero

    store = open_store(db_from_args(args), must_exist=False)
    started = time.perf_counter()
    sid = import_mlzero(store, args.path, predictions=args.predictions, metadata=args.metadata)
    return _report_run(store, sid, started, args.json)


def cmd_import_be_fair(args: argparse.Namespace) -> int:
    from engine.errors import WorkError
    from engine.imports.be_fair import import_be_fair, left_out, study_table
    from engine.progress import task_progress
    from engine.study.aggregate import write_csv

    store = open_store(db_from_args(args), must_exist=False)
    with task_progress("importing the be-fair runs", quiet=args.json) as progress:
        report = import_be_fair(store, args.path, metadata=args.metadata, progress=progress)
    notes: list[str] = []
    if args.table is not None:
        write_csv(study_table(store, as_published=not args.all_runs), args.table)
        notes = [] if args.all_runs else left_out(store)
    if args.json:
        _json_out({**report.to_dict(), "table_left_out": notes})
    else:
        print(f"imported {len(report.imported)} runs ({report.failed_runs} published as failed, {report.scored} "
              f"scored from their published predictions) into the study be-fair in {report.seconds:.1f} s; "
              f"{len(report.existing)} already there, {len(report.skipped)} skipped")
        for run, why in report.skipped:
            print(f"  skipped {run}: {why}")
        if args.table is not None:
            print(f"aggregated table written to {args.table}"
                  + (" (every scored run)" if args.all_runs else " (the runs of the published table)"))
        for note in notes:
            print(f"  left out of the table: {note}")
    if report.skipped and not report.imported and not report.existing:
        raise WorkError(f"no run of {args.path} could be imported")
    return 0
