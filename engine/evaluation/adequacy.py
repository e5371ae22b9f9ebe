"""Is there enough data to judge fairness? Images and malignant cases per skin-tone group in each
held-out split, and a warning for every group too small to judge (engine.measures.uncertainty's
MIN_CASES rule): the setup screen and `befair run` say so before a session starts.

For SynthDerm the counts follow from the generator's fixed composition and the validation
split's rule, without generating anything; for a prepared workspace they are read from its label
files.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.data.formats import FITZ_JOINT
from engine.measures.uncertainty import MIN_CASES, too_few
from engine.task import GROUP_LABELS, GROUPS, fitzpatrick_to_group

Counts = dict[str, dict[str, tuple[int, int]]]   # split -> group -> (images, malignant)


def synth_counts(n_train: int, n_test: int, val_fraction: float = 0.2) -> Counts:
    """The held-out splits of a SynthDerm workspace of this size (any seed: the composition is fixed)."""
    from engine.data.synth import ddi_counts, largest_remainder

    parts = ("non-neoplastic", "benign", "malignant")
    cells = [(s, p) for s in FITZ_JOINT for p in parts]
    sizes = largest_remainder([FITZ_JOINT[s][i] for s in FITZ_JOINT for i in range(3)], n_train)
    strata: dict[tuple[str, int], int] = {}
    for (scale, part), n in zip(cells, sizes, strict=True):
        group = fitzpatrick_to_group(scale)
        if group is not None:
            key = (group, int(part == "malignant"))
            strata[key] = strata.get(key, 0) + int(n)
    validation = {g: (0, 0) for g in GROUPS}
    for (group, malignant), n in strata.items():
        k = min(max(round(val_fraction * n), 1), n - 1) if n >= 2 else 0
        images, positives = validation[group]
        validation[group] = (images + k, positives + (k if malignant else 0))
    tones = dict(zip((12, 34, 56), GROUPS, strict=True))
    test = {tones[tone]: (n, k) for tone, (n, k) in ddi_counts(n_test).items()}
    return {"validation": validation, "test": test}


def labels_counts(labels_csv: str | Path) -> dict[str, tuple[int, int]]:
    from engine.evaluation.heldout import load_labels

    frame = load_labels(labels_csv)
    out = {}
    for group, rows in frame.groupby("group"):
        out[str(group)] = (int(len(rows)), int(rows["label"].sum()))
    return out


def workspace_counts(workspace: Any) -> Counts:
    """The held-out splits of a workspace, read from its label files."""
    from engine.evaluation.evaluator import heldout_splits

    return {split: labels_counts(labels) for split, (_, labels) in heldout_splits(workspace).items()}


def warnings(counts: Counts) -> list[str]:
    """One line per group too small to judge, in words a dermatologist reads."""
    out = []
    for split, groups in counts.items():
        for group in [g for g in GROUPS if g in groups] + sorted(set(groups) - set(GROUPS)):
            n, malignant = groups[group]
            if too_few(malignant, n):
                out.append(f"{split}: FST {GROUP_LABELS.get(group, group)} has {malignant} malignant and "
                           f"{n - malignant} benign images (fewer than {MIN_CASES}): too few to judge fairness "
                           "there; its AUC and the skin-tone gap will be very uncertain")
    return out
