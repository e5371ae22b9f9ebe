"""How often the operating point's 95 % intervals hold the truth, by simulation (issue 34 B).

    .venv/bin/python -m tests.operating_point_coverage [--reps 1000]

Each repetition draws a validation split (a 20 % split of SynthDerm's default training data:
about 120/100/80 images per skin-tone group, 26 % malignant) and a DDI-sized test split
(208/241/207 images, 49/74/48 malignant) from binormal scores squashed by an overconfident logistic
(the model's probabilities are twice too extreme, and its ranking is worst on dark skin). The cut-off
is chosen on validation (sensitivity 0.90, all groups pooled), as befair does, and the test
figures' intervals are checked against the truth at that cut-off: sensitivity and specificity
exactly (binormal tails), Brier score and calibration slope from 200,000 fresh images per group.
"""
from __future__ import annotations

import argparse
import math
from statistics import NormalDist

import numpy as np

from engine.measures import operating_point as op

GROUPS = ("group_0", "group_1", "group_2")
SEPARATION = {"group_0": 1.6, "group_1": 1.4, "group_2": 0.8}
VALIDATION = {"group_0": (120, 31), "group_1": (100, 26), "group_2": (80, 21)}
TEST = {"group_0": (208, 49), "group_1": (241, 74), "group_2": (207, 48)}
SCALE, SHIFT = 2.0, 1.0   # probability = expit(SCALE * (score - SHIFT))
_N = NormalDist()


def _draw(rng: np.random.Generator, sizes: dict[str, tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y, s, g = [], [], []
    for group, (n, k) in sizes.items():
        y.append(np.r_[np.ones(k, int), np.zeros(n - k, int)])
        s.append(np.r_[rng.normal(SEPARATION[group], 1, k), rng.normal(0, 1, n - k)])
        g.append(np.full(n, group, dtype=object))
    score = np.concatenate(s)
    return np.concatenate(y), 1 / (1 + np.exp(-SCALE * (score - SHIFT))), np.concatenate(g)


def _true_rates(threshold: float, group: str) -> tuple[float, float]:
    """(sensitivity, specificity) of a group at the cut-off, from the binormal tails."""
    cut = SHIFT + math.log(threshold / (1 - threshold)) / SCALE
    return 1 - _N.cdf(cut - SEPARATION[group]), _N.cdf(cut)


def _true_calibration(rng: np.random.Generator) -> dict[str, tuple[float, float]]:
    """(Brier, calibration slope) per group at the test composition, from 200,000 fresh images."""
    out = {}
    for group, (n, k) in TEST.items():
        big = {group: (200_000, round(200_000 * k / n))}
        y, p, _ = _draw(rng, big)
        slope = op.calibration_slope(y, p)
        out[group] = (float(np.mean((p - y) ** 2)), slope[0] if slope else float("nan"))
    return out


def coverage(reps: int, seed: int = 0) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    truth = _true_calibration(rng)
    hits = {g: dict.fromkeys(("sensitivity", "specificity", "brier", "slope"), 0) for g in GROUPS}
    counted = {g: dict.fromkeys(hits[g], 0) for g in GROUPS}
    setting = op.Setting.parse(op.DEFAULT)
    for _ in range(reps):
        vy, vs, _ = _draw(rng, VALIDATION)
        threshold, _ = op.choose_threshold(setting, (vy, vs))
        ty, ts, tg = _draw(rng, TEST)
        point = op.OperatingPoint.of(op.block(setting, threshold, ty, ts, tg, GROUPS))
        for group in GROUPS:
            found = point.group(group)
            sensitivity, specificity = _true_rates(threshold, group)
            brier, slope = truth[group]
            for name, ci, true in (("sensitivity", found.sensitivity[1], sensitivity),
                                   ("specificity", found.specificity[1], specificity),
                                   ("brier", found.brier[1:] if found.brier else None, brier),
                                   ("slope", found.slope[1:] if found.slope else None, slope)):
                if ci is None:
                    continue
                counted[group][name] += 1
                hits[group][name] += int(ci[0] - 1e-9 <= true <= ci[1] + 1e-9)
    return {g: {k: hits[g][k] / counted[g][k] for k in hits[g] if counted[g][k]} for g in GROUPS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=1000)
    args = parser.parse_args()
    table = coverage(args.reps)
    print(f"coverage of the 95 % intervals on test, {args.reps} repetitions (cut-off chosen on validation)")
    print(f"{'group':<10}" + "".join(f"{k:>13}" for k in ("sensitivity", "specificity", "brier", "slope")))
    for group, row in table.items():
        print(f"{group:<10}" + "".join(f"{row.get(k, float('nan')):>13.3f}"
                                      for k in ("sensitivity", "specificity", "brier", "slope")))


if __name__ == "__main__":
    main()
