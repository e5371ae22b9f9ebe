"""`befair study run | status | report`: user studies, a grid of sessions from a TOML spec
(engine.study; docs/study.md). This module parses and prints; the engine runs and aggregates."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from engine.agent.session_config import BEST_CRITERIA
from engine.errors import UsageError, WorkError
from engine.paths import add_db_arg, db_from_args
from engine.session import views
from engine.session.runner_control import open_store
from engine.study import grid
from engine.study.aggregate import AUC_GAP, OVERALL_AUC, write_csv

from befair_tui.cli import study_links, study_plan
from befair_tui.cli.study_references import study_references


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("study", help="user studies: run a grid of sessions, follow it, aggregate it",
                              description="A study spec (TOML) names levels, repeats, seeds, coders and data; "
                              "`study run` creates its grid of sessions and runs it (resumable), `study status` "
                              "shows it, `study report` aggregates it (mean, std, 95 % interval) and draws Figure 2.")
    sub = p.add_subparsers(dest="study_command", metavar="ACTION", required=True)

    r = sub.add_parser("run", help="create a study's sessions (queued) and run those not finished")
    r.add_argument("spec", type=Path, help="the study spec (TOML; see docs/study.md)")
    r.add_argument("--executor", choices=("local", "ray"), default="local",
                   help="local: worker processes on this machine (default); ray: one Ray task per session")
    r.add_argument("--ray-address", default=None, metavar="ADDR",
                   help="an existing Ray cluster (auto, ray://host:10001); default: start a local one")
    r.add_argument("--workers", type=int, default=1, help="sessions at a time (default 1)")
    r.add_argument("--participant", default=None, help="run only this participant's sessions")
    r.add_argument("--retry-failed", action="store_true", help="run failed sessions' cells again")
    r.add_argument("--dry-run", action="store_true",
                   help="run the study with the offline coder (no API key) as the study NAME-dry-run, headless "
                        "(a study with people: every participant's cells unsteered)")
    r.add_argument("--quiet", action="store_true", help="print nothing but errors and the final line")
    add_db_arg(r)
    r.set_defaults(func=cmd_run)

    s = sub.add_parser("status", help="a study's grid: each session's state, and the aggregate so far")
    s.add_argument("name", nargs="?", help="the study's name (default: list the studies)")
    s.add_argument("--json", action="store_true", help="machine-readable output")
    add_db_arg(s)
    s.set_defaults(func=cmd_status)

    w = sub.add_parser("watch", help="a study with people, live: who is on which cell; the whole console from there",
                       description="The researcher's view of a study with people ([people] in its spec): every "
                       "participant's cells in their order, each one's state and who is on which cell now; Enter "
                       "opens a session in the console (steer it), s the Study screen, l the sessions screen. "
                       "`befair serve --study` gives a browser tab this view with its researcher token.")
    w.add_argument("name", help="the study's name")
    add_db_arg(w)
    w.set_defaults(func=cmd_watch)

    t = sub.add_parser("report", help="aggregate a study per agent × level; write its table and Figure 2")
    t.add_argument("name", help="the study's name")
    t.add_argument("--json", action="store_true", help="the whole report as JSON on stdout")
    t.add_argument("--csv", type=Path, default=None, metavar="FILE", help="the long table as CSV (the study's shape)")
    t.add_argument("--figure", type=Path, default=None, metavar="FILE", help="Figure 2 as .png, .svg or .pdf")
    t.add_argument("--criterion", choices=BEST_CRITERIA, default=None,
                   help="which final choice each session contributes (default: the spec's best)")
    t.add_argument("--unblind", action="store_true",
                   help="a blind study (blind_test = true): read its sealed test metrics (researchers only)")
    t.add_argument("--all-runs", action="store_true",
                   help="an imported study (befair import be-fair): aggregate every scored run, also those the "
                        "published table left out")
    t.add_argument("--sessions-csv", type=Path, default=None, metavar="FILE",
                   help="a study with people: one row per session (who, role, outcome, steering, answers)")
    t.add_argument("--published-agents", action="store_true",
                   help="also draw the published agents' rows at the study's levels (AIDE, MLZero)")
    add_db_arg(t)
    t.set_defaults(func=cmd_report)

    study_links.register(sub)
    study_plan.register(sub)


# --------------------------------------------------------------------------- run


def cmd_run(args: argparse.Namespace) -> int:
    from engine.progress import task_progress
    from engine.session.store import SessionStore
    from engine.study.pool import LocalPool, default_env, prepare_data, run_study
    from engine.study.spec import load_spec

    if args.workers < 1:
        raise UsageError(f"--workers must be at least 1 (got {args.workers})")
    if args.ray_address and args.executor != "ray":
        raise UsageError("--ray-address needs --executor ray")
    spec = load_spec(args.spec)
    if args.dry_run:
        from engine.study.people import dry_run_spec

        spec = dry_run_spec(spec)
    elif spec.people is not None:
        raise UsageError(f"study {spec.name} is steered by people ([people] in its spec): serve it with "
                         f"`befair serve --study {args.spec}`; `befair study run {args.spec} --dry-run` runs its "
                         "sessions headless with the offline coder")
    store = SessionStore(db_from_args(args))
    new = grid.ensure_study(store, spec, source=str(Path(args.spec).resolve()))
    total = len(spec.cells())
    if not args.quiet:
        print(f"study {spec.name}: {total} sessions ({'new' if new else 'resuming'}) in {store.path}", file=sys.stderr)
    with task_progress("study data", quiet=args.quiet) as progress:
        prepare_data(spec, progress=progress)
    executor: Any
    if args.executor == "ray":
        from engine.study.ray_pool import RayPool

        executor = RayPool(store.path, spec.name, resources=spec.resources, address=args.ray_address,
                           num_cpus=args.workers)
    else:
        executor = LocalPool(store.path, spec.name, env=default_env())
    display = StudyDisplay(spec.name, total, quiet=args.quiet)
    try:
        with display:
            outcome = run_study(store, spec, executor, workers=args.workers, on_tick=display.update,
                                retry_failed=args.retry_failed, participant=args.participant)
    except KeyboardInterrupt:
        print(f"study {spec.name}: interrupted; run the same command again to resume", file=sys.stderr)
        raise
    c = outcome.counts
    print(f"study {spec.name}: {c['finished']}/{total} finished, {c['failed']} failed, "
          f"{c['interrupted']} interrupted, {c['queued']} queued, {c['running']} running elsewhere "
          f"({outcome.wall_s:.0f} s, {len(outcome.ran)} run now)")
    if c["failed"] or c["interrupted"]:
        raise WorkError(f"study {spec.name} did not finish: befair study status {spec.name} --db {store.path}")
    return 0


class StudyDisplay:
    """Headless progress: one bar for the grid and one line per running session (level, repeat,
    step, best so far) on a terminal; a line whenever the counts change otherwise."""

    def __init__(self, name: str, total: int, *, quiet: bool = False, stream: Any = None):
        self.name, self.total, self.quiet = name, total, quiet
        self.stream = stream or sys.stderr
        self.live: Any = None
        self.last = ""
        self.started = time.monotonic()

    def __enter__(self) -> "StudyDisplay":
        if not self.quiet and getattr(self.stream, "isatty", lambda: False)():
            from rich.console import Console
            from rich.live import Live

            self.live = Live(console=Console(file=self.stream), refresh_per_second=2, transient=False)
            self.live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, rows: list[dict[str, Any]]) -> None:
        if self.quiet:
            return
        counts = grid.counts(rows)
        if self.live is not None:
            self.live.update(self._renderable(rows, counts))
            return
        line = (f"study {self.name}: {counts['finished']}/{self.total} finished, {counts['running']} running, "
                f"{counts['failed']} failed, {counts['interrupted']} interrupted "
                f"({time.monotonic() - self.started:.0f} s)")
        if line.split(" (")[0] != self.last.split(" (")[0]:
            print(line, file=self.stream, flush=True)
        self.last = line

    def _renderable(self, rows: list[dict[str, Any]], counts: dict[str, int]) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        done = counts["finished"] + counts["failed"]
        head = Text(f"study {self.name}  {done}/{self.total} done  ({counts['running']} running, "
                    f"{counts['failed']} failed, {counts['interrupted']} interrupted)  "
                    f"{time.monotonic() - self.started:.0f} s")
        table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
        for column in ("session", "agent", "level", "repeat", "step", "best val AUC", "gap"):
            table.add_column(column)
        for r in rows:
            if r["state"] == grid.RUNNING:
                table.add_row(r["session_id"] or "(starting)", r["agent"], r["level"], str(r["repeat_index"]),
                              f"{r['steps'] or 0}/{r['budget'] or '?'}", views.fmt(r["best_auc"]),
                              views.fmt(r["best_gap"]))
        bar = Table.grid(padding=(0, 1))
        bar.add_row(ProgressBar(total=self.total, completed=done, width=50), f"{done}/{self.total}")
        return Group(head, bar, table)


# --------------------------------------------------------------------------- status


def cmd_status(args: argparse.Namespace) -> int:
    store = open_store(db_from_args(args))
    if not args.name:
        return _list_studies(store, args.json)
    grid.study_row(store, args.name)
    rows = grid.grid_rows(store, args.name)
    from engine.study.report import build_report, headline

    report = build_report(store, args.name)
    if args.json:
        _json({"study": args.name, "counts": grid.counts(rows), "cells": [_cell_json(r) for r in rows],
               "aggregate": headline(report)})
        return 0
    c = grid.counts(rows)
    print(f"study {args.name}: {len(rows)} sessions: {c['finished']} finished, {c['running']} running, "
          f"{c['queued']} queued, {c['interrupted']} interrupted, {c['failed']} failed")
    print(f"{'cell':>4}  {'agent':<10} {'level':<18} {'who':<6} {'rep':>3}  {'state':<11} {'steps':>6} "
          f"{'val AUC':>8} {'val gap':>7}  session")
    for r in rows:
        steps = f"{r['steps'] or 0}/{r['budget'] or '?'}" if r["session_id"] else "-"
        print(f"{r['cell']:>4}  {r['agent'][:10]:<10} {r['level'][:18]:<18} {(r['participant_id'] or '-')[:6]:<6} "
              f"{r['repeat_index']:>3}  {r['state']:<11} {steps:>6} {views.fmt(r['best_auc']):>8} "
              f"{views.fmt(r['best_gap']):>7}  {r['session_id'] or '-'}")
    _print_headline(report)
    return 0


def _list_studies(store: Any, as_json: bool) -> int:
    out: list[dict[str, Any]] = []
    for name in grid.study_names(store):
        out.append({"name": name, "counts": grid.counts(grid.grid_rows(store, name))})
    if as_json:
        _json(out)
        return 0
    if not out:
        print(f"no studies in {store.path}")
    for s in out:
        c = s["counts"]
        print(f"{s['name']:<24} {sum(c.values()):>4} sessions  {c['finished']} finished  {c['running']} running  "
              f"{c['queued']} queued  {c['interrupted']} interrupted  {c['failed']} failed")
    return 0


def _cell_json(r: dict[str, Any]) -> dict[str, Any]:
    keys = ("cell", "session_id", "agent", "level", "instruction_level", "participant_id", "repeat_index", "seed",
            "state", "status", "session_status", "attempts", "steps", "budget", "best_auc", "best_gap", "exit_code",
            "error")
    return {k: r.get(k) for k in keys}


def _print_headline(report: Any, *, so_far: bool = True) -> None:
    from engine.study.report import headline

    rows = headline(report)
    if not rows:
        print("aggregate: no finished session yet")
        return
    print(f"aggregate{' so far' if so_far else ''} (test set, final choice by {report.criterion}; "
          "mean ± std [95 % interval]):")
    for h in rows:
        level = report.level_name(h["prompt"])
        print(f"  {h['model']} · {level:<18} n={h['n']:<3} AUC {_stat(h, OVERALL_AUC)}   gap {_stat(h, AUC_GAP)}")
    if report.synthetic:
        print("  generated data (SynthDerm): not comparable to published DDI numbers")


def _print_comparisons(report: Any) -> None:
    """Which levels (within an agent) and agents (within a level) the runs can tell apart."""
    from engine.study.comparisons import METHOD as COMPARISON_METHOD

    if not report.comparisons:
        return
    apart = [c for c in report.comparisons if c["told_apart"]]
    compared = [c for c in report.comparisons if c["told_apart"] is not None]
    print(f"between levels and agents ({COMPARISON_METHOD}):")
    for c in report.comparisons:
        print(f"  {'·' if c['told_apart'] is None else '≠' if c['told_apart'] else '≈'} {c['sentence']}")
    print(f"  {len(apart)} of {len(compared)} compared pairs told apart"
          + ("; the others cannot be told apart with these runs" if len(apart) < len(compared) else ""))


def _stat(h: dict[str, Any], column: str) -> str:
    mean, std = h.get(f"{column}|mean"), h.get(f"{column}|std")
    lo, hi = h.get(f"{column}|ci95_lo"), h.get(f"{column}|ci95_hi")
    if mean is None:
        return "-"
    spread = f" ± {std:.3f} [{lo:.3f}, {hi:.3f}]" if std is not None else " (one session)"
    return f"{mean:.3f}{spread}"


def cmd_watch(args: argparse.Namespace) -> int:
    from engine.study.people import people_of

    from befair_tui.app import create_app

    db = db_from_args(args)
    store = open_store(db)
    try:
        people_of(grid.stored_spec(store, args.name))
    finally:
        store.close()
    app = create_app(db, start="people", study=args.name)
    app.run()
    return int(app.return_code or 0)


# --------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    from engine.study.report import build_report

    store = open_store(db_from_args(args))
    report = _imported_report(store, args) or build_report(store, args.name, criterion=args.criterion,
                                                           unblind=args.unblind)
    people = people_part(store, report, args)  # a study steered by people: by expertise group × level
    study_plan.write_outputs(store, report, args)
    if args.csv:
        write_csv(report.table, args.csv)
    if args.figure and people is not None:
        people.draw(args.figure)
    elif args.figure:
        draw_study_figure(store, report, args.figure, published_agents=args.published_agents)
    if args.json:
        _json({**report.to_json(), **({"people": people.to_json()} if people else {})})
        return 0
    c = report.counts
    print(f"study {report.study}: {c['finished']} of {sum(c.values())} sessions finished; "
          f"{len(report.excluded)} left out of the statistics")
    for e in report.excluded:
        who = f"{e['participant']} · " if e.get("participant") else ""
        print(f"  left out: cell {e['cell']} ({who}{e['model']} · {report.level_name(e['prompt'])} r{e['repeat']}): "
              f"{e['reason']}")
    _print_headline(report, so_far=False)
    _print_comparisons(report)
    if people is not None:
        people.print()
    study_plan.print_design(report, args)
    for what, path in (("table", args.csv), ("sessions", args.sessions_csv), ("figure", args.figure)):
        if path:
            print(f"{what}: {path}")
    return 0


def people_part(store: Any, report: Any, args: argparse.Namespace) -> Any:
    """The report by expertise of a study with people (befair_tui.cli.people), else None;
    --sessions-csv is written here."""
    from befair_tui.cli.people import PeopleReport

    spec = None if report.data.get("imported") else grid.stored_spec(store, args.name)
    if spec is None or spec.people is None:
        if args.sessions_csv:
            raise UsageError(f"--sessions-csv: study {args.name} is not steered by people (no [people] in its spec)")
        return None
    part = PeopleReport.build(store, spec, report, unblind=args.unblind)
    if args.sessions_csv:
        part.write_csv(args.sessions_csv)
    return part


def _imported_report(store: Any, args: argparse.Namespace) -> Any:
    """The report of a study imported from published runs (no spec, no grid), or None when
    `args.name` is a study run here. StudyNotFound when it is neither."""
    try:
        grid.study_row(store, args.name)
        return None
    except grid.StudyNotFound:
        if not store.has_imported_sessions(args.name):
            raise
    from engine.imports.be_fair import imported_report

    if args.criterion not in (None, "claimed"):
        raise UsageError("an imported study's runs each chose their final node themselves: --criterion claimed only")
    return imported_report(store, args.name, all_runs=args.all_runs)


def draw_study_figure(store: Any, report: Any, path: Path, *, published_agents: bool = False) -> Path:
    from engine.study.tradeoff_plot import draw_figure, reference_points, study_points

    refs = study_references(store, report, published_agents=published_agents)
    named = {f"{m} · {report.level_name(p)}": v for (m, _, p), v in
             ((k.partition(" · "), v) for k, v in report.n.items())}
    note = f"final choice by {report.criterion}; n per point: " + ", ".join(f"{k} {v}" for k, v in named.items())
    return draw_figure(path, study_points(report.table, report.level_names), reference_points(refs),
                       title=f"study {report.study}: quality vs fairness (test set)", synthetic=report.synthetic,
                       note=note, runs=run_points(report))


def run_points(report: Any) -> list[Any]:
    """Each run's final choice with its own 95 % test intervals (faint, behind the level means)."""
    from engine.study.tradeoff_plot import Point

    out = []
    for s in report.sessions:
        if s.get("test_auc") is None or s.get("test_auc_gap") is None or s.get("test_auc_ci") is None:
            continue
        gap_ci = s.get("test_auc_gap_ci") or [s["test_auc_gap"]] * 2
        out.append(Point(label=str(s.get("repeat")), auc=float(s["test_auc"]), gap=float(s["test_auc_gap"]),
                         group=str(s["model"]), level=report.level_name(str(s["prompt"])),
                         auc_ci=tuple(s["test_auc_ci"]), gap_ci=tuple(gap_ci)))
    return out


def _json(obj: Any) -> None:
    print(json.dumps(obj, indent=2, default=str))
