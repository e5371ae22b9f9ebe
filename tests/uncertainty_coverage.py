"""Do the 95 % intervals cover the truth? SynthDerm has one: fresh images from the same generator.

    python -m tests.uncertainty_coverage [--steps 8] [--draws 40] [--out FILE.json]

1. A small session (300 training / 120 test images at 32 px, the offline coder, the real runner
   and sandbox) gives real nodes, each a trained pipeline with its `predict()`.
2. Truth: each node's predict() on a large fresh set from the generator with other seeds (test
   format: DDI's composition; training format: the validation population, every row of known
   skin tone, malignant = three_partition_label "malignant").
3. Draws: disjoint fresh sets of the session's own size and composition (the test split's and the
   validation split's (group x label) counts), from another fresh pool. Each draw's intervals
   (engine.measures.uncertainty, as every evaluation computes them) either cover the node's
   true figure or not.

4. Small true gaps: the session's nodes rarely have a true gap under .03, so each node also gives
   "levelled" pipelines (`levelled`): its predict() followed by seeded per-image noise on the
   logit scale of the lighter groups' scores, strong enough that their true AUCs come down to the
   worst group's plus a target (true gaps 0, .02, .05). The noise is a fixed function of the image
   (drawn once per pool row), so a levelled pipeline's truth is measured like any node's.

`coverage(...)` returns one row per figure (AUC, each group's AUC, worst-group AUC, gap; per
split), with the pairs counted, the share covered, and the median interval width, and `bands`:
the gap's and the signed differences' (dark − light, dark − medium) coverage by band of true gap
(under .03, .03–.08, over .08). The slow test tests/unit/test_uncertainty_coverage.py asserts on
it; this module's main prints the tables.

`binormal_coverage(...)` is the fast simulation the gap's method was chosen on: binormal scores
per group with a split's composition, group AUCs .90, .90 − gap/2, .90 − gap
(`python -m tests.uncertainty_coverage --binormal`).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

TRAIN, TEST, SIZE = 300, 120, 32
TRUTH_SEED, DRAW_SEED = 9001, 9002
FIGURES = ("auc", "worst_auc", "auc_gap", "group_0", "group_1", "group_2")
LEVELLED_GAPS = (0.0, 0.02, 0.05)            # the levelled pipelines' target true gaps
BANDS = ((0.0, 0.03, "under .03"), (0.03, 0.08, ".03–.08"), (0.08, 1.01, "over .08"))
BAND_FIGURES = ("auc_gap", "dark − light", "dark − medium", "medium − light")
BINORMAL_GAPS = (0.0, 0.01, 0.03, 0.05, 0.08, 0.12, 0.2)
DDI_TEST = {"group_0": (208, 49), "group_1": (241, 74), "group_2": (207, 48)}   # the default test split


@dataclass
class Tally:
    covered: int = 0
    pairs: int = 0
    widths: list[float] = field(default_factory=list)
    tiny_truth: int = 0        # gap only: pairs whose true gap is under .03

    def add(self, truth: float, ci: list[float] | None) -> None:
        if ci is None:
            return
        self.pairs += 1
        self.covered += int(ci[0] <= truth <= ci[1])
        self.widths.append(ci[1] - ci[0])

    def row(self, split: str, figure: str) -> dict[str, Any]:
        return {"split": split, "figure": figure, "pairs": self.pairs,
                "coverage": round(self.covered / self.pairs, 4) if self.pairs else None,
                "median_width": round(statistics.median(self.widths), 4) if self.widths else None}


def session_nodes(root: Path, steps: int) -> tuple[list[Path], Any]:
    """Run a small offline session; returns the working nodes' folders and the workspace."""
    from engine.agent.runner import run
    from engine.agent.session_config import SessionConfig
    from engine.agent.session_setup import start_session
    from engine.coders.offline import OfflineCoder
    from engine.data.agent_workspace import synth_workspace
    from engine.session.store import SessionStore

    ws = synth_workspace(seed=0, n_train=TRAIN, n_test=TEST, size=SIZE, root=root / "data")
    store = SessionStore(root / "coverage.db")
    config = SessionConfig(level="fairness-metric", steps=steps, seed=0, failure_rate=0.0, data=str(ws.root),
                           step_timeout=300, num_drafts=min(5, steps))
    coder = OfflineCoder(failure_rate=0.0, seed=0, device="cpu", step_timeout=300)
    writer = start_session(store, config, workspace=ws, coder=coder)
    state = run(store, writer.session_id, coder=coder, workspace=ws, writer=writer)
    store.close()
    nodes = [Path(n.workdir) for n in state.nodes.values()
             if n.status == "ok" and n.validation and n.workdir and (Path(n.workdir) / "solution.py").is_file()]
    return nodes, ws


