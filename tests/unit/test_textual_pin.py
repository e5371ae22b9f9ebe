"""The search tree overrides private parts of Textual's Tree: Textual is pinned exactly, and a
change of version under those overrides fails here first."""
from __future__ import annotations

import tomllib
from importlib.metadata import version
from pathlib import Path

from befair_tui.widgets.search_tree import WRITTEN_FOR_TEXTUAL

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_textual_is_the_one_the_tree_was_written_for():
    assert version("textual") == WRITTEN_FOR_TEXTUAL


def test_pyproject_and_the_constraints_pin_that_version_exactly():
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert f"textual=={WRITTEN_FOR_TEXTUAL}" in [d.replace(" ", "") for d in deps]
    constraints = (ROOT / "constraints.txt").read_text().split()
    assert f"textual=={WRITTEN_FOR_TEXTUAL}" in constraints
