"""The held-out validation split: stratified by skin-tone group and label; the agent never sees it."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from engine.errors import DataError
from engine.task import fitzpatrick_to_group


def _columns(df: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(group or None per row, binary malignant label) for original or obfuscated column names."""
    if "fitzpatrick_scale" in df.columns and "three_partition_label" in df.columns:
        tone, part = df["fitzpatrick_scale"], df["three_partition_label"]
    elif "skin_tone" in df.columns and "label" in df.columns:
        tone, part = df["skin_tone"], df["label"]
    else:
        raise DataError("split needs fitzpatrick_scale and three_partition_label (or skin_tone and label)")
    group = tone.map(lambda s: fitzpatrick_to_group(s) if pd.notna(s) else None)
    return group, (part == "malignant").astype(int)


def stratified_validation_split(
    df: pd.DataFrame, fraction: float = 0.2, seed: int = 0
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(train, validation), disjoint, together all rows, each keeping the original index.

    Only rows with a known skin tone go to validation; within every (group, label) stratum a
    `fraction` share (rounded, at least one row when the stratum has two or more) is drawn with
    the seed. Rows of unknown skin tone all stay in train.
    """
    if not 0 < fraction < 1:
        raise DataError(f"the validation fraction must be between 0 and 1, not {fraction}")
    group, label = _columns(df)
    rng = np.random.default_rng(seed)
    val_idx: list[Any] = []
    strata = pd.DataFrame({"g": group, "y": label}, index=df.index).dropna(subset=["g"])
    for (_, _), rows in sorted(strata.groupby(["g", "y"]).groups.items()):
        rows = np.asarray(rows)
        k = int(round(fraction * len(rows)))
        if len(rows) >= 2:
            k = min(max(k, 1), len(rows) - 1)
        else:
            k = 0
        val_idx.extend(rng.choice(rows, size=k, replace=False).tolist())
    is_val = df.index.isin(val_idx)
    return df[~is_val].copy(), df[is_val].copy()
