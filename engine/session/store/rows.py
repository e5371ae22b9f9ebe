"""The rows the writer keeps in step with the log: a node's row in `nodes`, a session's summary
columns in `sessions`, and the statements that write them and the events."""
from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Mapping
from typing import Any

from engine.measures.summary import EvaluationSummary
from engine.session import selection

from engine.session import figure_text
from engine.session.state import NodeState, SessionState


def _ci(summary: EvaluationSummary | None, figure: str) -> str | None:
    value = figure_text.interval(summary, figure)
    return json.dumps(value) if value is not None else None


def node_row(session_id: str, node: NodeState) -> dict[str, Any]:
    """The nodes table's projection of a node (what `fold` must reproduce exactly)."""
    val, test = node.validation, node.test
    return {
        "session_id": session_id, "node_id": node.node_id, "parent_id": node.parent_id,
        "step": node.step, "stage": node.stage, "status": node.status, "origin": node.origin,
        "plan": node.plan, "code": node.code, "exec_time": node.exec_time,
        "exit_code": node.exit_code, "exc_type": node.exc_type, "output_head": node.output_head,
        "output_tail": node.output_tail, "claimed_metric": node.claimed_metric,
        "val_auc": val and val.auc, "val_gap": val and val.auc_gap, "val_worst": val and val.worst_auc,
        "test_auc": test and test.auc, "test_gap": test and test.auc_gap, "test_worst": test and test.worst_auc,
        "val_auc_ci": _ci(val, "auc"), "val_gap_ci": _ci(val, "auc_gap"),
        "test_auc_ci": _ci(test, "auc"), "test_gap_ci": _ci(test, "auc_gap"),
        "val_verdict": node.eval_verdicts.get("validation"), "test_verdict": node.eval_verdicts.get("test"),
        "audit_flags": json.dumps(node.audit_flags, sort_keys=True),
        "claim_unsupported": int(bool((node.claim or {}).get("unsupported"))),
        "tokens_in": node.tokens_in, "tokens_out": node.tokens_out, "cost": round(node.cost, 10),
        "guidance_ids": json.dumps(node.guidance_ids), "pruned": int(node.pruned),
        "created_seq": node.created_seq,
    }


UNSET: Any = object()


def session_summary(state: SessionState, best: int | None = UNSET) -> dict[str, Any]:
    """The sessions table's summary columns. `best`: the ★ node's id when the caller already
    knows it (the writer caches it: finding it is O(nodes))."""
    if best is UNSET:
        best = selection.choice(state)
    node = state.nodes.get(best) if best is not None else None
    return {
        "status": state.status, "updated_at": state.last_ts, "budget": state.budget,
        "steps": state.agent_steps, "n_nodes": len(state.nodes), "best_criterion": selection.current_criterion(state),
        "best_node": node.node_id if node else None,
        "best_auc": node.val_auc if node else None, "best_gap": node.val_gap if node else None,
        "best_auc_ci": _ci(node.validation, "auc") if node else None,
        "best_gap_ci": _ci(node.validation, "auc_gap") if node else None,
        "tokens_in": state.tokens_in, "tokens_out": state.tokens_out, "cost": round(state.cost, 10),
    }


_NODE_COLUMNS = tuple(node_row("", NodeState(node_id=0, parent_id=None, step=0, stage="draft")))
UPSERT_NODE = (
    f"insert into nodes ({', '.join(_NODE_COLUMNS)}) values ({', '.join('?' * len(_NODE_COLUMNS))}) "
    "on conflict(session_id, node_id) do update set "
    + ", ".join(f"{c} = excluded.{c}" for c in _NODE_COLUMNS if c not in ("session_id", "node_id"))
)
_SUMMARY_COLUMNS = tuple(session_summary(SessionState()))
UPDATE_SESSION = f"update sessions set {', '.join(c + ' = ?' for c in _SUMMARY_COLUMNS)} where id = ?"
INSERT_EVENT = "insert into events (session_id, seq, ts, kind, payload) values (?, ?, ?, ?, ?)"
INSERT_FILES = "insert or ignore into prediction_files (session_id, files_sha256, files) values (?, ?, ?)"
INSERT_PREDICTIONS = ("insert or replace into predictions (session_id, seq, node_id, split, n, files_sha256, scores, "
                       "created_at) values (?, ?, ?, ?, ?, ?, ?, ?)")


def packed_scores(predictions: Mapping[str, float], files: list[str]) -> bytes:
    """The scores of `files`, in that order, as little-endian float64."""
    scores = array("d", (float(predictions[f]) for f in files))
    if sys.byteorder != "little":
        scores.byteswap()
    return scores.tobytes()


def unpacked_scores(files: str, packed: bytes) -> dict[str, float]:
    """{image file: probability} from a stored file list (JSON) and its packed scores."""
    scores = array("d")
    scores.frombytes(packed)
    if sys.byteorder != "little":
        scores.byteswap()
    return dict(zip(json.loads(files), scores.tolist(), strict=True))
