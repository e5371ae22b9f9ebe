"""Studies with people on the command line: `befair participate` (a participant's view in this
terminal: what each tab of `befair serve --study` runs) and the report by expertise that
`befair study report` prints for such a study. This module parses and prints; the work is in
engine.study.people and engine.study.people_report."""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.paths import add_db_arg, db_from_args


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "participate", help="a study participant's view: their next session, steering only, then the questions",
        description="The participant's view of a study with people (a [people] table in its spec), in this "
        "terminal: the id, the instructions and consent, the participant fields, then each of their sessions in "
        "their order with steering only, and the questions after each. `befair serve --study` gives each "
        "browser tab this view.")
    p.add_argument("--study", required=True, help="the study's name (recorded with befair serve --study SPEC)")
    p.add_argument("--participant", default=None, help="the participant's id (asked for when not given)")
    p.add_argument("--code", default=None,
                   help=f"the code from the participant's link (default: ${CODE_ENV}; asked for with the id when "
                   "not given)")
    p.add_argument("--tab", default=None, help=argparse.SUPPRESS)  # befair serve: the browser tab's id
    p.add_argument("--via", default="terminal", choices=VIA, help=argparse.SUPPRESS)  # befair serve: how it came
    add_db_arg(p)
    p.set_defaults(func=cmd_participate)


CODE_ENV = "BEFAIR_PARTICIPANT_CODE"  # befair serve passes the code here, off the command line
VIA = ("terminal", "link", "form", "reconnect")


def cmd_participate(args: argparse.Namespace) -> int:
    from engine.session.runner_control import open_store
    from engine.study import grid, links, people

    from befair_tui.participant_app import ParticipantApp

    db = db_from_args(args)
    code = args.code or os.environ.get(CODE_ENV)
    store = open_store(db)
    try:
        spec = grid.stored_spec(store, args.study)
        people.people_of(spec)
        if args.participant:  # refused here, before any screen: the same words as the sign-in page
            links.check_participant(store, spec, args.participant, code)
    finally:
        store.close()
    app = ParticipantApp(db, args.study, participant=args.participant, code=code, tab=args.tab, via=args.via)
    app.run()
    return int(app.return_code or 0)


@dataclass
class PeopleReport:
    """`befair study report` for a study with people: by expertise group × level."""

    spec: Any
    report: Any
    rows: list[dict[str, Any]]
    entries: list[dict[str, Any]]
    store: Any

    @classmethod
    def build(cls, store: Any, spec: Any, report: Any, *, unblind: bool = False) -> "PeopleReport":
        from engine.study.people_report import by_expertise, session_rows

        rows = session_rows(store, spec, criterion=report.criterion, unblind=unblind)
        return cls(spec, report, rows, by_expertise(spec, rows), store)

    def to_json(self) -> dict[str, Any]:
        return {"sessions": self.rows, "by_expertise": self.entries,
                "questions": [{"id": q.id, "text": q.text, "kind": q.kind} for q in self.spec.people.questions]}

    def write_csv(self, path: Path) -> Path:
        from engine.study.people_report import write_sessions_csv

        return write_sessions_csv(self.rows, path)

    def print(self, out: Any = None) -> None:
        from engine.study.people_report import NO_INTERVAL, fmt_outcome

        out = out or sys.stdout
        print(f"by expertise × level (test set, final choice by {self.report.criterion}; mean ± std [95 % interval] "
              "over sessions):", file=out)
        if not self.entries:
            print("  no session yet", file=out)
        questions = {q.id: q for q in self.spec.people.questions}
        for e in self.entries:
            print(f"  {e['group']} · {e['level']:<18} n={e['n']} of {e['sessions']} ({', '.join(e['participants'])})  "
                  f"AUC {fmt_outcome(e['test_auc'])}   gap {fmt_outcome(e['test_auc_gap'])}", file=out)
            if e["pauses"] is None:
                print("      no session started yet", file=out)
                continue
            if e["n"]:
                own = e["test_auc_session_intervals"]
                shown = f"{own} of {e['n']} sessions" if own else NO_INTERVAL
                print(f"      each session's own interval (its evaluation's): {shown}", file=out)
            if e["pauses"] is not None:
                chars = e["guidance_chars"] / e["guidance"] if e["guidance"] else 0
                first = e["seconds_to_first_measured_median"]
                print(f"      steering per session: {e['pauses']:.1f} pauses, {e['guidance']:.1f} guidance "
                      f"({chars:.0f} characters each), {e['prunes']:.1f} prunes, {e['expands']:.1f} expands, "
                      f"{e['refused']:.1f} refused; first measured node after "
                      f"{'-' if first is None else f'{first:.0f} s'} (median)", file=out)
            for qid, given in e["answers"].items():
                if not given["n"]:
                    continue
                if questions[qid].kind == "text":
                    texts = "; ".join(repr(t) for t in given["texts"]) or "-"
                    print(f"      {qid}: {texts}", file=out)
                elif given["mean"] is not None:
                    print(f"      {qid}: mean {given['mean']:.2f}, median {given['median']:g} (n {given['n']}, "
                          f"{questions[qid].low}–{questions[qid].high})", file=out)
        if self.report.synthetic:
            print("  generated data (SynthDerm): not comparable to published DDI numbers", file=out)

    def draw(self, path: Path) -> Path:
        from engine.study.tradeoff_plot import draw_figure, reference_points
        from engine.study.people_report import expertise_points

        from befair_tui.cli.study_references import study_references

        refs = [r for r in study_references(self.store, self.report) if r["kind"] != "published"]
        note = (f"final choice by {self.report.criterion}; colour: expertise (role), marker: level; n per point: "
                + ", ".join(f"{e['group']} · {e['level']} {e['n']}" for e in self.entries if e["n"]))
        return draw_figure(path, expertise_points(self.entries), reference_points(refs),
                           title=f"study {self.spec.name}: quality vs fairness by expertise (test set)",
                           synthetic=self.report.synthetic, note=note)

