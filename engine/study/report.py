"""A study's report: each finished session's final choice scored on the test set, aggregated per
agent × instruction level in the study's long table (engine.study.aggregate).

The final choice is the node the session's `final_choice` event names for the criterion
(claimed, validation, minimax or robust; default: the spec's `best`); its test metrics are the
MEDFAIR set its `evaluated` event recorded, with its own 95 % intervals. Sessions that did not
finish, or finished without a choice or without a test evaluation, are listed with the reason and
left out of the statistics. Levels (within an agent) and agents (within a level) are compared over
runs (engine.study.comparisons), and the report says which pairs cannot be told apart.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.session import figures
from engine.config import BEST_CRITERIA
from engine.errors import UsageError
from engine.session.state import SessionState
from engine.session.store import SessionStore
from engine.study import grid
from engine.study.aggregate import (AUC_GAP, METRIC_COLUMNS, MODEL, OVERALL_AUC, PROMPT, TEST_PREFIX, aggregate,
                                    sizes)
from engine.study.comparisons import METHOD as COMPARISON_METHOD
from engine.study.comparisons import between_groups
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

    def level_name(self, prompt: str) -> str:
        return self.level_names.get(prompt, prompt)

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "criterion": self.criterion, "data": self.data, "synthetic": self.synthetic,
                "counts": self.counts, "n": self.n, "sessions": self.sessions, "excluded": self.excluded,
                "metric_columns": METRIC_COLUMNS, "table": self.table, "comparisons": self.comparisons,
                "comparison_method": COMPARISON_METHOD}


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


def run_intervals(state: SessionState, node_id: int | None) -> dict[str, Any]:
    """The chosen node's own 95 % test intervals (from its predictions), where it has them."""
    node = state.nodes.get(node_id) if node_id is not None else None
    test = (node.test or {}) if node is not None else {}
    return {"test_auc_ci": figures.interval(test, "auc"), "test_auc_gap_ci": figures.interval(test, "auc_gap")}


def choice_metrics(state: SessionState, criterion: str) -> tuple[int | None, dict[str, float | None], str | None]:
    """(node id, its test metrics under the study's column names, why not) for a session's final
    choice by `criterion`."""
    if state.status != "finished":
        return None, {}, f"the session is {state.status}"
    choice = state.final_choice or {}
    node_id = choice.get(f"by_{criterion}")
    if node_id is None:
        reason = (choice.get("reasons") or {}).get(criterion) or "no final choice recorded"
        return None, {}, f"no final choice by {criterion}: {reason}"
    node = state.nodes.get(int(node_id))
    if node is not None and node.eval_verdicts.get("test") == "ok" and "test" not in node.medfair \
            and state.config.get("blind_test"):
        return int(node_id), {}, "test metrics sealed (a blind study): a researcher reports with --unblind"
    if node is None or node.eval_verdicts.get("test") != "ok" or "test" not in node.medfair:
        verdict = node.eval_verdicts.get("test") if node else None
        return int(node_id), {}, f"node {node_id} has no test evaluation ({verdict or 'none'})"
    medfair = node.medfair["test"]
    metrics = {c: _float(medfair.get(c[len(TEST_PREFIX):])) for c in METRIC_COLUMNS}
    return int(node_id), metrics, None


def _float(value: Any) -> float | None:
    if value is None or isinstance(value, (str, bool)):
        return None
    return float(value)


def build_report(store: SessionStore, name: str, *, criterion: str | None = None,
                 spec: StudySpec | None = None, unblind: bool = False) -> StudyReport:
    """The report; `unblind` (a researcher) reads a blind study's sealed test metrics."""
    from engine.session.sealed import open_sealed

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
    return StudyReport(study=name, criterion=criterion, data=dict(spec.data), synthetic="synth" in spec.data,
                       counts=grid.counts(rows), sessions=sessions, excluded=excluded,
                       table=aggregate(aggregated, prompt_order=level_order), n=n,
                       comparisons=compare_levels(aggregated, level_order))


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
