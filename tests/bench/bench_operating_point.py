"""What the operating point costs per node (issue 34 B): choosing the cut-off on a node's validation
predictions and computing, per skin-tone group and pooled, the counts at it, the Brier score and
the calibration slope (engine.measures.operating_point), for 656 DDI-like images in 3 groups.

Reference, measured in the same run on the same predictions: today's interval time,
engine.measures.uncertainty.interval_fields for a later evaluation of a split (its resamples
drawn once and kept), the figure every node's evaluation pays already. The issue's budget: at
most 1.5x that. Also: reading the block back with its Wilson intervals (what every surface does
when it shows a node), against the same reference.
"""
from __future__ import annotations

from typing import Any

from tests.bench.bench_uncertainty import _ddi_like, _median_ms

GROUPS = ("group_0", "group_1", "group_2")


def run() -> list[dict[str, Any]]:
    from engine.measures import operating_point as op
    from engine.evaluation.metrics import compute_metrics
    from engine.measures.uncertainty import Strata, interval_fields, shared_counts

    y, s, g = _ddi_like()
    point = compute_metrics(y, s, g)
    strata = Strata.of(y, g, GROUPS)
    shared_counts(strata)
    intervals = _median_ms(lambda: interval_fields(s, strata, point), 15)
    setting = op.Setting.parse(op.DEFAULT)

    def compute() -> dict[str, Any]:
        threshold, _ = op.choose_threshold(setting, (y, s))
        return op.block(setting, threshold, y, s, g, GROUPS)

    computed = _median_ms(compute, 25)
    stored = {op.KEY: compute()}
    read = _median_ms(lambda: op.public(op.OperatingPoint.of(stored[op.KEY])), 25)
    return [
        {"name": "operating point of one node: 656 images, 3 groups (cut-off, counts, Brier, slope)",
         "value": computed, "unit": "ms", "reference": "interval_fields, later evaluation (today's interval time)",
         "ratio": computed / intervals,
         "note": f"budget: at most 1.5x today's interval time ({intervals:.1f} ms here)"},
        {"name": "operating point read back with its Wilson intervals (one split)", "value": read, "unit": "ms",
         "reference": "interval_fields, later evaluation (today's interval time)", "ratio": read / intervals},
    ]


if __name__ == "__main__":
    for row in run():
        print(row)
