"""A study's report: each finished session's final choice scored on the test set, aggregated per
agent × instruction level in the study's long table (engine.study.aggregate).

The final choice is the node the session's `final_choice` event names for the criterion
(claimed, validation, minimax or robust; default: the spec's `best`); its test metrics are the
MEDFAIR set its `evaluated` event recorded, with its own 95 % intervals. Sessions that did not
finish, or finished without a choice or without a test evaluation, are listed with the reason and
left out of the statistics. Levels (within an agent) and agents (within a level) are compared over
runs (engine.study.comparisons, Holm-corrected over the pairs), and the report says which pairs
cannot be told apart. A study with people adds its within-participant analysis (the mixed model and
the paired differences of engine.study.within), and a preregistered study the preregistration with
every deviation from it (engine.study.prereg).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.agent.session_config import BEST_CRITERIA
from engine.errors import UsageError
from engine.session.sealed import open_sealed
from engine.session.store import SessionStore
from engine.study import grid
from engine.study.aggregate import AUC_GAP, METRIC_COLUMNS, MODEL, OVERALL_AUC, PROMPT, aggregate, sizes
from engine.study.choice import choice_metrics, run_intervals
from engine.study.comparisons import CORRECTION, between_groups
from engine.study.comparisons import METHOD as COMPARISON_METHOD
from engine.study.spec import StudySpec


@dataclass
class StudyReport:
    study: str
    criterion: str
    data: dict[str, Any]
    synthetic: bool
    counts: dict[str, int]
    sessions: list[dict[str, Any]]            # one per cell: its final choice and headline metrics
    excluded: list[dict[str, Any]]            # cells left out of the statistics, with the reason
    table: list[dict[str, Any]]               # the long aggregated table
    n: dict[str, int] = field(default_factory=dict)   # "agent · level" -> sessions aggregated
    # how to name a table's prompt label to a reader (an imported study: "basic_prompt" -> "base");
    # the table, its CSV and the JSON keep the stored labels
    level_names: dict[str, str] = field(default_factory=dict)
    # levels within each agent and agents within each level, over runs (engine.study.comparisons)
    comparisons: list[dict[str, Any]] = field(default_factory=list)
    # a study with people: the mixed model and the paired differences per measure (engine.study.within)
    within: dict[str, Any] | None = None
    # the preregistration (engine.study.prereg) and how the report departs from it
    preregistration: dict[str, Any] | None = None
    deviations: list[str] = field(default_factory=list)
    # a study with people: one row per session (engine.study.people_report), for the long CSV
    people_rows: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def level_name(self, prompt: str) -> str:
        return self.level_names.get(prompt, prompt)

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "criterion": self.criterion, "data": self.data, "synthetic": self.synthetic,
                "counts": self.counts, "n": self.n, "sessions": self.sessions, "excluded": self.excluded,
                "metric_columns": METRIC_COLUMNS, "table": self.table, "comparisons": self.comparisons,
                "comparison_method": COMPARISON_METHOD, "comparison_correction": CORRECTION, "within": self.within,
                "preregistration": self.preregistration, "deviations": self.deviations}


def compare_levels(rows: Sequence[dict[str, Any]], level_order: Sequence[str] = (),
                   level_names: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Every pair of levels within an agent and of agents within a level, on test AUC and gap, over
    the aggregated runs (one row per run: model, prompt and the metric columns)."""
    names = level_names or {}
    out = []
    for column, figure in ((OVERALL_AUC, "test AUC"), (AUC_GAP, "skin-tone AUC gap")):
        values: dict[tuple[str, str], list[float]] = {}
        for row in rows:
            value = row.get(column)
            if value is not None:
                values.setdefault((str(row[MODEL]), names.get(str(row[PROMPT]), str(row[PROMPT]))), []).append(
                    float(value))
        order = [names.get(p, p) for p in level_order]
        out += [c.to_json() for c in between_groups(values, figure=figure, level_order=order)]
    return out


def build_report(store: SessionStore, name: str, *, criterion: str | None = None,
                 spec: StudySpec | None = None, unblind: bool = False) -> StudyReport:
    """The report; `unblind` (a researcher) reads a blind study's sealed test metrics."""
    spec = spec or grid.stored_spec(store, name)
    criterion = criterion or spec.best
    if criterion not in BEST_CRITERIA:
        raise UsageError(f"--criterion must be one of {', '.join(BEST_CRITERIA)}, not {criterion!r}")
    rows = grid.grid_rows(store, name)
    sessions, excluded, aggregated = [], [], []
    for row in rows:
        base = {"cell": row["cell"], "session_id": row["session_id"], "model": row["agent"], "prompt": row["level"],
                "participant": row["participant_id"], "repeat": row["repeat_index"], "seed": row["seed"],
                "state": row["state"]}
        if row["session_id"] is None or row["session_status"] is None:
            excluded.append({**base, "reason": f"no session yet ({row['state']})"})
            continue
        state = open_sealed(store, row["session_id"], unblind=unblind)
        node_id, metrics, why = choice_metrics(state, criterion)
        entry = {**base, "node_id": node_id, "test_auc": metrics.get(OVERALL_AUC),
                 "test_auc_gap": metrics.get(AUC_GAP), **(run_intervals(state, node_id) if why is None else {})}
        sessions.append(entry)
        if why is not None:
            excluded.append({**base, "node_id": node_id, "reason": why})
            continue
        aggregated.append({MODEL: row["agent"], PROMPT: row["level"], **metrics})
    level_order = [lv.label for lv in spec.levels]
    n = {f"{m} · {p}": k for (m, p), k in sizes(aggregated).items()}
    report = StudyReport(study=name, criterion=criterion, data=dict(spec.data), synthetic="synth" in spec.data,
                         counts=grid.counts(rows), sessions=sessions, excluded=excluded,
                         table=aggregate(aggregated, prompt_order=level_order), n=n,
                         comparisons=compare_levels(aggregated, level_order))
    if spec.people is not None:
        from engine.study.people_report import session_rows, within_analysis

        report.people_rows = session_rows(store, spec, criterion=criterion, unblind=unblind)
        report.within = within_analysis(spec, report.people_rows)
    add_preregistration(store, report, spec)
    return report


def add_preregistration(store: SessionStore, report: StudyReport, spec: StudySpec) -> None:
    """The study's preregistration, if any, and every deviation from it."""
    from engine.study import prereg

    found = prereg.find(store, report.study)
    if found is None:
        return
    report.preregistration = found.to_json()
    report.deviations = prereg.deviations(found, criterion=report.criterion, excluded=report.excluded,
                                          spec_sha256=spec.digest, within=report.within)


def headline(report: StudyReport, columns: Sequence[str] = (OVERALL_AUC, AUC_GAP)) -> list[dict[str, Any]]:
    """One row per agent × level: n, and mean ± std and the interval of the given columns."""
    out: dict[tuple[str, str], dict[str, Any]] = {}
    for row in report.table:
        key = (row[MODEL], row[PROMPT])
        entry = out.setdefault(key, {"model": key[0], "prompt": key[1],
                                     "n": report.n.get(f"{key[0]} · {key[1]}", 0)})
        for column in columns:
            entry[f"{column}|{row['statistic']}"] = row.get(column)
    return list(out.values())
