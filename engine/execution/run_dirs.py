"""Node workspaces: `runs/<session>/input` (one read-only copy of the agent's training data per
session) and `runs/<session>/node_<id>/` with `input -> ../input`, `working/` and `solution.py`.

The held-out validation and test folders are never copied or linked into a run directory, so
nothing under a node's directory resolves into them.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from engine.errors import BefairError
from engine.paths import session_run_dir

INPUT_DIR = "input"
WORKING_DIR = "working"
SOLUTION = "solution.py"
_COMPLETE = ".copied"
PGID_FILE = ".befair_pgid"


def pgid_file(node_dir: Path) -> Path:
    """Where the engine notes a running node's process group: beside the node folder, in the run
    folder the sandbox never mounts (a pipeline could rewrite a file inside its own folder and
    have a resume kill an arbitrary process group)."""
    node_dir = Path(node_dir)
    return node_dir.parent / f".{node_dir.name}{PGID_FILE}"


def _make_read_only(root: Path) -> None:
    for dirpath, _dirnames, filenames in os.walk(root):
        for name in filenames:
            p = os.path.join(dirpath, name)
            os.chmod(p, stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
        os.chmod(dirpath, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)


def _make_writable(root: Path) -> None:
    """chmod a tree writable; never through a symlink (a node may have planted one to a label file)."""
    for dirpath, _dirnames, filenames in os.walk(root):
        if not os.path.islink(dirpath):
            os.chmod(dirpath, stat.S_IRWXU)
        for name in filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                os.chmod(path, stat.S_IRUSR | stat.S_IWUSR)


# the agent's table: the product's layout, or the be-fair study's (engine.data.be_fair_layout)
AGENT_CSVS = ("skin_lesions.csv", "mydataset.csv")


def prepare_session_input(runs_root: Path, session_id: str, agent_input: Path) -> Path:
    """Copy the agent's input once per session into runs/<session>/input, read-only."""
    agent_input = Path(agent_input).resolve()
    if not any((agent_input / name).is_file() for name in AGENT_CSVS):
        raise BefairError(f"{agent_input} holds no {' or '.join(AGENT_CSVS)}: not an agent_input folder")
    run_dir = session_run_dir(runs_root, session_id)
    target = run_dir / INPUT_DIR
    if (run_dir / _COMPLETE).is_file() and target.is_dir():
        return target
    run_dir.mkdir(parents=True, exist_ok=True)
    partial = run_dir / (INPUT_DIR + ".partial")
    for stale in (partial, target):
        if stale.exists():
            _make_writable(stale)
            shutil.rmtree(stale)
    shutil.copytree(agent_input, partial, symlinks=False)
    _make_read_only(partial)
    os.chmod(partial, stat.S_IRWXU)  # rename needs the folder itself writable for a moment
    partial.rename(target)
    os.chmod(target, stat.S_IRUSR | stat.S_IXUSR | stat.S_IRGRP | stat.S_IXGRP | stat.S_IROTH | stat.S_IXOTH)
    (run_dir / _COMPLETE).write_text(str(agent_input))
    return target


def prepare_node_dir(runs_root: Path, session_id: str, node_id: int, code: str) -> Path:
    """runs/<session>/node_<id>/ with solution.py, working/ and input -> ../input."""
    run_dir = session_run_dir(runs_root, session_id)
    if not (run_dir / INPUT_DIR).is_dir():
        raise BefairError(f"the session's input copy is missing under {run_dir}")
    node_dir = run_dir / f"node_{node_id}"
    if node_dir.exists():
        _make_writable(node_dir)
        shutil.rmtree(node_dir)
    (node_dir / WORKING_DIR).mkdir(parents=True)
    os.symlink(os.path.join("..", INPUT_DIR), node_dir / INPUT_DIR, target_is_directory=True)
    (node_dir / SOLUTION).write_text(code, encoding="utf-8")
    return node_dir


def session_input_of(node_dir: Path) -> Path | None:
    """The session's read-only input a node folder's `input -> ../input` link is meant to reach,
    found from the trusted layout (runs/<session>/.copied), never by following the node's link."""
    run_dir = Path(node_dir).resolve().parent
    target = run_dir / INPUT_DIR
    if (run_dir / _COMPLETE).is_file() and target.is_dir() and not target.is_symlink():
        return target
    return None


def check_isolated(node_dir: Path, heldout_dirs: list[Path]) -> list[str]:
    """Paths under node_dir (following links) that resolve into a held-out folder (should be [])."""
    bad: list[str] = []
    held = [Path(h).resolve() for h in heldout_dirs if h is not None]
    for dirpath, dirnames, filenames in os.walk(node_dir, followlinks=True):
        for name in dirnames + filenames:
            real = Path(os.path.realpath(os.path.join(dirpath, name)))
            if any(real == h or h in real.parents for h in held):
                bad.append(os.path.join(dirpath, name))
    return bad


def guard_runs_root(runs_root: Path, workspace_root: Path | None) -> None:
    """Refuse a run directory inside the data workspace (its heldout/ would be a relative path away)."""
    if workspace_root is None:
        return
    runs, ws = Path(runs_root).resolve(), Path(workspace_root).resolve()
    if runs == ws or ws in runs.parents:
        raise BefairError(
            f"the run directory {runs} lies inside the data workspace {ws}; put the session "
            "database elsewhere (--db) so held-out data stays out of reach"
        )
