"""Study statistics on the command line: `befair study plan` (how many runs per level or
participants a difference needs, engine.study.plan), `befair study preregister` (the plan recorded
before the data, engine.study.prereg), and the parts of `befair study report` that follow the
study's design: the within-participant analysis of a study with people (engine.study.within), its
long CSV with a codebook, and the preregistration with every deviation. This module parses and
prints; the engine computes."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from engine.errors import UsageError
from engine.paths import add_db_arg, db_from_args


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `plan` and `preregister` to `befair study`, and the design's outputs to `study report`."""
    p = sub.add_parser("plan", help="how many runs per level (or participants) detect a difference, by simulation",
                       description="Estimate the runs per level (an agent study) or the participants (a study with "
                       "people) that detect a difference of --effect in the outcome with the given power, by "
                       "simulating studies from a measured spread: the runs of --from (an imported study such as "
                       "be-fair, or a pilot), a pilot's paired differences (a study with people), or the runs' own "
                       "intervals. It prints its assumptions.")
    p.add_argument("study", metavar="SPEC|NAME", help="the study to plan: its spec (TOML) or a study in the database")
    p.add_argument("--effect", type=float, action="append", default=None, metavar="D",
                   help="the difference to detect, in the outcome's units (e.g. 0.05); repeatable")
    p.add_argument("--outcome", choices=("gap", "auc"), default="gap",
                   help="the skin-tone AUC gap (default) or the test AUC")
    p.add_argument("--power", type=float, default=0.8, help="the power to reach (default 0.8)")
    p.add_argument("--from", dest="source", default=None, metavar="STUDY",
                   help="the study whose runs give the spread (default: the planned study itself, as a pilot)")
    p.add_argument("--agent", default=None, help="only this agent's runs of the source (default: each agent apart)")
    p.add_argument("--pairs", type=int, default=None,
                   help="pairs of levels the report compares and corrects for (default: every pair of the study's "
                        "levels; 1: a single comparison)")
    p.add_argument("--observed", action="store_true",
                   help="also plan for each difference the source observed between two levels")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    add_db_arg(p)
    p.set_defaults(func=cmd_plan)

    r = sub.add_parser("preregister", help="record what a study is to test, before its first session",
                       description="Record the spec's SHA-256, the hypotheses, the primary outcome and the analysis "
                       "in the study's event log, before the first session (refused after it unless --late). "
                       "Without --hypotheses, export a recorded preregistration as Markdown.")
    r.add_argument("study", metavar="SPEC|NAME", help="the study's spec (TOML), or its name to export")
    r.add_argument("--hypotheses", type=Path, default=None, metavar="FILE", help="the hypotheses (text or Markdown)")
    r.add_argument("--primary-outcome", choices=("gap", "auc"), default="gap",
                   help="the primary outcome: the skin-tone AUC gap (default) or the test AUC")
    r.add_argument("--analysis", default=None, metavar="TEXT",
                   help="the planned analysis in words (default: the analysis the study's design gets)")
    r.add_argument("--late", action="store_true",
                   help="record it although sessions have started (marked late; the report says so)")
    r.add_argument("--dry-run", action="store_true", help="preregister the study's dry run (NAME-dry-run)")
    r.add_argument("--markdown", type=Path, default=None, metavar="FILE", help="also write it as Markdown")
    add_db_arg(r)
    r.set_defaults(func=cmd_preregister)

    report = sub.choices["report"]
    report.add_argument("--long-csv", type=Path, default=None, metavar="FILE",
                        help="a study with people: one row per participant × session × measure, for R or pandas, "
                             "with FILE's codebook (.codebook.md) beside it")
    report.add_argument("--preregistration-md", type=Path, default=None, metavar="FILE",
                        help="the study's preregistration as Markdown, with the report's deviations from it")


# --------------------------------------------------------------------------- the report's parts


def write_outputs(store: Any, report: Any, args: argparse.Namespace) -> None:
    """`study report --long-csv` and `--preregistration-md`."""
    from engine.study import prereg

    if args.long_csv:
        if report.within is None:
            raise UsageError(f"--long-csv: study {report.study} is not steered by people (no [people] in its spec)")
        from engine.study import grid
        from engine.study.people_report import write_long_csv

        spec = grid.stored_spec(store, report.study)
        assert spec.people is not None
        write_long_csv(report.people_rows, args.long_csv, spec.people.questions, study=report.study)
    if args.preregistration_md:
        if report.preregistration is None:
            raise UsageError(f"--preregistration-md: study {report.study} was not preregistered "
                             "(befair study preregister SPEC --hypotheses FILE)")
        found = prereg.Preregistration(**report.preregistration)
        args.preregistration_md.write_text(prereg.markdown(found, report.deviations), encoding="utf-8")


