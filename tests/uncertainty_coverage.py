"""Do the 95 % intervals cover the truth? SynthDerm has one: fresh images from the same generator.

    python -m tests.uncertainty_coverage [--steps 8] [--draws 40] [--out FILE.json]

1. A small session (300 training / 120 test images at 32 px, the offline coder, the real runner
   and sandbox) gives real nodes, each a trained pipeline with its `predict()`.
2. Truth: each node's predict() on a large fresh set from the generator with other seeds (test
   format: DDI's composition; training format: the validation population, every row of known
   skin tone, malignant = three_partition_label "malignant").
3. Draws: disjoint fresh sets of the session's own size and composition (the test split's and the
   validation split's (group x label) counts), from another fresh pool. Each draw's intervals
   (engine.evaluation.uncertainty, as every evaluation computes them) either cover the node's
   true figure or not.

`coverage(...)` returns one row per figure (AUC, each group's AUC, worst-group AUC, gap; per
split), with the pairs counted, the share covered, and the median interval width. The slow test
tests/unit/test_uncertainty_coverage.py asserts on it; this module's main prints the table.
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
    from engine.agent.offline import OfflineCoder
    from engine.agent.runner import run
    from engine.agent.session_setup import start_session
    from engine.config import SessionConfig
    from engine.data.workspace import synth_workspace
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
    from engine.session.figures import interval

    return interval(summary, figure)


def tally(scores: np.ndarray, labels: pd.DataFrame, truth: dict[str, float | None],
          index_sets: Iterable[np.ndarray], tallies: dict[str, Tally]) -> list[dict[str, Any]]:
    """Count each draw's intervals against the truth; returns, per figure, how the draws' estimates
    spread around the truth beside the intervals' half-width (why a coverage is what it is)."""
    from engine.evaluation.metrics import compute_metrics

    seen: dict[str, list[tuple[float, float]]] = {f: [] for f in FIGURES}
    for idx in index_sets:
        part = labels.iloc[idx]
        summary = compute_metrics(part["label"].to_numpy(), scores[idx], part["group"].to_numpy(),
                                  intervals=True).summary()
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
    from engine.data.adequacy import synth_counts

    out = {}
    for split, groups in synth_counts(2000, 656).items():
        out[split] = {cell: k for group, (n, malignant) in groups.items()
                      for cell, k in (((group, 1), malignant), ((group, 0), n - malignant))}
    return out


def coverage(root: Path, *, steps: int = 8, n_draws: int = 40, truth_n: int = 4000) -> dict[str, Any]:
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
    per_node: list[dict[str, Any]] = []
    diagnostics: list[dict[str, Any]] = []
    for split, pool in pools.items():
        sizes = {"default": default[split], "small": own[split]}
        truth_images, truth_labels = pool(root / f"{split}-truth", TRUTH_SEED, truth_n)
        # test format: the pool has the draws' composition; training format: a 2,000-image set's
        # validation split is a fifth of it, so n_draws such splits need n_draws x 400 rows (+15 %)
        need = int(1.05 * n_draws * 656) if split == "test" else int(1.15 * n_draws * 400)
        draw_images, draw_labels = pool(root / f"{split}-draws", DRAW_SEED, need)
        index_sets = {name: draws(draw_labels, cells)[:n_draws] for name, cells in sizes.items()}
        tallies = {(name, f): Tally() for name in sizes for f in FIGURES}
        for node in nodes:
            truth_scores = predictions(node, truth_images, truth_labels)
            truth = _figures(compute_metrics(truth_labels["label"].to_numpy(), truth_scores,
                                             truth_labels["group"].to_numpy()).summary())
            per_node.append({"split": split, "node": node.name, **truth})
            scores = predictions(node, draw_images, draw_labels)
            for name in sizes:
                spread = tally(scores, draw_labels, truth, index_sets[name], {f: tallies[(name, f)] for f in FIGURES})
                diagnostics += [{"split": split, "size": name, "node": node.name, **d} for d in spread]
        for (name, f), t in tallies.items():
            cells = sizes[name]
            row = {**t.row(split, f), "size": name, "images": sum(cells.values()),
                   "malignant": _malignant(cells, f)}
            if f == "auc_gap":
                row["tiny_true_gap_pairs"] = t.tiny_truth
            rows.append(row)
    return {"nodes": len(nodes), "draws_per_node": n_draws, "truth_images": truth_n, "rows": rows,
            "truth": per_node, "diagnostics": diagnostics}


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
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="befair-coverage-") as tmp:
        result = coverage(Path(tmp), steps=args.steps, n_draws=args.draws, truth_n=args.truth)
    for row in result["rows"]:
        print(f"{row['split']:<10} {row['size']:<7} {row['images']:>4} images {row['figure']:<10} "
              f"malignant {row['malignant']:>3}  pairs {row['pairs']:>4}  coverage {row['coverage']}  "
              f"median width {row['median_width']}" + (f"  (true gap < .03: {row['tiny_true_gap_pairs']} pairs)"
                                                        if "tiny_true_gap_pairs" in row else ""))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