def test_format_pool(root: Path, seed: int, n: int) -> tuple[Path, pd.DataFrame]:
    """A fresh DDI-format set: its images folder and labels (file, label, group)."""
    from engine.data.synth import generate
    from engine.evaluation.heldout import load_labels

    paths = generate(root, seed=seed, n_train=21, n_test=n, size=SIZE)
    return paths.test_images, load_labels(paths.test_csv)


def train_format_pool(root: Path, seed: int, n: int) -> tuple[Path, pd.DataFrame]:
    """A fresh Fitzpatrick17k-format set as a validation population: rows of known skin tone."""
    from engine.data.synth import generate
    from engine.task import fitzpatrick_to_group

    paths = generate(root, seed=seed, n_train=n, n_test=18, size=SIZE)
    rows = pd.read_csv(paths.train_csv)
    rows = rows[rows["fitzpatrick_scale"].isin([1, 2, 3, 4, 5, 6])]
    labels = pd.DataFrame({"file": rows["md5hash"] + ".jpg",
                           "label": (rows["three_partition_label"] == "malignant").astype(int),
                           "group": [fitzpatrick_to_group(s) for s in rows["fitzpatrick_scale"]]})
    known = root / "known-skin-tone"   # the validation population: only rows of known skin tone
    known.mkdir()
    for name in labels["file"]:
        os.link(paths.train_images / name, known / name)
    return known, labels.reset_index(drop=True)