def print_design(report: Any, args: argparse.Namespace, out: Any = None) -> None:
    """The within-participant analysis, then the preregistration and its deviations."""
    out = out or sys.stdout
    if report.within is not None:
        _print_dark_sensitivity(report.people_rows, out)
        _print_within(report.within, out)
    if report.preregistration is not None:
        from engine.study.prereg import iso

        pre = report.preregistration
        when = iso(pre["registered_at"]) + (" (LATE: after the first session started)" if pre["late"] else "")
        print(f"preregistered {when}: primary outcome {pre['primary_outcome']}, final choice by {pre['criterion']}, "
              f"spec SHA-256 {pre['spec_sha256'][:16]}…", file=out)
        print(f"  deviations ({len(report.deviations)}):" if report.deviations else "  deviations: none", file=out)
        for d in report.deviations:
            print(f"  - {d}", file=out)
    elif not report.data.get("imported"):   # a published study's runs were not ours to preregister
        print("not preregistered (befair study preregister SPEC --hypotheses FILE, before the first session)",
              file=out)
    for what, path in (("long CSV", args.long_csv), ("preregistration", args.preregistration_md)):
        if path:
            print(f"{what}: {path}" + (f" (codebook: {Path(path).with_name(Path(path).stem + '.codebook.md')})"
                                       if what == "long CSV" else ""), file=out)


def _print_dark_sensitivity(rows: list[dict[str, Any]], out: Any) -> None:
    """Per expertise group × level: the final choice's sensitivity on dark skin at its operating point."""
    from engine.study.aggregate import describe
    from engine.study.people_report import fmt_outcome

    kept = [r for r in rows if not r.get("excluded")]
    print("sensitivity on dark skin (FST V–VI) at the operating point, test set (mean ± std [95 % interval] over "
          "sessions):", file=out)
    for group, level in dict.fromkeys((r["role"], r["level"]) for r in rows):
        values = [float(r["test_sensitivity_dark"]) for r in kept if (r["role"], r["level"]) == (group, level)
                  and r.get("test_sensitivity_dark") is not None]
        shown = fmt_outcome(describe(values)) if values else "- (no session measured at an operating point)"
        print(f"  {group} · {level:<18} n={len(values)}  {shown}", file=out)


def _print_within(within: dict[str, Any], out: Any) -> None:
    print(f"within participant (every participant steers every level):\n  model: {within['model_method']}\n"
          f"  pairs: {within['paired_method']}", file=out)
    for m in within["measures"]:
        model = m["model"]
        print(f"  {m['label']}:", file=out)
        if model["fitted"]:
            print(f"    mixed model ({model['n_participants']} participants, {model['n_sessions']} sessions; "
                  f"participants' variance {model['participant_variance']:.3g}, "
                  f"residual {model['residual_variance']:.3g}):", file=out)
            for e in model["effects"]:
                print(f"      {e['term']:<48} {e['estimate']:+.3f} [{e['ci'][0]:+.3f}, {e['ci'][1]:+.3f}]  "
                      f"p = {e['p_value']:.3f}", file=out)
            print("    the model's estimate per expertise group × level:", file=out)
            for c in model["cells"]:
                print(f"      {c['group']} · {c['level']:<18} {c['estimate']:.3f} [{c['ci'][0]:.3f}, {c['ci'][1]:.3f}]",
                      file=out)
        else:
            print(f"    no mixed model: {m['fallback']}", file=out)
        for pair in m["paired"]:
            mark = "·" if pair["told_apart"] is None else "≠" if pair["told_apart"] else "≈"
            print(f"    {mark} {pair['sentence']}", file=out)


# --------------------------------------------------------------------------- plan


