"""A study's report: each finished session's final choice scored on the test set, aggregated per
agent × instruction level in the study's long table (engine.study.aggregate).

The final choice is the node the session's `final_choice` event names for the criterion
(claimed, validation or minimax; default: the spec's `best`); its test metrics are the MEDFAIR set
its `evaluated` event recorded. Sessions that did not finish, or finished without a choice or
without a test evaluation, are listed with the reason and left out of the statistics.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.config import BEST_CRITERIA
from engine.errors import UsageError
from engine.session.state import SessionState
from engine.session.store import SessionStore
from engine.study import grid
from engine.study.aggregate import (AUC_GAP, METRIC_COLUMNS, MODEL, OVERALL_AUC, PROMPT, TEST_PREFIX, aggregate,
                                    sizes)
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

    def level_name(self, prompt: str) -> str:
        return self.level_names.get(prompt, prompt)

    def to_json(self) -> dict[str, Any]:
        return {"study": self.study, "criterion": self.criterion, "data": self.data, "synthetic": self.synthetic,
                "counts": self.counts, "n": self.n, "sessions": self.sessions, "excluded": self.excluded,
                "metric_columns": METRIC_COLUMNS, "table": self.table}


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
        node_id, metrics, why = choice_metrics(open_sealed(store, row["session_id"], unblind=unblind), criterion)
        entry = {**base, "node_id": node_id, "test_auc": metrics.get(OVERALL_AUC),
                 "test_auc_gap": metrics.get(AUC_GAP)}
        sessions.append(entry)
        if why is not None:
            excluded.append({**base, "node_id": node_id, "reason": why})
            continue
        aggregated.append({MODEL: row["agent"], PROMPT: row["level"], **metrics})
    level_order = [lv.label for lv in spec.levels]
    n = {f"{m} · {p}": k for (m, p), k in sizes(aggregated).items()}
    return StudyReport(study=name, criterion=criterion, data=dict(spec.data), synthetic="synth" in spec.data,
                       counts=grid.counts(rows), sessions=sessions, excluded=excluded,
                       table=aggregate(aggregated, prompt_order=level_order), n=n)


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
