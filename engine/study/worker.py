"""Run one cell of a study in this process: `python -m engine.study.worker --db DB --study NAME --cell N`.

Each session of a study runs in its own worker process (started by the local pool, or by a Ray
task), so a crash takes down one session, not the grid, and Ctrl-C / SIGTERM / SIGKILL act on it
as on `befair run --headless`. The worker is idempotent: a cell whose session exists is resumed
(its interrupted node marked, the search continued), one whose session finished is left alone.

It also ends its session (stopped, so the next `study run` resumes it) when the process that
started it dies, so that killing a study runner never leaves orphan sessions running. With
`--detached` (a cell a study's participant started from a browser: engine.study.people) it
outlives whoever started it instead, claims its cell itself and settles it when it ends, so a
closed tab or a killed `befair serve` loses nothing.

Exit codes: 0 the session finished, 1 it failed, 130 it was interrupted, 75 another process is
running it, 2/3 as the CLI (bad usage, bad data).
"""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

from engine.agent.coder_registry import make_coder
from engine.agent.session_config import SessionConfig
from engine.agent.signals import install_sigterm_handler
from engine.errors import EXIT_FAILED, EXIT_INTERRUPTED, BefairError, UsageError
from engine.session.heartbeat import runner_status
from engine.session.store import SessionNotFound, SessionStore
from engine.study import grid
from engine.study.grid import EXIT_BUSY
from engine.study.spec import Cell, StudySpec

PARENT_POLL_S = 0.5


def build_coder(cell: Cell, config: SessionConfig) -> Any:
    """The cell's coder: make_coder for offline/openai, or the spec's `factory = "module:callable"`."""
    if cell.coder.factory:
        module_name, _, attr = cell.coder.factory.partition(":")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"coder factory {cell.coder.factory!r} cannot be imported ({exc})") from None
        return factory(config)

    return make_coder(config)


def with_people_settings(config: SessionConfig, spec: StudySpec) -> SessionConfig:
    """A study with people's settings that its runner enforces, recorded with the session: a clock
    that stops while the participant has the session paused (engine.session.active_time)."""
    if spec.people is not None and not spec.people.clock_runs_when_paused:
        study = config.extra.setdefault("study", {})
        study["clock_runs_when_paused"] = False
    return config


def run_cell(db_path: str | Path, study: str, cell_index: int) -> int:
    """Start or resume a cell's session and run it to its end; returns the exit code."""
    from engine.agent.recovery import recover
    from engine.agent.runner import run
    from engine.agent.session_setup import resolve_workspace, start_session

    store = SessionStore(db_path)
    spec = grid.stored_spec(store, study)
    cells = spec.cells()
    if not 0 <= cell_index < len(cells):
        raise UsageError(f"study {study} has cells 0..{len(cells) - 1}, not {cell_index}")
    cell = cells[cell_index]
    config = with_people_settings(spec.session_config(cell), spec)
    coder = build_coder(cell, config)
    sid = cell.session_id
    try:
        store.session(sid)
    except SessionNotFound:
        workspace = resolve_workspace(config)
        writer = start_session(store, config, coder=coder, session_id=sid, workspace=workspace)
        grid.link_session(store, study, cell.index, sid)
    else:
        grid.link_session(store, study, cell.index, sid)
        state = store.state(sid)
        if state.status == "finished":
            return 0
        if runner_status(store, sid) == "alive":
            return EXIT_BUSY
        writer, _ = recover(store, sid, by=f"study {study}", force=True)
    final = run(store, sid, coder=coder, writer=writer)
    return {"finished": 0, "stopped": EXIT_INTERRUPTED}.get(final.status, EXIT_FAILED)


def watch_parent(parent_pid: int, poll: float = PARENT_POLL_S) -> threading.Thread:
    """SIGTERM this process (the runner stops its session) once `parent_pid` is no longer its parent."""
    def loop() -> None:
        while os.getppid() == parent_pid:
            time.sleep(poll)
        os.kill(os.getpid(), signal.SIGTERM)

    thread = threading.Thread(target=loop, name="study-parent-watch", daemon=True)
    thread.start()
    return thread


def main(argv: list[str] | None = None) -> int:

    parser = argparse.ArgumentParser(prog="python -m engine.study.worker", description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, type=Path)
    parser.add_argument("--study", required=True)
    parser.add_argument("--cell", required=True, type=int)
    parser.add_argument("--detached", action="store_true",
                        help="outlive the process that started this worker; claim and settle the cell here")
    args = parser.parse_args(argv)
    install_sigterm_handler()
    if not args.detached:
        watch_parent(os.getppid())
        return _run(args.db, args.study, args.cell)
    store = SessionStore(args.db)
    if not (_claimed_for_me(store, args.study, args.cell) or grid.claim(store, args.study, args.cell)):
        return EXIT_BUSY  # running elsewhere, or finished
    code = _run(args.db, args.study, args.cell)
    error = None if code in (0, EXIT_INTERRUPTED, EXIT_BUSY) else f"the worker exited with code {code}"
    grid.settle(store, args.study, args.cell, exit_code=code, error=error)
    return code


def _claimed_for_me(store: SessionStore, study: str, cell: int) -> bool:
    """The tab that started this worker claimed the cell in its name (engine.study.people.ensure_runner)."""
    row = store.grid_cell(study, cell)
    return row is not None and row.get("status") == grid.RUNNING and row.get("runner") == grid.runner_id()


def _run(db: Path, study: str, cell: int) -> int:
    try:
        return run_cell(db, study, cell)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BefairError as exc:
        print(f"befair study worker: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