def draws(labels: pd.DataFrame, composition: dict[tuple[str, int], int], seed: int = 0) -> list[np.ndarray]:
    """Disjoint index sets of `labels`, each with `composition` images per (group, label) cell."""
    rng = np.random.default_rng(seed)
    cells = {key: rng.permutation(np.flatnonzero((labels["group"] == key[0]) & (labels["label"] == key[1])))
             for key in composition}
    n = min(len(cells[key]) // k for key, k in composition.items() if k)
    return [np.concatenate([cells[key][i * k:(i + 1) * k] for key, k in composition.items()]) for i in range(n)]


def composition(labels: pd.DataFrame) -> dict[tuple[str, int], int]:
    return {(str(g), int(y)): int(n) for (g, y), n in labels.groupby(["group", "label"]).size().items()}


def predictions(node: Path, images: Path, labels: pd.DataFrame) -> np.ndarray:
    """The node's predict() on the images (sandboxed, as the harness runs it), in labels' order."""
    from engine.evaluation.harness import evaluate
    from engine.execution.sandbox import Sandbox

    outcome = evaluate(node, node / "solution.py", images, labels, timeout=1200, sandbox=Sandbox.create("auto"))
    if not outcome.ok:
        raise RuntimeError(f"{node}: {outcome.verdict} {outcome.reason}")
    return np.array([outcome.predictions[f] for f in labels["file"]], dtype=float)


def _figures(summary: dict[str, Any]) -> dict[str, float | None]:
    out: dict[str, float | None] = {k: summary.get(k) for k in ("auc", "worst_auc", "auc_gap")}
    out.update(dict(summary.get("group_auc") or {}))
    return out


def _interval(summary: dict[str, Any], figure: str) -> list[float] | None:
    from engine.measures.summary import EvaluationSummary
    from engine.session.figure_text import interval

    return interval(EvaluationSummary.from_payload(summary), figure)


def band(true_gap: float) -> str:
    return next(name for lo, hi, name in BANDS if lo <= true_gap < hi)


def signed_truth(truth: dict[str, float | None]) -> dict[str, float]:
    """The true signed differences (dark − light, dark − medium) where both groups have an AUC."""
    from engine.measures.uncertainty import SIGNED_PAIRS

    return {words: float(truth[a]) - float(truth[b])  # type: ignore[arg-type]
            for (a, b), words in SIGNED_PAIRS if truth.get(a) is not None and truth.get(b) is not None}


def banded(summary: dict[str, Any], truth: dict[str, float | None], tallies: dict[str, Tally]) -> None:
    """Count one draw's gap and signed-difference intervals against the truth (`tallies`: the
    band's, by figure)."""
    from engine.measures.summary import EvaluationSummary
    from engine.session.views.group_tests import signed as stored_signed

    signed = {d.pair: [d.low, d.high] for d in stored_signed(EvaluationSummary.from_payload(summary))}
    tallies["auc_gap"].add(float(truth["auc_gap"]), _interval(summary, "auc_gap"))  # type: ignore[arg-type]
    for words, true in signed_truth(truth).items():
        tallies[words].add(true, signed.get(words))


def tally(scores: np.ndarray, labels: pd.DataFrame, truth: dict[str, float | None],
          index_sets: Iterable[np.ndarray], tallies: dict[str, Tally] | None,
          band_tallies: dict[str, Tally] | None = None) -> list[dict[str, Any]]:
    """Count each draw's intervals against the truth (`tallies`, by figure; `band_tallies`: the gap's
    and the signed differences' in the true gap's band); returns, per figure, how the draws'
    estimates spread around the truth beside the intervals' half-width (why a coverage is what it is)."""
    from engine.evaluation.metrics import compute_metrics

    seen: dict[str, list[tuple[float, float]]] = {f: [] for f in FIGURES}
    for idx in index_sets:
        part = labels.iloc[idx]
        summary = compute_metrics(part["label"].to_numpy(), scores[idx], part["group"].to_numpy(),
                                  intervals=True).summary()
        if band_tallies is not None and truth.get("auc_gap") is not None:
            banded(summary, truth, band_tallies)
        if tallies is None:
            continue
        figures = _figures(summary)
        for figure in FIGURES:
            true, ci = truth.get(figure), _interval(summary, figure)
            if true is None:
                continue
            tallies[figure].add(float(true), ci)
            if figure == "auc_gap" and float(true) < 0.03:
                tallies[figure].tiny_truth += 1
            if ci is not None and figures.get(figure) is not None:
                seen[figure].append((float(figures[figure]), (ci[1] - ci[0]) / 2))  # type: ignore[arg-type]
    return [{"figure": f, "truth": truth.get(f), "mean_estimate": statistics.fmean(e for e, _ in v),
             "sd_estimate": statistics.stdev(e for e, _ in v) if len(v) > 1 else None,
             "mean_half_width": statistics.fmean(h for _, h in v)} for f, v in seen.items() if v]


def _default_compositions() -> dict[str, dict[tuple[str, int], int]]:
    """The product's default SynthDerm (2,000 training / 656 test images): its splits' cells."""
    from engine.evaluation.adequacy import synth_counts

    out = {}
    for split, groups in synth_counts(2000, 656).items():
        out[split] = {cell: k for group, (n, malignant) in groups.items()
                      for cell, k in (((group, 1), malignant), ((group, 0), n - malignant))}
    return out


def _logit(scores: np.ndarray) -> np.ndarray:
    p = np.clip(scores, 1e-6, 1 - 1e-6)
    return np.log(p / (1 - p))


def _noise_for_auc(logits: np.ndarray, labels: np.ndarray, noise: np.ndarray, want: float) -> float:
    """The noise strength that brings these images' AUC down to `want` (bisection; AUC falls as
    the noise grows)."""
    from engine.evaluation.metrics import auc

    lo, hi = 0.0, 30.0
    for _ in range(30):
        mid = (lo + hi) / 2
        if (auc(labels, logits + mid * noise) or 0.5) > want:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def levelled(truth_scores: np.ndarray, truth_labels: pd.DataFrame, draw_scores: np.ndarray,
             draw_labels: pd.DataFrame, seed: int) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """A node's levelled pipelines: (name, truth scores, draw scores) for each target true gap in
    LEVELLED_GAPS. Every group above worst + target gets seeded per-image noise on its logits until
    its true AUC is worst + target (noise cannot take an AUC below .5); the noise is drawn once per
    pool row (a fixed function of the image). A target the node already meets gives nothing (the
    node itself is counted once)."""
    from engine.evaluation.metrics import auc

    groups = [str(g) for g in sorted(set(truth_labels["group"]))]
    t_group, d_group = truth_labels["group"].to_numpy(), draw_labels["group"].to_numpy()
    t_y = truth_labels["label"].to_numpy()
    aucs = {g: auc(t_y[t_group == g], truth_scores[t_group == g]) for g in groups}
    known = {g: a for g, a in aucs.items() if a is not None}
    if len(known) < 2:
        return []
    worst = min(known.values())
    rng = np.random.default_rng(seed)
    t_noise, d_noise = rng.standard_normal(truth_scores.size), rng.standard_normal(draw_scores.size)
    out = []
    for target in LEVELLED_GAPS:
        t_logit, d_logit = _logit(truth_scores), _logit(draw_scores)
        above = [g for g, a in known.items() if a > worst + target]
        if not above:
            continue   # already within the target: the node itself, counted once
        for g in above:
            t_in, d_in = t_group == g, d_group == g
            strength = _noise_for_auc(t_logit[t_in], t_y[t_in], t_noise[t_in], worst + target)
            t_logit[t_in] += strength * t_noise[t_in]
            d_logit[d_in] += strength * d_noise[d_in]
        out.append((f"levelled to {target:.2f}", 1 / (1 + np.exp(-t_logit)), 1 / (1 + np.exp(-d_logit))))
    return out


def _binormal_set(rng: np.random.Generator, cells: dict[str, tuple[int, int]],
                  aucs: dict[str, float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Binormal scores: benign N(0, 1), malignant N(√2·Φ⁻¹(AUC), 1) per group."""
    from statistics import NormalDist

    y: list[int] = []
    s: list[float] = []
    g: list[str] = []
    for name, (n, k) in cells.items():
        shift = np.sqrt(2) * NormalDist().inv_cdf(aucs[name])
        y += [1] * k + [0] * (n - k)
        s += list(rng.normal(shift, 1, k)) + list(rng.normal(0, 1, n - k))
        g += [name] * n
    return np.array(y), np.array(s), np.array(g, dtype=object)


def _bias_corrected(values: np.ndarray, estimate: float) -> list[float]:
    """The bias-corrected (BC) percentile interval, 95 %."""
    from statistics import NormalDist

    share = min(max(float(np.mean(values < estimate)), 1e-4), 1 - 1e-4)
    z0 = NormalDist().inv_cdf(share)
    lo, hi = NormalDist().cdf(2 * z0 - 1.96), NormalDist().cdf(2 * z0 + 1.96)
    return [float(v) for v in np.quantile(values, [lo, hi])]


def binormal_coverage(cells: dict[str, tuple[int, int]] | None = None, gaps: Iterable[float] = BINORMAL_GAPS,
                      data_sets: int = 500, seed: int = 0, n_resamples: int = 1000) -> list[dict[str, Any]]:
    """Coverage of the gap's interval (today's; v1's percentile interval of max − min and the
    bias-corrected one beside it)
    and of the signed differences' on binormal data: per true gap, `data_sets` fresh data sets of
    `cells` ({group: (images, malignant)}, the default test split's by default), group AUCs .90,
    .90 − gap/2, .90 − gap; every data set resampled with the same resample counts."""
    from engine.evaluation.metrics import auc
    from engine.measures.uncertainty import (
        SIGNED_PAIRS, Strata, difference_fields, group_differences, percentile, replicates,
    )
    from engine.measures.summary import EvaluationSummary
    from engine.session.views.group_tests import signed as stored_signed

    cells = cells or DDI_TEST
    names = tuple(cells)
    rng = np.random.default_rng(seed)
    y, _, g = _binormal_set(rng, cells, {n: 0.9 for n in names})
    strata = Strata.of(y, g, names)
    counts = strata.counts(n_resamples, seed=seed + 1)
    rows = []
    for gap in gaps:
        aucs = {names[0]: 0.9, names[1]: 0.9 - gap / 2, names[2]: 0.9 - gap}
        truth = {words: aucs[a] - aucs[b] for (a, b), words in SIGNED_PAIRS}
        tallies = {k: Tally() for k in ("gap", "percentile", "bias_corrected", *truth)}
        estimates = []
        for _ in range(data_sets):
            _, s, _ = _binormal_set(rng, cells, aucs)
            point = {n: auc(y[g == n], s[g == n]) for n in names}
            rep = replicates(s, strata, counts)
            differences = group_differences(rep, point)
            assert differences is not None
            estimates.append(max(point.values()) - min(point.values()))  # type: ignore[type-var,operator]
            tallies["gap"].add(gap, list(differences.gap()))
            tallies["percentile"].add(gap, list(percentile(rep.gap)))  # type: ignore[arg-type]
            tallies["bias_corrected"].add(gap, _bias_corrected(rep.gap, estimates[-1]))  # type: ignore[arg-type]
            for d in stored_signed(EvaluationSummary.from_payload(difference_fields(differences, names))):
                tallies[d.pair].add(truth[d.pair], [d.low, d.high])
        rows.append({"true_gap": gap, "data_sets": data_sets, "mean_estimate": round(statistics.fmean(estimates), 4),
                     **{f"{k}_coverage": round(v.covered / v.pairs, 4) for k, v in tallies.items()},
                     **{f"{k}_median_width": round(statistics.median(v.widths), 4) for k, v in tallies.items()
                        if k in ("gap", "percentile", "bias_corrected")}})
    return rows


def coverage(root: Path, *, steps: int = 8, n_draws: int = 40, truth_n: int = 4000,
             splits: tuple[str, ...] = ("test", "validation")) -> dict[str, Any]:
    """Coverage at two sizes: the product's default SynthDerm splits (656 test images; a 386-image
    validation split) and the small session's own (120 test; 58 validation)."""
    from engine.evaluation.heldout import load_labels
    from engine.evaluation.metrics import compute_metrics

    nodes, ws = session_nodes(root / "session", steps)
    own = {"test": composition(load_labels(ws.test_labels)),
           "validation": composition(load_labels(ws.validation_labels))}
    default = _default_compositions()
    pools = {"test": test_format_pool, "validation": train_format_pool}
    rows: list[dict[str, Any]] = []
    bands: list[dict[str, Any]] = []
    per_node: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    for split, pool in ((s, pools[s]) for s in splits):
        sizes = {"default": default[split], "small": own[split]}
        truth_images, truth_labels = pool(root / f"{split}-truth", TRUTH_SEED, truth_n)
        # test format: the pool has the draws' composition; training format: a 2,000-image set's
        # validation split is a fifth of it, so n_draws such splits need n_draws x 400 rows (+15 %)
        need = int(1.05 * n_draws * 656) if split == "test" else int(1.15 * n_draws * 400)
        draw_images, draw_labels = pool(root / f"{split}-draws", DRAW_SEED, need)
        index_sets = {name: draws(draw_labels, cells)[:n_draws] for name, cells in sizes.items()}
        tallies = {(name, f): Tally() for name in sizes for f in FIGURES}
        band_tallies = {(name, b, f): Tally() for name in sizes for _, _, b in BANDS for f in BAND_FIGURES}
        band_nodes: dict[tuple[str, str], int] = {}
        for number, node in enumerate(nodes):
            truth_scores = predictions(node, truth_images, truth_labels)
            scores = predictions(node, draw_images, draw_labels)
            pipelines = [(node.name, truth_scores, scores),
                         *((f"{node.name} {what}", t, d) for what, t, d in
                           levelled(truth_scores, truth_labels, scores, draw_labels, seed=number))]
            for label, t_scores, d_scores in pipelines:
                truth = _figures(compute_metrics(truth_labels["label"].to_numpy(), t_scores,
                                                 truth_labels["group"].to_numpy()).summary())
                per_node.append({"split": split, "node": label, **truth})
                where = band(float(truth["auc_gap"])) if truth.get("auc_gap") is not None else None
                for name in sizes:
                    if where is not None:
                        band_nodes[(name, where)] = band_nodes.get((name, where), 0) + 1
                    real = label == node.name   # the per-figure table: the session's own nodes only
                    spread = tally(d_scores, draw_labels, truth, index_sets[name],
                                   {f: tallies[(name, f)] for f in FIGURES} if real else None,
                                   {f: band_tallies[(name, where, f)] for f in BAND_FIGURES} if where else None)
                    diagnostics += [{"split": split, "size": name, "node": label, **d} for d in spread]
        for (name, b, f), t in band_tallies.items():
            bands.append({**t.row(split, f), "size": name, "band": b, "nodes": band_nodes.get((name, b), 0)})
        for (name, f), t in tallies.items():
            cells = sizes[name]
            row = {**t.row(split, f), "size": name, "images": sum(cells.values()),
                   "malignant": _malignant(cells, f)}
            if f == "auc_gap":
                row["tiny_true_gap_pairs"] = t.tiny_truth
            rows.append(row)
    return {"nodes": len(nodes), "draws_per_node": n_draws, "truth_images": truth_n, "rows": rows,
            "bands": bands, "truth": per_node, "diagnostics": diagnostics}


def _malignant(cells: dict[tuple[str, int], int], figure: str) -> int:
    if figure.startswith("group_"):
        return cells.get((figure, 1), 0)
    return sum(k for (g, y), k in cells.items() if y == 1)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--draws", type=int, default=40)
    p.add_argument("--truth", type=int, default=4000)
    p.add_argument("--out", type=Path, default=None)
    p.add_argument("--binormal", action="store_true", help="the fast binormal simulation only")
    p.add_argument("--data-sets", type=int, default=500, help="binormal: data sets per true gap")
    p.add_argument("--split", choices=("test", "validation"), default=None,
                   help="only this split (binormal: the default SynthDerm split whose composition the data "
                        "sets have; default test)")
    args = p.parse_args(argv)
    if args.binormal:
        from engine.evaluation.adequacy import synth_counts

        out: Any = binormal_coverage(synth_counts(2000, 656)[args.split or "test"], data_sets=args.data_sets)
        for row in out:
            print("  ".join(f"{k} {v}" for k, v in row.items()))
    else:
        with tempfile.TemporaryDirectory(prefix="befair-coverage-") as tmp:
            out = coverage(Path(tmp), steps=args.steps, n_draws=args.draws, truth_n=args.truth,
                           splits=(args.split,) if args.split else ("test", "validation"))
        _print(out)
    if args.out:
        args.out.write_text(json.dumps(out, indent=2) + "\n")


def _print(result: dict[str, Any]) -> None:
    for row in result["rows"]:
        print(f"{row['split']:<10} {row['size']:<7} {row['images']:>4} images {row['figure']:<10} "
              f"malignant {row['malignant']:>3}  pairs {row['pairs']:>4}  coverage {row['coverage']}  "
              f"median width {row['median_width']}" + (f"  (true gap < .03: {row['tiny_true_gap_pairs']} pairs)"
                                                        if "tiny_true_gap_pairs" in row else ""))
    print("by band of true gap (the session's nodes and their levelled pipelines):")
    for row in result["bands"]:
        print(f"{row['split']:<10} {row['size']:<7} true gap {row['band']:<9} {row['figure']:<13} "
              f"pipelines {row['nodes']:>3}  pairs {row['pairs']:>4}  coverage {row['coverage']}  "
              f"median width {row['median_width']}")


if __name__ == "__main__":
    main()
