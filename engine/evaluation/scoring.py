"""Scoring a published predictions file (DDI_file, predicted_probability) against DDI-format
metadata with the product's own scorer: `befair score` and the importers of published runs."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.errors import DataError


def read_predictions(path: str | Path) -> dict[str, float]:
    """DDI_file -> predicted_probability, with clear errors for malformed files."""
    import pandas as pd

    from engine.data.common import read_csv

    df = read_csv(path, "predictions")
    missing = [c for c in ("DDI_file", "predicted_probability") if c not in df.columns]
    if missing:
        raise DataError(
            f"{path}: missing column(s) {', '.join(missing)} (found {', '.join(map(str, df.columns))})"
        )
    probs = pd.to_numeric(df["predicted_probability"], errors="coerce")
    bad = df.loc[probs.isna(), "DDI_file"].astype(str).tolist()
    if bad:
        raise DataError(f"{path}: {len(bad)} prediction(s) are NaN or not numbers (e.g. {bad[0]})")
    files = df["DDI_file"].astype(str)
    if files.duplicated().any():
        raise DataError(f"{path}: duplicate DDI_file {files[files.duplicated()].iloc[0]}")
    return dict(zip(files, probs.astype(float), strict=True))


def score_file(predictions: str | Path, metadata: str | Path) -> dict[str, Any]:
    from engine.evaluation.heldout import score_predictions

    preds = read_predictions(predictions)
    verdict, reason, metrics = score_predictions(preds, metadata)
    if metrics is None:
        raise DataError(f"cannot score {predictions}: {reason} [{verdict}]")
    return metrics.medfair(prefix="Test ")