def cmd_plan(args: argparse.Namespace) -> int:
    from engine.session.runner_control import open_store
    from engine.study import plan

    if not args.effect and not args.observed:
        raise UsageError("give --effect D (the difference to detect, e.g. 0.05) or --observed")
    if any(e <= 0 for e in args.effect or ()):
        raise UsageError("--effect must be a positive difference (e.g. 0.05)")
    if not 0 < args.power < 1:
        raise UsageError(f"--power must lie between 0 and 1 (e.g. 0.8), not {args.power}")
    if args.pairs is not None and args.pairs < 1:
        raise UsageError("--pairs must be at least 1")
    store = open_store(db_from_args(args))
    name, within, levels = _target(store, args.study)
    source = _report(store, args.source or name)
    pairs = args.pairs if args.pairs is not None else max(1, len(levels) * (len(levels) - 1) // 2)
    agents = [args.agent] if args.agent else (
        [None] if source.within is not None else list(dict.fromkeys(s["model"] for s in source.sessions)))
    results: list[dict[str, Any]] = []
    for agent in agents:
        spread = plan.measured_spread(source, args.outcome, agent)
        effects = [(e, f"a difference of {e:g}") for e in args.effect or ()]
        if args.observed:
            effects += [(d, f"observed {a} − {b} ({ag}) {d:+.3f}") for ag, a, b, d in
                        plan.observed_differences(source, args.outcome) if agent in (None, ag)]
        assumptions, plans = plan.plan(spread, effects, within=within, pairs=pairs, power=args.power)
        results.append({"agent": agent, "assumptions": assumptions, "plans": plans})
    if args.json:
        from dataclasses import asdict

        print(json.dumps({"study": name, "source": source.study, "design": "within participant" if within else
                          "between runs", "results": [{"agent": r["agent"], "assumptions": asdict(r["assumptions"]),
                                                       "plans": [asdict(p) for p in r["plans"]]} for r in results]},
                         indent=2))
        return 0
    unit = "participants" if within else "runs per level"
    print(f"plan for study {name}: {unit} to detect a difference in {plan.OUTCOME_NAMES[args.outcome]} "
          f"at {args.power:.0%} power (two-sided, α = .05), simulated from study {source.study}")
    for r in results:
        a = r["assumptions"]
        print(f"{'agent ' + r['agent'] if r['agent'] else 'the study'}:" if len(results) > 1 else "assumptions:")
        for note in a.notes:
            print(f"  assumes: {note}")
        print(f"  assumes: {a.simulations} simulated studies per size")
        for p in r["plans"]:
            print(f"  {p.sentence()}")
    return 0


def _target(store: Any, study: str) -> tuple[str, bool, list[str]]:
    """(name, a study with people?, its levels) of SPEC or NAME."""
    from engine.study import grid
    from engine.study.spec import load_spec

    path = Path(study)
    if path.suffix == ".toml" or path.exists():
        spec = load_spec(path)
    else:
        try:
            spec = grid.stored_spec(store, study)
        except grid.StudyNotFound:
            report = _report(store, study)
            return study, False, list(dict.fromkeys(report.level_name(s["prompt"]) for s in report.sessions))
    return spec.name, spec.people is not None, [lv.label for lv in spec.levels]


def _report(store: Any, name: str) -> Any:
    """The report of a study run here or imported (its runs give the spread)."""
    from engine.study import grid
    from engine.study.report import build_report

    try:
        grid.study_row(store, name)
    except grid.StudyNotFound:
        if not store.has_imported_sessions(name):
            raise UsageError(f"no study {name!r} in {store.path} to measure a spread from: give --from STUDY (a "
                             "pilot, or `befair import be-fair` for the published study)") from None
        from engine.imports.be_fair import imported_report

        return imported_report(store, name, all_runs=False)
    return build_report(store, name)


# --------------------------------------------------------------------------- preregister


def cmd_preregister(args: argparse.Namespace) -> int:
    from engine.session.runner_control import open_store
    from engine.session.store import SessionStore
    from engine.study import grid, prereg

    if args.hypotheses is None:
        store = open_store(db_from_args(args))
        name = args.study if not Path(args.study).exists() else _spec(args).name
        grid.study_row(store, name)   # StudyNotFound names the studies there
        found = prereg.find(store, name)
        if found is None:
            raise UsageError(f"study {name} has no preregistration; record one with --hypotheses FILE")
        return _show(found, args)
    if not args.hypotheses.is_file():
        raise UsageError(f"--hypotheses: no file {args.hypotheses}")
    spec = _spec(args)
    text = args.hypotheses.read_text(encoding="utf-8")
    store = SessionStore(db_from_args(args))
    try:
        found = prereg.preregister(store, spec, hypotheses=text, primary_outcome=args.primary_outcome,
                                   analysis=args.analysis, late=args.late, spec_file=Path(args.study).read_bytes(),
                                   source=str(Path(args.study).resolve()))
    finally:
        store.close()
    print(f"study {spec.name}: preregistered (event {found.seq} of its event log"
          f"{', LATE' if found.late else ', before the first session'}); spec SHA-256 {found.spec_sha256}")
    return _show(found, args, quiet=True)


def _spec(args: argparse.Namespace) -> Any:
    from engine.study.people import dry_run_spec
    from engine.study.spec import load_spec

    path = Path(args.study)
    if not path.is_file():
        raise UsageError(f"no spec file {path}: preregister takes the study's spec (TOML)")
    spec = load_spec(path)
    return dry_run_spec(spec) if args.dry_run else spec


def _show(found: Any, args: argparse.Namespace, *, quiet: bool = False) -> int:
    from engine.study.prereg import markdown

    text = markdown(found)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
        print(f"preregistration: {args.markdown}")
    elif not quiet:
        print(text)
    return 0
