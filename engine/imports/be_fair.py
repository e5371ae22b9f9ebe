"""The published "Be Fair!" artifact tree (anna-richter/be-fair), every run, as the study `be-fair`.

    ROOT/aide/logs/<id>-<prompt>/                  journal.json, config.yaml, aide.log, best_solution.py
    ROOT/aide/failed_runs/logs_<why>/<id>-<prompt>/  runs the study published as failed
    ROOT/mlzero/<id>-<prompt>/                      info_logs.txt, logs.txt, token_usage.json, node_*/
    ROOT/evaluation/{aide,mlzero}/<id>-<prompt>/<id>-<prompt>_DDI_predictions.csv

Each run becomes a session (id `be-fair-<agent>-<run>`, `be-fair-<agent>-failed-<why>-<run>` for a
failed one) of the study `be-fair`: agent AIDE or MLZero, level from the prompt name
(basic_prompt/mlzero_bp -> base, addition_1/mlzero_add1 -> fairness-hint, addition_2 ->
fairness-metric, addition_3 -> fairness-methods), protocol be-fair, the run's final node scored
from its published predictions. A run that cannot be read is reported by name and skipped; the
others import all the same. A session id already in the database is left as it is.

`study_rows` reads the imported runs back as the study's individual-run rows and `study_table`
aggregates them (engine.study.aggregate) into the published table's shape.
"""
from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.agent.session_config import SessionConfig
from engine.measures.summary import EvaluationSummary
from engine.errors import BefairError, DataError, UsageError
from engine.imports.aide import import_aide
from engine.imports.common import SHAPE_ERRORS, Clock, RunTag, emit_end, read_text
from engine.imports.mlzero import import_mlzero
from engine.imports.predictions import PUBLISHED_SOURCE, predictions_for
from engine.imports.run_names import PROMPT_LEVELS, parse_run_name
from engine.session import figure_text
from engine.study.aggregate import aggregate, sizes
from engine.task import LEVELS

if TYPE_CHECKING:
    from engine.session.store import SessionStore

STUDY_ID = "be-fair"
PROTOCOL = "be-fair"
AIDE, MLZERO = "AIDE", "MLZero"
# The prompt labels of the study's aggregated table, per agent and level.
TABLE_PROMPTS = {
    AIDE: {"base": "basic_prompt", "fairness-hint": "addition_1", "fairness-metric": "addition_2",
           "fairness-methods": "addition_3"},
    MLZERO: {"base": "mlzero_bp", "fairness-hint": "mlzero_add1", "fairness-metric": "mlzero_add2",
             "fairness-methods": "mlzero_add3"},
}
# Runs with published predictions that the published aggregated table
# (evaluation/MEDFAIR_evaluations/AIDE_MLZero_Baseline_Human_aggregated.csv) leaves out. Found by
# aggregating the published individual runs (individual_runs_AIDE_MLZero.csv) with
# engine.study.aggregate: without MLZero run 48 the result equals the published table to 4.4e-16 in
# all 1,344 AIDE and MLZero cells; with it every mlzero_add2 cell differs (mean AUC .5878 vs .6059).
NOT_IN_PUBLISHED_TABLE = {
    (MLZERO, 48): "MLZero run 48 (addition_2) has published predictions and is in the published individual runs, "
                  "but the published aggregated table was computed without it (5 runs for mlzero_add2)",
}
ProgressFn = Callable[[str, int, int], None]


