"""Export a baseline as a `solution.py` that follows the pipeline contract.

The file is self-contained (torch, torchvision, numpy, pandas, PIL, scikit-learn only): the
source of baselines/core.py followed by baselines/solution_tail.py with its configuration filled
in. Run as a script in a node directory (cwd holding ``input/skin_lesions.csv`` and
``input/images/``) it trains, saves ``working/model.pt`` and prints ``Validation AUROC: x``; the
evaluation harness imports it and calls ``predict(folder)``. So a baseline can be run and
evaluated exactly like an agent's node, and shown in a session's tree as a human-written node.
"""
from __future__ import annotations

import ast
import os
import re
from importlib import resources
from pathlib import Path
from typing import Any

from engine.errors import BefairError

from baselines.variants import VARIANT_LABELS, VARIANTS

DEFAULTS: dict[str, Any] = {"epochs": 30, "patience": 5, "size": 224, "batch_size": 64, "lr": 1e-4,
                            "weight_decay": 1e-4, "seed": 0, "val_fraction": 0.2, "weights": "auto"}
_CONFIG_LINE = re.compile(r"^CONFIG = \{.*\}(\s*#.*)?$", re.M)


def _source(name: str) -> str:
    return resources.files("baselines").joinpath(name).read_text(encoding="utf-8")


def _strip_docstring(src: str) -> str:
    tree = ast.parse(src)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        lines = src.splitlines(keepends=True)
        return "".join(lines[first.end_lineno:])
    return src


def solution_source(variant: str, **config: Any) -> str:
    if variant not in VARIANTS:
        raise BefairError(f"unknown baseline variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    unknown = set(config) - set(DEFAULTS)
    if unknown:
        raise BefairError(f"unknown export setting(s): {', '.join(sorted(unknown))}")
    cfg = {"variant": variant, **DEFAULTS, **{k: v for k, v in config.items() if v is not None}}
    core = _strip_docstring(_source("core.py"))
    tail = _strip_docstring(_source("solution_tail.py"))
    tail = "".join(line for line in tail.splitlines(keepends=True) if "# export: drop" not in line)
    tail, n = _CONFIG_LINE.subn(lambda _m: f"CONFIG = {cfg!r}", tail, count=1)
    if n != 1:  # pragma: no cover - guards the template
        raise RuntimeError("solution template has no CONFIG line")
    header = (
        f'"""{VARIANT_LABELS[variant]} baseline (MEDFAIR ResNet-18), exported by befair.\n\n'
        "Human-written expert pipeline. Run as a script in a node directory (input/skin_lesions.csv,\n"
        "input/images/): trains, saves working/model.pt and prints 'Validation AUROC: x'.\n"
        "predict(folder) -> {filename: malignancy probability}.\n"
        f"Settings: {cfg!r}\n"
        '"""\n'
    )
    src = header + core.lstrip("\n") + "\n\n# ---- pipeline contract " + "-" * 60 + "\n" + tail
    compile(src, "solution.py", "exec")
    return src


def export_solution(variant: str, out_dir: str | os.PathLike[str], **config: Any) -> Path:
    """Write `out_dir/solution.py` for `variant`; returns its path. `config` overrides DEFAULTS
    (epochs, patience, size, batch_size, lr, weight_decay, seed, val_fraction, weights)."""
    src = solution_source(variant, **config)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "solution.py"
    path.write_text(src, encoding="utf-8")
    return path
