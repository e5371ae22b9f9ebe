"""The dependency direction: befair_tui -> engine, baselines; baselines -> engine; engine -> neither.
Only befair_tui imports textual. Checked by reading every module's imports (AST)."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def imported_top_levels(package: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for path in (ROOT / package).rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        names: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names.add(node.module.split(".")[0])
        found[str(path.relative_to(ROOT))] = names
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


def test_the_checker_sees_imports(tmp_path, monkeypatch):
    """Guard against a checker that can never fail: it must see befair_tui's textual imports."""
    modules = imported_top_levels("befair_tui")
    assert any("engine" in names for names in modules.values())
