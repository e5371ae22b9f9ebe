"""The store's kept predictions and sealed figures: what a node predicted for each image, and the
blinded test evaluations' figures kept apart until revealed (engine.session.sealed)."""
from __future__ import annotations

import json
from typing import Any

from engine.session.store.connection import StoreConnection
from engine.session.store.rows import unpacked_scores


class PredictionRows(StoreConnection):
    """Reading the `predictions` and `sealed_metrics` tables (the writer writes them)."""

    def predictions(self, session_id: str, node_id: int, split: str, *,
                    unblind: bool = False) -> dict[str, float] | None:
        """A node's latest kept predictions on a split ({image file: probability}); a blinded test
        evaluation's only with `unblind` until revealed. None when none were kept."""
        row = self.db.conn.execute(
            "select f.files, p.scores from predictions p join prediction_files f on f.session_id = p.session_id "
            "and f.files_sha256 = p.files_sha256 where p.session_id = ? and p.node_id = ? and p.split = ? "
            "order by p.seq desc limit 1", [session_id, int(node_id), split]).fetchone()
        if row is not None:
            return unpacked_scores(row[0], row[1])
        sealed = self.sealed_predictions(session_id, node_id, split) if unblind else None
        return {str(k): float(v) for k, v in json.loads(sealed).items()} if sealed is not None else None

    def sealed_predictions(self, session_id: str, node_id: int, split: str) -> str | None:
        """The predictions (JSON) sealed with a node's latest unrevealed evaluation on a split (a
        researcher's --unblind); None when none were sealed."""
        row = self.db.conn.execute(
            "select json_extract(payload, '$.predictions') from sealed_metrics where session_id = ? and node_id = ? "
            "and split = ? and revealed_seq is null and json_extract(payload, '$.predictions') is not null "
            "order by seq desc limit 1", [session_id, int(node_id), split]).fetchone()
        return str(row[0]) if row is not None else None

    def sealed_figures(self, session_id: str) -> dict[int, dict[str, Any]]:
        """{event seq: the figures sealed from it} of every sealed evaluation of the session."""
        return {int(seq): json.loads(payload) for seq, payload in self.db.conn.execute(
            "select seq, payload from sealed_metrics where session_id = ?", [session_id])}
