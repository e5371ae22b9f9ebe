"""A study's aggregated table: mean, std and a 95 % interval per agent × instruction level.

The shape is the "Be Fair!" study's aggregated MEDFAIR table
(``evaluation/MEDFAIR_evaluations/AIDE_MLZero_Baseline_Human_aggregated.csv`` in
anna-richter/be-fair): one row per (statistic, model, prompt) with the 42 numeric test metrics as
columns, statistics in the order mean, std, ci95_hi, ci95_lo. Checked against that table's AIDE
basic_prompt rows: std is the sample standard deviation (ddof=1) and the interval is
mean ± 1.96·std/√n (a normal approximation, not Student's t).

A metric missing from a session (None or NaN, e.g. a group AUC on a single-class group) is left
out of that metric's statistics, as pandas does; n is then the number of sessions that have it.
With one value the std and the interval are None.
"""
from __future__ import annotations

import csv
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

MODEL = "model"
PROMPT = "prompt"
STATISTIC = "statistic"

# The study's statistic spellings, in its row order.
MEAN, STD, CI95_HI, CI95_LO = "mean", "std", "ci95_hi", "ci95_lo"
STATISTICS: tuple[str, ...] = (MEAN, STD, CI95_HI, CI95_LO)
Z95 = 1.96

TEST_PREFIX = "Test "

# The study's metric columns, in its order (MetricSet.medfair() minus worst_group/best_group, which
# are names, not numbers), each prefixed with the split.
METRIC_COLUMNS: list[str] = [TEST_PREFIX + name for name in (
    "Overall AUC", "Overall Acc",
    "acc-group_0", "auc-group_0", "acc-group_1", "auc-group_1", "acc-group_2", "auc-group_2",
    "Overall ECE", "Overall BCE",
    "tpr_at_tnr_0", "fnr_at_thres-group_0", "fpr_at_thres-group_0", "recall_at_thres-group_0",
    "specificity_at_thres-group_0", "ECE-group_0", "BCE-group_0",
    "tpr_at_tnr_1", "fnr_at_thres-group_1", "fpr_at_thres-group_1", "recall_at_thres-group_1",
    "specificity_at_thres-group_1", "ECE-group_1", "BCE-group_1",
    "tpr_at_tnr_2", "fnr_at_thres-group_2", "fpr_at_thres-group_2", "recall_at_thres-group_2",
    "specificity_at_thres-group_2", "ECE-group_2", "BCE-group_2",
    "worst_auc", "best_auc", "auc_gap",
    "Overall FPR", "Overall FNR",
    "FPR-group_0", "FPR-group_1", "FPR-group_2",
    "FNR-group_0", "FNR-group_1", "FNR-group_2",
)]

# The two columns Figure 2 plots.
OVERALL_AUC = TEST_PREFIX + "Overall AUC"
AUC_GAP = TEST_PREFIX + "auc_gap"


def _number(value: Any, column: str) -> float | None:
    if value is None or value == "":
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"{column}: {value!r} is not a number") from None
    return None if math.isnan(x) else x


def describe(values: Sequence[float]) -> dict[str, float | None]:
    """mean, sample std (ddof=1) and mean ∓ 1.96·std/√n of the values (None where undefined)."""
    n = len(values)
    if n == 0:
        return {MEAN: None, STD: None, CI95_HI: None, CI95_LO: None}
    mean = math.fsum(values) / n
    if n < 2:
        return {MEAN: mean, STD: None, CI95_HI: None, CI95_LO: None}
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (n - 1))
    half = Z95 * std / math.sqrt(n)
    return {MEAN: mean, STD: std, CI95_HI: mean + half, CI95_LO: mean - half}


def _groups(rows: Iterable[Mapping[str, Any]], prompt_order: Sequence[str] | None
            ) -> list[tuple[tuple[str, str], list[Mapping[str, Any]]]]:
    """Rows per (model, prompt): models in order of first appearance; prompts in `prompt_order`
    (others after it, sorted) or, by default, sorted, as the study's table has them."""
    by_key: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    models: list[str] = []
    for row in rows:
        model, prompt = str(row[MODEL]), str(row[PROMPT])
        if model not in models:
            models.append(model)
        by_key.setdefault((model, prompt), []).append(row)
    rank = {p: i for i, p in enumerate(prompt_order or ())}

    def prompt_key(prompt: str) -> tuple[int, str]:
        return (rank.get(prompt, len(rank)), prompt)

    keys = sorted(by_key, key=lambda k: (models.index(k[0]), prompt_key(k[1])))
    return [(k, by_key[k]) for k in keys]


def aggregate(rows: Iterable[Mapping[str, Any]], *, metrics: Sequence[str] = METRIC_COLUMNS,
              prompt_order: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The long aggregated table from one row per session (its final choice's test metrics).

    Each input row has "model", "prompt" and the metric columns (missing, None or NaN where a
    session has no value). Returns, per (model, prompt), four rows "statistic", "model",
    "prompt", <metrics> in the order mean, std, ci95_hi, ci95_lo.
    """
    table: list[dict[str, Any]] = []
    for (model, prompt), members in _groups(rows, prompt_order):
        per_metric: dict[str, dict[str, float | None]] = {}
        for column in metrics:
            values = [x for r in members if (x := _number(r.get(column), column)) is not None]
            per_metric[column] = describe(values)
        for statistic in STATISTICS:
            out: dict[str, Any] = {STATISTIC: statistic, MODEL: model, PROMPT: prompt}
            out.update({column: per_metric[column][statistic] for column in metrics})
            table.append(out)
    return table


def sizes(rows: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """How many sessions each (model, prompt) has."""
    counts: dict[tuple[str, str], int] = {}
    for row in rows:
        key = (str(row[MODEL]), str(row[PROMPT]))
        counts[key] = counts.get(key, 0) + 1
    return counts


def statistic(table: Iterable[Mapping[str, Any]], model: str, prompt: str, name: str,
              column: str) -> float | None:
    """One cell of an aggregated table (None when absent)."""
    for row in table:
        if row[STATISTIC] == name and row[MODEL] == model and row[PROMPT] == prompt:
            value = row.get(column)
            return None if value is None else float(value)
    return None


def write_csv(table: Sequence[Mapping[str, Any]], path: str | Path, *,
              metrics: Sequence[str] = METRIC_COLUMNS, index: bool = True) -> Path:
    """The table as the study's CSV: an unnamed index column (pandas' to_csv), then statistic,
    model, prompt and the metrics; floats as Python's shortest round-trip repr, None empty."""
    target = Path(path)
    header = [STATISTIC, MODEL, PROMPT, *metrics]
    with target.open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(([""] if index else []) + header)
        for i, row in enumerate(table):
            cells = ["" if row.get(c) is None else repr(row[c]) if isinstance(row[c], float) else str(row[c])
                     for c in header]
            writer.writerow(([str(i)] if index else []) + cells)
    return target
