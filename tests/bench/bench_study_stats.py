"""What a study's statistics cost (issue 34 C): the within-participant analysis of a study with
people (engine.study.within: the mixed model and the paired differences of every measure) and
planning its size by simulation (engine.study.plan).

Synthetic sessions with a known structure: 24 participants (half dermatologists) × 4 levels, a
participant's own level (sd .03), a level effect of up to .06 and noise (sd .045, the published
AIDE runs' spread of the gap). The plan: runs per level for a .05 gap difference from that
spread, 6 pairs of levels (Holm's strictest step), 4,000 simulated studies per size.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

LEVELS = ["base", "fairness-hint", "fairness-metric", "fairness-methods"]


def _rows(participants: int = 24, seed: int = 0) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(participants):
        own, role = rng.normal(0, 0.03), ("dermatologist" if i % 2 else "data scientist")
        for j, level in enumerate(LEVELS):
            rows.append({"participant": f"p{i:02d}", "role": role, "level": level, "excluded": None,
                         "test_auc": 0.6 + own + 0.02 * j + rng.normal(0, 0.035),
                         "test_auc_gap": 0.15 + own - 0.02 * j + rng.normal(0, 0.045),
                         "test_sensitivity_dark": 0.8 + rng.normal(0, 0.05)})
    return rows


def run() -> list[dict[str, Any]]:
    from engine.study import plan
    from engine.study.within import analyse

    rows = _rows()
    times = []
    for _ in range(3):
        start = time.perf_counter()
        result = analyse(rows, level_order=LEVELS, group_order=["data scientist", "dermatologist"])
        times.append(time.perf_counter() - start)
    fitted = sum(m["model"]["fitted"] for m in result["measures"])
    residuals = list(np.random.default_rng(1).normal(0, 0.045, 27))
    spread = plan.Spread("gap", "runs", "synthetic", residuals, 4, 27)
    start = time.perf_counter()
    _, plans = plan.plan(spread, [(0.05, "a .05 difference")], within=False, pairs=6)
    planned = time.perf_counter() - start
    return [
        {"name": "within-participant analysis: 24 participants x 4 levels, 3 measures (mixed model + paired, Holm)",
         "value": round(1000 * float(np.median(times)), 1), "unit": "ms",
         "note": f"median of 3; {fitted} of 3 models fitted"},
        {"name": "study plan: runs per level for a .05 gap difference (sd .045, 6 pairs, 4000 simulations a size)",
         "value": round(planned, 2), "unit": "s", "note": f"answer: {plans[0].n} runs per level"},
    ]
