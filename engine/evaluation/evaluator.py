"""A session's evaluation of its nodes: held-out sets, the label files' fingerprints, the sandbox.

    digests = label_digests(workspace)                  # recorded at session start
    evaluator = NodeEvaluator(workspace, sandbox=..., digests=digests, timeout=..., memory_limit_mb=...)
    outcomes = evaluator.evaluate(node_dir)             # {"validation": EvalOutcome, "test": ...}

Before every evaluation the label files are hashed again: a file that changed since the session
started (a pipeline that reached it, a user who edited the cache) raises LabelsChanged, naming the
file, and the session stops instead of scoring against different labels.

Each split's summary also gets the operating point (engine.measures.operating_point): the cut-off
chosen on this node's validation predictions (or the fixed probability the session set) and, at
it, each skin-tone group's sensitivity, specificity, melanomas missed per 100 and calibration.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import BefairError, DataError
from engine.measures import operating_point as op
from engine.evaluation.harness import EvalOutcome, evaluate_splits
from engine.execution.sandbox import Sandbox


class LabelsChanged(BefairError):
    """A held-out label file's SHA-256 differs from the one recorded when the session started."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def heldout_splits(workspace: Any) -> dict[str, tuple[Path, Path]]:
    """{split: (images folder, labels file)} of a workspace: validation and test, each when the
    workspace has it (a be-fair workspace withholds no validation set)."""
    splits = {}
    for split in ("validation", "test"):
        images, labels = getattr(workspace, f"{split}_images", None), getattr(workspace, f"{split}_labels", None)
        if images is not None and labels is not None:
            splits[split] = (Path(images), Path(labels))
    if not splits:
        raise DataError(f"{getattr(workspace, 'root', workspace)} has no held-out set to measure nodes on")
    return splits


def label_digests(workspace: Any) -> dict[str, dict[str, str]]:
    """{split: {"path", "sha256"}} of the workspace's held-out label files."""
    return {split: {"path": str(labels.resolve()), "sha256": sha256_file(labels)}
            for split, (_, labels) in heldout_splits(workspace).items()}


def verify_digests(recorded: dict[str, dict[str, str]]) -> None:
    for split, entry in recorded.items():
        path = Path(entry["path"])
        try:
            now = sha256_file(path)
        except OSError as exc:
            raise LabelsChanged(f"the {split} label file {path} cannot be read any more ({exc.strerror}); "
                                "its scores could not be trusted, so the session stops") from None
        if now != entry["sha256"]:
            raise LabelsChanged(f"the {split} label file {path} changed since the session started "
                                f"(SHA-256 {entry['sha256'][:12]}… now {now[:12]}…); the session stops rather "
                                "than score against different labels")


@dataclass
class NodeEvaluator:
    """Evaluates nodes of one session: labels verified, the worker sandboxed, limits applied."""
    workspace: Any
    sandbox: Sandbox
    digests: dict[str, dict[str, str]] | None = None
    timeout: float = 600.0
    memory_limit_mb: int = 0
    device: str | None = None
    threads: int = 2
    operating_point: str = op.DEFAULT   # the session's setting (SessionConfig.operating_point)

    def evaluate(self, node_dir: Path) -> dict[str, EvalOutcome]:
        if self.digests:
            verify_digests(self.digests)
        outcomes = evaluate_splits(node_dir, Path(node_dir) / "solution.py", heldout_splits(self.workspace),
                                   timeout=self.timeout, device=self.device, sandbox=self.sandbox,
                                   memory_limit_mb=self.memory_limit_mb, threads=self.threads)
        add_operating_point(outcomes, op.Setting.parse(self.operating_point))
        return outcomes


def add_operating_point(outcomes: dict[str, EvalOutcome], setting: op.Setting) -> None:
    """Each measured split's summary gains the operating-point block: the cut-off comes from the
    validation outcome's predictions (a sensitivity setting) or the setting itself (a probability)."""
    validation = outcomes.get("validation")
    scored = validation.metrics.scored if validation is not None and validation.ok and validation.metrics else None
    why_not = ("this workspace withholds no validation set to choose it on" if validation is None
               else f"the validation split was not measured ({validation.verdict})")
    threshold, reason = op.choose_threshold(setting, scored[:2] if scored else None, why_not)
    for outcome in outcomes.values():
        metrics = outcome.metrics
        if not outcome.ok or metrics is None or metrics.scored is None:
            continue
        labels, scores, groups = metrics.scored
        outcome.summary[op.KEY] = op.block(setting, threshold, labels, scores, groups,
                                           [g.name for g in metrics.groups], reason=reason)