@dataclass
class BeFairRun:
    """One run folder of the tree, before it is imported."""
    agent: str
    name: str
    path: Path
    run_id: int
    prompt: str
    variant: str
    predictions: Path | None
    failed: str | None = None       # why the study published it as failed
    group: str | None = None        # failed_runs/<group>

    @property
    def level(self) -> str:
        return PROMPT_LEVELS[self.prompt]

    @property
    def label(self) -> str:
        where = f"failed_runs/{self.group}/" if self.group else ""
        return f"{self.agent.lower()}/{where}{self.name}"

    @property
    def session_id(self) -> str:
        failed = f"failed-{self.group.removeprefix('logs_')}-" if self.group else ""
        return f"{STUDY_ID}-{self.agent.lower()}-{failed}{self.name}"

    def tag(self) -> RunTag:
        return RunTag(study_id=STUDY_ID, repeat_index=self.run_id, level=self.level, protocol=PROTOCOL,
                      failed=self.failed, extra={"be_fair": {
                          "agent": self.agent, "run": self.name, "run_id": self.run_id, "prompt": self.prompt,
                          "table_prompt": TABLE_PROMPTS[self.agent][self.level], "variant": self.variant,
                          "folder": str(self.path), "predictions": str(self.predictions) if self.predictions else None,
                          "failed": self.failed}})


def _failed_reason(group: str | None, variant: str, folder: Path) -> str | None:
    reasons = []
    if group:
        why = group.removeprefix("logs").strip("_").replace("_", " ").replace("cuda", "CUDA")
        reasons.append(f"published among the failed runs ({why or group})")
    if "killed" in variant:
        reasons.append("the job was killed")
    if not reasons:
        return None
    for err in sorted(folder.glob("*.e[0-9]*")):  # the cluster job's stderr
        last = [line.strip() for line in read_text(err).splitlines() if line.strip()]
        if last:
            reasons.append(f"last error line: {last[-1][:300]}")
            break
    return "; ".join(reasons)


def find_runs(root: str | Path) -> tuple[list[BeFairRun], list[tuple[str, str]]]:
    """(the runs of an artifact tree in a stable order, [(folder, why it is not a run)])."""
    root = Path(root)
    if not root.is_dir():
        raise DataError(f"{root} is not a folder (give a checkout of the be-fair repository)")
    if not (root / "aide").is_dir() and not (root / "mlzero").is_dir():
        raise DataError(f"{root} holds neither aide/ nor mlzero/: not the be-fair artifact tree")
    runs: list[BeFairRun] = []
    ignored: list[tuple[str, str]] = []
    places: list[tuple[str, Path, str | None]] = [(AIDE, root / "aide" / "logs", None), (MLZERO, root / "mlzero", None)]
    for agent, sub in ((AIDE, "aide"), (MLZERO, "mlzero")):
        places += [(agent, g, g.name) for g in sorted((root / sub / "failed_runs").glob("logs*"))]
    for agent, folder, group in places:
        for path in sorted((p for p in folder.glob("*") if p.is_dir()), key=_natural):
            parsed = parse_run_name(path.name)
            if parsed is None or parsed[0] is None:
                if path.name != "failed_runs":
                    ignored.append((str(path.relative_to(root)), "not a run folder (<id>-<prompt>)"))
                continue
            run_id, prompt, variant = parsed[0], parsed[1], parsed[2]
            preds = None if group else predictions_for(root / "evaluation" / agent.lower() / path.name, path.name)
            runs.append(BeFairRun(agent=agent, name=path.name, path=path, run_id=run_id, prompt=prompt,
                                  variant=variant, predictions=preds, group=group,
                                  failed=_failed_reason(group, variant, path)))
    return runs, ignored


def _natural(path: Path) -> tuple[int, str]:
    m = re.match(r"\d+", path.name)
    return (int(m.group()) if m else 1 << 30, path.name)


@dataclass
class ImportReport:
    imported: list[tuple[str, str]] = field(default_factory=list)      # (run, session id)
    existing: list[tuple[str, str]] = field(default_factory=list)      # (run, session id) already there
    skipped: list[tuple[str, str]] = field(default_factory=list)       # (run, why)
    ignored: list[tuple[str, str]] = field(default_factory=list)       # (folder, why)
    failed_runs: int = 0
    scored: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {"imported": self.imported, "existing": self.existing, "skipped": self.skipped,
                "ignored": self.ignored, "failed_runs": self.failed_runs, "scored": self.scored,
                "seconds": round(self.seconds, 2)}


