"""A run's published predictions (DDI_file, predicted_probability), scored here with the product's
own scorer (engine.evaluation.heldout.score_predictions -> engine.evaluation.metrics), and the
`evaluated` event that puts the scores on the run's final node.

The event is a test-split evaluation like a live one, plus `source` (PUBLISHED_SOURCE: the
figures come from published predictions, measured here, not from running the node here) and
`predictions` (the file, its SHA-256 and its row count), so every surface can say where the
figures come from.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import DataError, UsageError
from engine.evaluation.metrics import MetricSet
from engine.evaluation.scoring import read_predictions

PUBLISHED_SOURCE = "published predictions, scored here"
PREDICTIONS_SUFFIX = "_DDI_predictions.csv"


@dataclass(frozen=True)
class ScoredPredictions:
    path: Path
    sha256: str
    rows: int
    metrics: MetricSet
    scores: dict[str, float]      # DDI_file -> probability, kept with the evaluation (intervals, comparisons)

    def medfair(self, prefix: str = "") -> dict[str, Any]:
        return self.metrics.medfair(prefix=prefix)


def published_scores(predictions: str | Path | None, metadata: str | Path | None) -> ScoredPredictions | None:
    """A run's published predictions scored (score_published), None when none are given; a
    UsageError when they are given without the metadata to score them against."""
    if predictions is None:
        return None
    if metadata is None:
        raise UsageError("scoring published predictions needs the DDI metadata (--metadata)")
    return score_published(predictions, metadata)


def score_published(predictions: str | Path, metadata: str | Path) -> ScoredPredictions:
    """Score a published predictions CSV against DDI-format metadata (every image must have one
    prediction in [0, 1]); a file that cannot be scored is a DataError naming it."""
    from engine.evaluation.heldout import score_predictions

    path = Path(predictions)
    preds = read_predictions(path)
    verdict, reason, metrics = score_predictions(preds, metadata)
    if metrics is None:
        raise DataError(f"cannot score {path}: {reason} [{verdict}]")
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    return ScoredPredictions(path=path, sha256=digest, rows=len(preds), metrics=metrics, scores=preds)


def evaluated_payload(node_id: int, scored: ScoredPredictions) -> dict[str, Any]:
    """The `evaluated` event (split test) carrying published predictions' scores."""
    return {
        "node_id": node_id, "split": "test", "ok": True, "verdict": "ok", "reason": None,
        "summary": scored.metrics.summary(), "medfair": scored.medfair(), "blinded": False,
        "source": PUBLISHED_SOURCE,
        "predictions": {"path": str(scored.path), "sha256": scored.sha256, "rows": scored.rows},
    }


def predictions_for(folder: Path, run_name: str) -> Path | None:
    """`<run>_DDI_predictions.csv` in a run's evaluation folder (the study's naming), else the
    only *_DDI_predictions.csv there; None when there is none."""
    named = folder / f"{run_name}{PREDICTIONS_SUFFIX}"
    if named.is_file():
        return named
    found = sorted(folder.glob(f"*{PREDICTIONS_SUFFIX}")) if folder.is_dir() else []
    return found[0] if len(found) == 1 else None
