"""Session commands of the `befair` command line: sessions, show, steer, export,
delete. Each reads the session database (`--db`, else $BEFAIR_DB, else sessions/befair.db)
and everything it prints comes from the fold of the session's events.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import BefairError, UsageError
from engine.paths import add_db_arg, db_from_args, runs_dir
from engine.session import feedback, selection, views
from engine.session.export import export_session
from engine.session.runner_control import open_store, remove_run_dir, stop_runner
from engine.session.heartbeat import runner_status
from engine.study.session_report import summarise, write_report
from engine.session.sealed import open_sealed

if TYPE_CHECKING:
    from engine.session.store import SessionStore

# `befair steer` actions -> (command kind, what the argument is)
STEER_ACTIONS = {
    "pause": ("pause", None), "resume": ("resume", None), "stop": ("stop", None),
    "guide": ("guide", "TEXT"), "expand": ("expand", "N"), "prune": ("prune", "N"),
    "budget": ("set_budget", "N"),
    "criterion": ("set_criterion", "CRITERION"),
    "feedback": ("set_feedback", "FEEDBACK"),
}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("sessions", help="list the sessions in the database")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--study", default=None, metavar="NAME", help="only the sessions of this study")
    add_db_arg(p)
    p.set_defaults(func=cmd_sessions)

    p = _session_parser(subparsers, "show", cmd_show, help="print a session's search tree with its metrics")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    _add_unblind(p, "show")
    add_db_arg(p)

    p = _session_parser(
        subparsers, "steer", cmd_steer, help="steer a session running in another process",
        description="Write a steering command to the session's queue; the running session "
        "consumes it between steps. Actions: pause | resume | stop | guide TEXT [--node N] | "
        "expand N | prune N | budget N | criterion " + "|".join(selection.CRITERIA) + " (what ★ and the "
        "search's improve step follow from now on) | feedback " + "|".join(feedback.FEEDBACK) + " (what the agent is "
        "shown of befair's measurements from now on).",
    )
    p.add_argument("action", choices=sorted(STEER_ACTIONS))
    p.add_argument("argument", nargs="*", help="TEXT for guide, N for expand/prune/budget, a criterion for criterion")
    p.add_argument("--node", type=int, default=None, help="guide: guidance for this node only")
    p.add_argument("--no-interrupt", action="store_true", help="stop: let the running node finish")
    p.add_argument("--by", default="cli", help="who issued the command (recorded)")
    p.add_argument("--wait", action="store_true", help="wait until the session consumes it; print the latency")
    p.add_argument("--timeout", type=float, default=60.0, help="--wait: give up after this many seconds")
    add_db_arg(p)

    p = _session_parser(subparsers, "export", cmd_export,
                        help="write a session's best pipeline, tree, node metrics and events")
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--criterion", choices=selection.CRITERIA, default=None,
                   help="what 'best' means (default: the one ★ follows)")
    _add_unblind(p)
    add_db_arg(p)

    p = _session_parser(
        subparsers, "report", cmd_report,
        help="write a session's summary (Markdown or HTML, with the plot) to hand to a colleague",
        description="The session summary: the final choice by each criterion with its intervals, whether it "
        "can be told apart from the runners-up, what each guidance changed, and the labels that apply.")
    p.add_argument("--out", type=Path, default=None,
                   help="FILE.md or FILE.html (default: Markdown on standard output, without the plot)")
    _add_unblind(p)
    add_db_arg(p)

    p = subparsers.add_parser("delete", help="delete a session and everything recorded for it")
    p.add_argument("session", help="session id (or a unique prefix)")
    p.add_argument("--yes", action="store_true", help="really delete")
    p.add_argument("--timeout", type=float, default=20.0,
                   help="a running session is stopped first: seconds to wait for its runner (default 20)")
    add_db_arg(p)
    p.set_defaults(func=cmd_delete)


def _session_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str,
                    func: Callable[[argparse.Namespace], int], **parser_args: Any) -> argparse.ArgumentParser:
    """The parser of a command on one session, SESSION its first argument (--db is added last, by
    the caller: the help lists the options in the order they are added)."""
    p = subparsers.add_parser(name, **parser_args)
    p.add_argument("session", help="session id, a unique prefix of it, or 'last'")
    p.set_defaults(func=func)
    return p


def _add_unblind(p: argparse.ArgumentParser, verb: str = "include") -> None:
    p.add_argument("--unblind", action="store_true", help=f"{verb} test metrics even where the session blinds them")


# -- helpers ---------------------------------------------------------------------------------
def _store(args: argparse.Namespace, *, must_exist: bool = True) -> SessionStore:
    return open_store(db_from_args(args), must_exist=must_exist)


def _json_out(obj: Any) -> None:
    json.dump(obj, sys.stdout, indent=2, sort_keys=False, default=str)
    sys.stdout.write("\n")


def _session_rows(store: SessionStore) -> list[dict[str, Any]]:
    counts = store.node_status_counts()
    pending = store.pending_command_counts()
    out = []
    for s in store.sessions():
        out.append({
            "id": s["id"], "created_at": s["created_at"], "updated_at": s["updated_at"],
            "status": s["status"], "level": s["level"], "coder": s["coder"], "coder_label": s["coder_label"],
            "simulated": bool(s["simulated"]), "origin": s["origin"],
            **views.trust_fields(views.row_state(s)),
            "participant_id": s["participant_id"], "study_id": s["study_id"], "repeat_index": s["repeat_index"],
            "steps": s["steps"], "budget": s["budget"], "n_nodes": s["n_nodes"],
            "best_criterion": s["best_criterion"], "best_node": s["best_node"],
            "best_auc": s["best_auc"], "best_gap": s["best_gap"],
            "best_val_auc": s["best_auc"], "best_val_gap": s["best_gap"],   # the same: validation figures
            "runner": runner_status(s),
            "tokens_in": s["tokens_in"], "tokens_out": s["tokens_out"], "cost": s["cost"],
            "counts": counts.get(s["id"], {}), "pending_commands": pending.get(s["id"], 0),
        })
    return out


def _coder_label(row: dict[str, Any]) -> str:
    label = row.get("coder_label") or row.get("coder") or "?"
    if row.get("simulated") and "simulated" not in label:
        label += " (simulated)"
    return label


def _sessions_table(rows: list[dict[str, Any]]) -> list[str]:
    """One line per session; each column as wide as its longest cell (long ids and agents stay whole)."""
    columns = ("session", "status", "level", "coder", "who", "steps", "val AUC", "val gap", "nodes")
    right = {"steps", "val AUC", "val gap"}
    cells = [columns] + [_session_cells(r) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(columns) - 1)]
    lines = []
    for row in cells:
        parts = [f"{v:>{w}}" if name in right else f"{v:<{w}}"
                 for name, v, w in zip(columns, row, widths, strict=False)]   # the last column: unpadded
        lines.append(" ".join(parts) + "  " + row[-1])
    return lines


def _session_cells(r: dict[str, Any]) -> tuple[str, ...]:
    c = r["counts"]
    nodes = f"{r['n_nodes']} ({c.get('ok', 0)} ok, {c.get('buggy', 0) + c.get('timeout', 0)} failed)"
    if r["unsandboxed"]:
        nodes += f"  {views.UNSANDBOXED}"
    if r["runner"] == "stopped" and r["status"] in ("running", "paused"):
        nodes += f"  {views.RUNNER_STOPPED} (befair resume)"
    steps = f"{r['steps'] or 0}/{r['budget'] if r['budget'] is not None else '?'}"
    return (r["id"], r["status"], r["level"] or "", _coder_label(r), r["participant_id"] or "-", steps,
            views.fmt(r["best_auc"]), views.fmt(r["best_gap"]), nodes)


# -- commands --------------------------------------------------------------------------------
def cmd_sessions(args: argparse.Namespace) -> int:
    path = db_from_args(args)
    if not path.exists():
        if args.json:
            _json_out([])
        else:
            print(f"no sessions yet ({path} does not exist)")
        return 0
    rows = _session_rows(_store(args))
    if getattr(args, "study", None):
        rows = [r for r in rows if r["study_id"] == args.study]
    if args.json:
        _json_out(rows)
        return 0
    if not rows:
        print(f"no sessions of study {args.study} in {path}" if getattr(args, "study", None)
              else f"no sessions in {path}")
        return 0
    print("\n".join(_sessions_table(rows)))
    print("val AUC / val gap: the best node's AUC and skin-tone AUC gap on the held-out validation split")
    if any(r["unsandboxed"] for r in rows):
        print(f"{views.UNSANDBOXED}: {views.UNSANDBOXED_MEANING}")
    return 0


def _comparisons(store: SessionStore, state: Any, unblind: bool) -> dict[str, views.Comparison]:
    from baselines.reference import reference_rows

    trained, published = reference_rows(store)
    return {split: views.comparison(state, trained, published, split, unblind=unblind) for split in views.SPLITS}


def cmd_show(args: argparse.Namespace) -> int:
    store = _store(args)
    sid = store.resolve(args.session)
    state = open_sealed(store, sid, unblind=args.unblind)
    comparisons = _comparisons(store, state, args.unblind)
    if args.json:
        _json_out(views.session_json(state, unblind=args.unblind, comparisons=comparisons))
        return 0
    coder = state.coder.get("label") or state.coder.get("name", "?")
    if state.simulated and "simulated" not in coder:
        coder += " (simulated)"
    print(f"session {sid} · {state.level or '?'} · {coder} · step {state.agent_steps}/{state.budget} · "
          f"{state.status.upper()}" + (f" · {views.UNSANDBOXED}" if state.unsandboxed else ""))
    if state.unsandboxed:
        print(f"{views.UNSANDBOXED}: {views.UNSANDBOXED_MEANING}")
    print(views.settings_line(state))
    if state.tokens_in or state.tokens_out:
        print(f"tokens {state.tokens_in + state.tokens_out:,} · cost ${state.cost:.2f}")
    lines = views.tree_lines(state, unblind=args.unblind)
    print("\n".join(lines) if lines else "(no nodes yet)")
    _print_best(state, args.unblind)
    for split in views.SPLITS:
        print()
        print("\n".join(comparisons[split].lines()))
    if any(n.audit_flags or n.audit_note or n.claim or n.guidance_ids for n in state.nodes.values()):
        print("badges: " + ", ".join(f"[{b}] {h}" for b, h in views.BADGE_HELP.items()))
    return 0


def _print_best(state: Any, unblind: bool) -> None:
    """The best node by each criterion, with the reason and how sure; ★ marks the one ★ follows.
    After the end: the session summary."""
    criterion = views.session_criterion(state)
    choices = views.best_by_criterion(state)
    own = choices[criterion].node_id
    which = "final choice" if views.ended(state) else "so far"
    print(f"★ follows {criterion}: node {own if own is not None else '–'}  ·  {which}: "
          + ", ".join(f"{c} → {b.node_id if b.node_id is not None else '–'}" for c, b in choices.items()))
    if views.ended(state):
        print()
        print("\n".join(summarise(state, unblind=unblind).lines()))
    else:
        for c, b in choices.items():
            mark = "★" if c == criterion else " "
            print(f"  {mark} {c} (so far): {b.reason}" + (f"; {b.uncertainty}" if b.uncertainty else ""))
    visibility = views.visibility(state, unblind)
    if visibility["test_hidden"]:
        print(f"test metrics: {visibility['note']} (a researcher sees them with --unblind)")


def cmd_report(args: argparse.Namespace) -> int:
    store = _store(args)
    sid = store.resolve(args.session)
    state = open_sealed(store, sid, unblind=args.unblind)
    report = summarise(state, unblind=args.unblind)
    if args.out is None:
        print(report.markdown(), end="")
        return 0
    out = Path(args.out)
    if out.suffix.lower() not in (".md", ".html", ".htm"):
        raise UsageError(f"--out must end in .md or .html, not {out.name!r}")
    written = write_report(store, state, report, out, unblind=args.unblind)
    print(f"wrote {', '.join(str(p) for p in written)}")
    return 0


def cmd_steer(args: argparse.Namespace) -> int:
    store = _store(args)
    sid = store.resolve(args.session)
    kind, what = STEER_ACTIONS[args.action]
    payload: dict[str, Any] = {}
    arg = " ".join(args.argument).strip()
    if what is None and arg:
        raise BefairError(f"steer {args.action} takes no argument (got {arg!r})")
    if what is not None and not arg:
        raise BefairError(f"steer {args.action} needs {what}")
    state = store.state(sid)
    if what == "N":
        try:
            n = int(arg)
        except ValueError:
            raise BefairError(f"steer {args.action}: {arg!r} is not a number") from None
        if kind == "set_budget":
            if n < 0:
                raise BefairError("the step budget cannot be negative")
            payload = {"steps": n}
        else:
            if n not in state.nodes:
                raise BefairError(f"session {sid} has no node {n}")
            payload = {"node_id": n}
    elif kind == "guide":
        if args.node is not None and args.node not in state.nodes:
            raise BefairError(f"session {sid} has no node {args.node}")
        payload = {"text": arg, "scope": "node" if args.node is not None else "global", "node_id": args.node}
    elif kind == "stop":
        payload = {"interrupt": not args.no_interrupt}
    elif kind == "set_feedback":
        if arg not in feedback.FEEDBACK:
            raise UsageError(f"steer feedback: {arg!r} is not one of {', '.join(feedback.FEEDBACK)}")
        payload = {"feedback": arg}
    elif kind == "set_criterion":
        if arg not in selection.CRITERIA:
            raise UsageError(f"steer criterion: {arg!r} is not one of {', '.join(selection.CRITERIA)}")
        payload = {"criterion": arg}
    command_id = store.issue_command(sid, kind, payload, by=args.by)
    if state.status not in ("running", "paused", "new"):  # after the write: a failure says one thing
        print(f"befair: note: session {sid} is {state.status}; the command waits until it is resumed",
              file=sys.stderr)
    print(command_id)
    if args.wait:
        row = store.wait_command(command_id, timeout=args.timeout)
        if row is None:
            print(f"befair: command {command_id} not consumed within {args.timeout:g} s", file=sys.stderr)
            return 1
        latency = (row["consumed_at"] - row["issued_at"]) * 1000
        print(f"consumed: {row['result']} (seq {row['consumed_seq']}) after {latency:.0f} ms")
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    store = _store(args)
    sid = store.resolve(args.session)
    from baselines.reference import reference_rows

    info = export_session(store, sid, Path(args.out), criterion=args.criterion, unblind=args.unblind,
                          reference=reference_rows(store)[1])
    if info["best_node"] is None:
        print(f"no successful node by {info['criterion']}; solution.py not written", file=sys.stderr)
    else:
        print(f"best by {info['criterion']}: node {info['best_node']}")
    print(f"wrote {', '.join(info['files'])} to {args.out}")
    return 0


def cmd_delete(args: argparse.Namespace) -> int:
    store = _store(args)
    sid = store.resolve(args.session)
    if not args.yes:
        raise UsageError(f"this deletes session {sid} and all its events; add --yes to confirm")
    note = stop_runner(store, sid, timeout=args.timeout)
    if note:
        print(f"{sid}: {note}", file=sys.stderr)
    store.delete_session(sid)
    try:
        removed = remove_run_dir(runs_dir(store.path), sid)
    except OSError as exc:
        print(f"befair: deleted session {sid}, but could not remove its run folder "
              f"{runs_dir(store.path) / sid}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    print(f"deleted {sid}" + (f" and its run folder {removed}" if removed else ""))
    return 0
