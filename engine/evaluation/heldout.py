"""The held-out labels and scoring a node's predictions against them.

`load_labels` reads the workspace format or DDI metadata and refuses anything else with a
DataError naming the offending lines; `score_predictions` turns predictions into a verdict and,
when they are sound, the metrics. Labels never leave this process (see engine.evaluation.harness).
"""
from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from engine.data.common import read_csv
from engine.errors import DataError
from engine.evaluation.harness_worker import normalise
from engine.evaluation.metrics import MetricSet, compute_metrics
from engine.task import DDI_SKIN_TONE_TO_GROUP


def load_labels(labels: str | os.PathLike[str] | pd.DataFrame) -> pd.DataFrame:
    """Held-out labels as a DataFrame (file, label 0/1, group).

    Accepts the workspace format (file,label,group[,skin_tone]) and DDI metadata
    (DDI_file,skin_tone,malignant). Anything else, and empty or unknown cells, are a DataError
    naming the file and the offending lines (rows, for a DataFrame).
    """
    if isinstance(labels, pd.DataFrame):
        table = _LabelTable(labels.reset_index(drop=True), "labels", 1, "row")
    else:  # line 1 is the header
        table = _LabelTable(read_csv(labels, "labels").reset_index(drop=True), str(labels), 2, "line")
    df, where, lines, values = table.df, table.where, table.lines, table.values
    file_col, label_col, group = _file_label_group(table)
    files = table.text(file_col)
    if (files == "").any():
        raise DataError(f"{where}: empty {file_col} cell on {lines(files == '')}")
    lab = df[label_col].map(_label)
    bad = lab.isna()
    if bad.any():
        raise DataError(f"{where}: {label_col} must be 0/1 (or True/False); found "
                        f"{values(df[label_col].map(lambda v: '' if _missing(v) else v), bad)} on {lines(bad)}")
    out = pd.DataFrame({"file": files.astype(str), "label": lab.astype(int), "group": group.astype(str)})
    dup = out["file"].duplicated()
    if dup.any():
        raise DataError(f"{where}: duplicate file names {values(out['file'], dup)} on {lines(dup)}")
    return out.reset_index(drop=True)


@dataclass(frozen=True)
class _LabelTable:
    """A labels table being read: where it came from, and how its lines are named in errors."""

    df: pd.DataFrame
    where: str
    first: int  # the number of the table's first data line (or row)
    unit: str  # "line" (a file) or "row" (a DataFrame)

    def text(self, column: str) -> pd.Series:
        return self.df[column].map(lambda v: "" if _missing(v) else str(v).strip())

    def lines(self, mask: pd.Series) -> str:
        idx = [int(i) + self.first for i in self.df.index[mask.to_numpy(dtype=bool)]]
        shown = ", ".join(map(str, idx[:5])) + (f" and {len(idx) - 5} more" if len(idx) > 5 else "")
        return f"{self.unit}{'s' if len(idx) > 1 else ''} {shown}"

    @staticmethod
    def values(series: pd.Series, mask: pd.Series) -> str:
        vals = sorted({str(v)[:40] for v in series[mask.to_numpy(dtype=bool)]})
        return ", ".join(repr(v) for v in vals[:5]) + (" …" if len(vals) > 5 else "")


def _file_label_group(table: _LabelTable) -> tuple[str, str, pd.Series]:
    """(file column, label column, group per row) of the workspace or the DDI format."""
    cols = set(table.df.columns)
    where, lines = table.where, table.lines
    if {"file", "label", "group"} <= cols:
        group = table.text("group")
        if (group == "").any():
            raise DataError(f"{where}: empty group cell on {lines(group == '')}")
        return "file", "label", group
    if {"DDI_file", "malignant", "skin_tone"} <= cols:
        tone_text = table.text("skin_tone")
        if (tone_text == "").any():
            raise DataError(f"{where}: empty skin_tone cell on {lines(tone_text == '')} (expected 12, 34 or 56)")
        tones = pd.to_numeric(tone_text, errors="coerce")
        unknown = ~tones.isin(list(DDI_SKIN_TONE_TO_GROUP))
        if unknown.any():
            raise DataError(f"{where}: unknown skin_tone value(s) {table.values(tone_text, unknown)} on "
                            f"{lines(unknown)} (expected 12, 34, 56)")
        return "DDI_file", "malignant", tones.astype(int).map(DDI_SKIN_TONE_TO_GROUP).astype(str)
    raise DataError(
        f"{where}: expected columns file,label,group (workspace) or DDI_file,malignant,skin_tone "
        f"(DDI); found {', '.join(map(str, table.df.columns))}"
    )


def _missing(v: Any) -> bool:
    try:
        return v is None or bool(pd.isna(v)) or (isinstance(v, str) and not v.strip())
    except (TypeError, ValueError):
        return False


_LABEL_WORDS = {"true": 1, "false": 0, "1": 1, "0": 0, "malignant": 1, "benign": 0, "1.0": 1, "0.0": 0}


def _label(v: Any) -> int | None:
    if _missing(v):
        return None
    if isinstance(v, (bool, np.bool_)):
        return int(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        return int(v) if v in (0, 1) else None
    return _LABEL_WORDS.get(str(v).strip().lower())


def _names(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def score_predictions(
    predictions: Mapping[str, Any] | pd.DataFrame, labels_csv: str | os.PathLike[str] | pd.DataFrame
) -> tuple[str, str | None, MetricSet | None]:
    """(verdict, reason, metrics) for predictions against held-out labels; never raises on bad
    predictions (bad labels are a DataError: that is the engine's problem, not the node's)."""
    labels = load_labels(labels_csv)
    verdict, reason, preds = normalise(predictions)
    if verdict != "ok" or preds is None:
        return verdict, reason, None
    expected = set(labels["file"])
    missing = sorted(expected - set(preds))
    extra = sorted(set(preds) - expected)
    if extra:
        also = f"; {len(missing)} held-out image(s) have none" if missing else ""
        return "extra_files", f"{len(extra)} prediction(s) for unknown images ({_names(extra)}){also}", None
    if missing:
        return "missing_files", f"no prediction for {len(missing)} of {len(expected)} images ({_names(missing)})", None
    scores = [preds[f] for f in labels["file"]]
    nan = [f for f, s in zip(labels["file"], scores, strict=True) if math.isnan(s)]
    if nan:
        return "nan", f"{len(nan)} prediction(s) are NaN ({_names(nan)})", None
    bad = [f for f, s in zip(labels["file"], scores, strict=True) if not 0.0 <= s <= 1.0]
    if bad:
        example = preds[sorted(bad)[0]]
        return "out_of_range", f"{len(bad)} prediction(s) outside [0, 1] (e.g. {sorted(bad)[0]}: {example:.4g})", None
    return "ok", None, compute_metrics(labels["label"].to_numpy(), scores, labels["group"].tolist(), intervals=True)
