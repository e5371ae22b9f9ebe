"""The dependency direction: befair_tui -> engine, baselines; baselines -> engine; engine -> neither.
Only befair_tui imports textual. Checked by reading every module's imports (AST)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_top_levels(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (root / package).rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(root))] = names
    return found


@pytest.mark.parametrize(
    "package, forbidden",
    [
        ("engine", {"befair_tui", "baselines", "textual", "textual_plotext"}),
        ("baselines", {"befair_tui", "textual", "textual_plotext"}),
    ],
)
def test_package_does_not_import(package, forbidden):
    offenders = {
        module: sorted(names & forbidden)
        for module, names in imported_top_levels(package).items()
        if names & forbidden
    }
    assert offenders == {}


def test_the_checker_catches_a_forbidden_import(tmp_path):
    """Guard against a checker that can never fail: a planted violation must be reported."""
    (tmp_path / "engine" / "sub").mkdir(parents=True)
    (tmp_path / "engine" / "ok.py").write_text("import os\nfrom engine import x\n")
    (tmp_path / "engine" / "sub" / "bad.py").write_text("def f():\n    from textual.app import App\n")
    modules = imported_top_levels("engine", root=tmp_path)
    assert modules["engine/sub/bad.py"] & {"textual"} == {"textual"}
    assert not modules["engine/ok.py"] & {"textual", "befair_tui"}