def import_be_fair(store: SessionStore, root: str | Path, *, metadata: str | Path | None,
                   progress: ProgressFn | None = None) -> ImportReport:
    """Import every run of the artifact tree at `root` (see the module doc). `metadata`: the DDI
    metadata the published predictions are scored against (without it no run is scored)."""
    started = time.perf_counter()
    runs, ignored = find_runs(root)
    report = ImportReport(ignored=ignored)
    for done, run in enumerate(runs):
        if progress is not None:
            progress("runs", done, len(runs))
        _import_one(store, run, metadata, report)
    if progress is not None:
        progress("runs", len(runs), len(runs))
    report.seconds = time.perf_counter() - started
    return report


def _import_one(store: SessionStore, run: BeFairRun, metadata: str | Path | None, report: ImportReport) -> None:
    if store.session_exists(run.session_id):
        report.existing.append((run.label, run.session_id))
        return
    preds = run.predictions if metadata is not None else None
    try:
        sid = _import_run(store, run, preds, metadata)
    except (BefairError, OSError, *SHAPE_ERRORS) as exc:
        if run.failed is None:
            report.skipped.append((run.label, _short(exc)))
            return
        sid = _failed_stub(store, run, f"{run.failed}; its records could not be read ({_short(exc)})")
    report.imported.append((run.label, sid))
    report.failed_runs += run.failed is not None
    report.scored += preds is not None


def _import_run(store: SessionStore, run: BeFairRun, preds: Path | None, metadata: str | Path | None) -> str:

    if run.agent == AIDE:
        if run.failed is not None and not (run.path / "journal.json").is_file():
            return _failed_stub(store, run, run.failed)
        return import_aide(store, run.path, session_id=run.session_id, predictions=preds, metadata=metadata,
                           tag=run.tag())
    if run.failed is not None and not any((run.path / f).is_file() for f in ("info_logs.txt", "logs.txt")):
        return _failed_stub(store, run, run.failed)
    return import_mlzero(store, run.path, session_id=run.session_id, predictions=preds, metadata=metadata,
                         tag=run.tag())


def _failed_stub(store: SessionStore, run: BeFairRun, reason: str) -> str:
    """A session with no nodes for a failed run whose records hold none: started, then failed."""
    tag = run.tag()
    tag.failed = reason
    config = SessionConfig(level=run.level, steps=0, best="claimed", coder=f"{run.agent.lower()}-import",
                           failure_rate=0.0, data=str(run.path), **tag.config_fields(), extra=tag.extra).to_dict()
    stamp = min((p.stat().st_mtime for p in run.path.iterdir() if p.is_file()), default=0.0)
    writer = store.create_session(
        config, instruction=LEVELS[run.level],
        coder={"name": f"{run.agent.lower()}-import", "label": f"imported {run.agent} run", "simulated": False},
        data={"kind": f"{run.agent.lower()}-import", "path": str(run.path), "summary": {"nodes": 0}},
        session_id=run.session_id, origin="import", ts=stamp)
    emit_end(writer, None, reason, tag, Clock(stamp))
    return writer.session_id


