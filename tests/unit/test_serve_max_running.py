"""`befair serve --max-running N` caps a study's running sessions through every tab's environment."""
from __future__ import annotations

import os
import subprocess
import sys

from engine.study.people import MAX_RUNNING_ENV


def serve(*argv: str, tmp_path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "befair_tui.cli", "serve", *argv, "--db", str(tmp_path / "x.db")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_a_cap_below_one_or_without_a_study_is_refused_before_anything_starts(tmp_path):
    without = serve("--max-running", "2", tmp_path=tmp_path)
    assert without.returncode == 2 and "--max-running needs --study" in without.stderr
    zero = serve("--study", "pilot.toml", "--max-running", "0", tmp_path=tmp_path)
    assert zero.returncode == 2 and "--max-running must be 1 or more, not 0" in zero.stderr
    assert not (tmp_path / "x.db").exists()


def test_the_cap_reaches_the_environment_the_tabs_inherit(monkeypatch):
    import argparse

    from befair_tui.cli.serve import _cap_running

    monkeypatch.setenv(MAX_RUNNING_ENV, "")   # recorded, so the cap set below is undone after the test
    _cap_running(argparse.Namespace(max_running=3, study="pilot.toml"))
    assert os.environ[MAX_RUNNING_ENV] == "3"


def test_the_cap_does_not_outlive_its_test():   # runs after the one above: a leaked cap overrode every study's
    assert not os.environ.get(MAX_RUNNING_ENV)
