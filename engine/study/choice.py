"""A session's final choice for a study: the node its `final_choice` event names for a criterion,
and that node's MEDFAIR test metrics under the study's column names (engine.study.aggregate), with
its own 95 % test intervals. Used by the study report and the report of a study with people."""
from __future__ import annotations

from typing import Any

from engine.session import figure_text
from engine.session.state import SessionState
from engine.study.aggregate import METRIC_COLUMNS, TEST_PREFIX


def run_intervals(state: SessionState, node_id: int | None) -> dict[str, Any]:
    """The chosen node's own 95 % test intervals (from its predictions), where it has them."""
    node = state.nodes.get(node_id) if node_id is not None else None
    test = node.test if node is not None else None
    return {"test_auc_ci": figure_text.interval(test, "auc"), "test_auc_gap_ci": figure_text.interval(test, "auc_gap")}


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