def _short(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text if isinstance(exc, BefairError) else f"{type(exc).__name__}: {text}"[:300]


# --------------------------------------------------------------------------- the study's table


def study_rows(store: SessionStore, study_id: str = STUDY_ID, *, as_published: bool = False) -> list[dict[str, Any]]:
    """One row per imported run with published scores: model, prompt (the table's labels), id,
    session and the MEDFAIR test metrics ("Test " + name), in the study's run order.
    `as_published`: only the runs the published aggregated table was computed from."""
    rows = []
    for session_id, config in store.imported_sessions(study_id):
        meta = (config.get("extra") or {}).get("be_fair") or {}
        published = _published_evaluation(store, session_id)
        if published is None or not meta:
            continue
        if as_published and (meta["agent"], meta["run_id"]) in NOT_IN_PUBLISHED_TABLE:
            continue
        medfair, summary = published
        rows.append({"model": meta["agent"], "id": meta["run_id"], "prompt": meta["table_prompt"],
                     "session": session_id, **{"Test " + k: v for k, v in medfair.items()},
                     "test_auc_ci": figure_text.interval(summary, "auc"),
                     "test_auc_gap_ci": figure_text.interval(summary, "auc_gap")})
    return sorted(rows, key=lambda r: (r["model"] != AIDE, r["id"], r["session"]))


def _published_evaluation(store: SessionStore,
                          session_id: str) -> tuple[dict[str, Any], EvaluationSummary | None] | None:
    """(MEDFAIR metrics, summary with its intervals) of a run's published predictions, scored here."""
    for p in store.evaluated_payloads(session_id):
        if p.get("source") == PUBLISHED_SOURCE and p.get("ok") and p.get("medfair"):
            return dict(p["medfair"]), EvaluationSummary.from_payload(p.get("summary") or {})
    return None


def study_table(store: SessionStore, study_id: str = STUDY_ID, *, as_published: bool = True) -> list[dict[str, Any]]:
    """The aggregated table (mean, std, ci95_hi, ci95_lo per model × prompt) of the imported runs;
    `as_published` (default): of the runs the published table was computed from
    (NOT_IN_PUBLISHED_TABLE names the others), so that it reproduces the published figures."""
    rows = study_rows(store, study_id, as_published=as_published)
    if not rows:
        raise UsageError(f"no imported run of the study {study_id!r} has published scores; "
                         "import the artifact tree with `befair import be-fair PATH --metadata DDI.csv` first")
    return aggregate(rows)


def left_out(store: SessionStore, study_id: str = STUDY_ID) -> list[str]:
    """Why each imported, scored run missing from `study_table(as_published=True)` is left out."""
    every = {(r["model"], r["id"]) for r in study_rows(store, study_id)}
    return [why for key, why in NOT_IN_PUBLISHED_TABLE.items() if key in every]


def imported_report(store: SessionStore, study_id: str = STUDY_ID, *, all_runs: bool = False) -> Any:
    """The study report (engine.study.report.StudyReport) of an imported study: each run's final
    node, scored from its published predictions; by default only the runs the published table
    was computed from (NOT_IN_PUBLISHED_TABLE says why the others are left out)."""
    from engine.study.report import StudyReport, compare_levels

    every = study_rows(store, study_id)
    if not every:
        raise UsageError(f"no imported run of the study {study_id!r} has published scores; "
                         "import the artifact tree with `befair import be-fair PATH --metadata DDI.csv` first")
    left = [] if all_runs else [r for r in every if (r["model"], r["id"]) in NOT_IN_PUBLISHED_TABLE]
    rows = [r for r in every if r not in left]
    sessions = [{"session_id": r["session"], "model": r["model"], "prompt": r["prompt"], "repeat": r["id"],
                 "test_auc": r.get("Test Overall AUC"), "test_auc_gap": r.get("Test auc_gap"),
                 "test_auc_ci": r.get("test_auc_ci"), "test_auc_gap_ci": r.get("test_auc_gap_ci"),
                 "source": PUBLISHED_SOURCE} for r in rows]
    excluded = [{"cell": r["session"], "session_id": r["session"], "model": r["model"], "prompt": r["prompt"],
                 "repeat": r["id"], "reason": NOT_IN_PUBLISHED_TABLE[(r["model"], r["id"])]} for r in left]
    return StudyReport(study=study_id, criterion="claimed", data={"imported": PUBLISHED_SOURCE}, synthetic=False,
                       counts={"finished": len(rows)}, sessions=sessions, excluded=excluded,
                       table=aggregate(rows),
                       n={f"{m} · {pr}": k for (m, pr), k in sizes(rows).items()},
                       level_names=dict(PROMPT_LEVELS),
                       comparisons=compare_levels(rows, list(PROMPT_LEVELS), dict(PROMPT_LEVELS)))
