"""The pipeline contract, checked the moment a run ends (before any review call):
a node's script must define `predict(folder)` and print its validation metric.

A run that exits 0 but breaks the contract is failed at once with the reason, so a model that
returns a script with no predict() does not cost a review call and is never "ok". The product's
protocol only: under be-fair (TaskProtocol.checks_contract) AIDE's review alone judges a run.
"""
from __future__ import annotations

import ast

from engine.evaluation.audit import parse_claimed_metric
from engine.execution.base import ExecResult

NO_PREDICT = "the script defines no predict(folder) function"
NO_METRIC = "the script printed no validation metric (e.g. 'Validation AUROC: 0.81')"


def defines_predict(code: str) -> bool:
    """A module-level predict: a def, an assignment or an import named predict."""
    try:
        tree = ast.parse(code)
    except (SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "predict":
            return True
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "predict" for t in node.targets):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (alias.asname or alias.name) == "predict" for alias in node.names):
            return True
    return False


def contract_problem(code: str, result: ExecResult) -> str | None:
    """Why a run that ended "ok" still breaks the contract, or None."""
    if result.status != "ok":
        return None
    if not defines_predict(code):
        return NO_PREDICT
    if parse_claimed_metric(result.output) is None:
        return NO_METRIC
    return None
