"""Can the leader be told apart from the other nodes? Paired bootstrap comparisons on the same images.

The runner holds the held-out labels and every node's kept predictions, so it works this out and
records it as a `compared` event; engine.session.selection reads it back (`ties`), and every
surface says "nodes 3, 6 and 7 cannot be told apart on validation" from that event.

For each criterion with an interval (validation: AUC; minimax and robust: the worst-group AUC),
the leader (selection.best) is compared with every other candidate whose interval of the same
figure overlaps the leader's: the others are told apart without resampling. A pair cannot be
told apart when the 95 % percentile interval of the leader's figure minus the node's, over the
same stratified resamples of the same images, contains 0.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from engine.evaluation.heldout import load_labels
from engine.measures.uncertainty import N_RESAMPLES, Replicates, Strata, difference, replicates, shared_counts
from engine.session import selection
from engine.session import figure_text
from engine.session.state import NodeState, SessionState
from engine.task import GROUPS

METHOD = f"paired-bootstrap-{N_RESAMPLES}-v1"   # a tie: the 95 % interval of the difference contains 0

PredictionsOf = Callable[[int], "Mapping[str, float] | None"]


class Comparer:
    """Compares a session's nodes on one held-out split; replicates are kept per node."""

    def __init__(self, labels: Any, predictions_of: PredictionsOf, split: str = "validation"):
        frame = load_labels(labels)
        self.split = split
        self.files = frame["file"].tolist()
        names = [g for g in GROUPS if g in set(frame["group"])] + sorted(set(frame["group"]) - set(GROUPS))
        self.strata = Strata.of(frame["label"].to_numpy(), frame["group"].to_numpy(), names)
        self.predictions_of = predictions_of
        self._replicates: dict[int, Replicates | None] = {}

    def replicates(self, node_id: int) -> Replicates | None:
        if node_id not in self._replicates:
            self._replicates[node_id] = self._compute(node_id)
        return self._replicates[node_id]

    def forget(self, node_id: int) -> None:
        """A node re-evaluated (a revealed or re-sent evaluation): recompute it when asked."""
        self._replicates.pop(node_id, None)

    def _compute(self, node_id: int) -> Replicates | None:
        predictions = self.predictions_of(node_id)
        if not predictions or any(f not in predictions for f in self.files):
            return None
        scores = np.array([predictions[f] for f in self.files], dtype=float)
        return replicates(scores, self.strata, shared_counts(self.strata))

    def payload(self, state: SessionState) -> dict[str, Any]:
        """The `compared` event's payload for the state as it is now."""
        by = {criterion: self._compare(state, criterion, statistic)
              for criterion, statistic in selection.STATISTIC.items()}
        return {"split": self.split, "method": METHOD, "by": by}

    def _compare(self, state: SessionState, criterion: str, statistic: str) -> dict[str, Any]:
        leader = selection.best(state, criterion)
        out: dict[str, Any] = {"leader": leader.node_id if leader else None, "statistic": statistic,
                               "ties": [], "differences": []}
        lead = self.replicates(leader.node_id) if leader else None
        if leader is None or lead is None:
            return out
        pruned = state.pruned_ids()
        for node in sorted(state.nodes.values(), key=lambda n: n.node_id):
            if node.node_id == leader.node_id or not selection.is_candidate(node, pruned):
                continue
            if not _overlap(leader, node, statistic):
                continue
            other = self.replicates(node.node_id)
            ci = difference(lead, other, statistic) if other is not None else None
            if ci is None:
                continue
            if ci[0] <= 0.0 <= ci[1]:  # kept: the tied nodes' differences (the others are told apart)
                out["ties"].append(node.node_id)
                out["differences"].append({"node_id": node.node_id, "ci": [round(ci[0], 4), round(ci[1], 4)]})
        return out


def _overlap(a: NodeState, b: NodeState, statistic: str) -> bool:
    """Do the two nodes' intervals of a figure overlap? (Without intervals: compare them.)"""
    ia, ib = figure_text.interval(a.validation, statistic), figure_text.interval(b.validation, statistic)
    if ia is None or ib is None:
        return True
    return bool(ia[0] <= ib[1] and ib[0] <= ia[1])


def changed(previous: Mapping[str, Any] | None, payload: Mapping[str, Any]) -> bool:
    """Does a new comparison say something the last recorded one did not?"""
    return previous is None or previous.get("by") != payload.get("by")
