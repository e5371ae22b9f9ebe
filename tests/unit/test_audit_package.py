"""The audit package's shape: one claim threshold, small modules and short functions."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from engine.evaluation.audit import CLAIM_DIFFERENCE_FLAG, check_claim

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("engine", "befair_tui", "baselines")
CLAIMS = ROOT / "engine" / "measures" / "claims.py"
AUDIT = ROOT / "engine" / "evaluation" / "audit"


def _product_files() -> list[Path]:
    return [p for top in PRODUCT for p in sorted((ROOT / top).rglob("*.py"))]


def test_the_claim_threshold_is_defined_once_in_claims() -> None:
    definition = re.compile(r"^\s*CLAIM_DIFFERENCE_FLAG\s*(?::[^=\n]*)?=(?!=)", re.M)
    literal = re.compile(r"difference[^\n]*[<>]=?\s*0?\.05\b")
    defined = [p for p in _product_files() if definition.search(p.read_text(encoding="utf-8"))]
    compared = [p for p in _product_files() if literal.search(p.read_text(encoding="utf-8"))]
    assert defined == [CLAIMS]
    assert compared == []


def test_check_claim_reads_the_threshold() -> None:
    output = "Validation AUC: 0.85"
    beyond = check_claim(0.85, 0.85 - 1.5 * CLAIM_DIFFERENCE_FLAG, ran_ok=True, output=output)
    within = check_claim(0.85, 0.85 - 0.5 * CLAIM_DIFFERENCE_FLAG, ran_ok=True, output=output)
    assert beyond["reason"] is not None and beyond["reason"].startswith("claimed 0.850, measured")
    assert within["reason"] is None and not within["unsupported"]


def test_audit_modules_are_small_and_their_functions_short() -> None:
    for path in sorted(AUDIT.glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert len(text.splitlines()) <= 600, path.name
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno is not None
                length = node.end_lineno - node.lineno + 1
                assert length <= 60, f"{path.name}: {node.name} has {length} lines"
