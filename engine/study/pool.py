"""Run a study's grid: at most N sessions at a time, each in its own worker process.

    spec = load_spec("levels-demo.toml")
    store = SessionStore("sessions/befair.db")
    ensure_study(store, spec)
    outcome = run_study(store, spec, LocalPool(store.path, spec.name), workers=2)

The driver claims a runnable cell (queued, or interrupted: resumed), hands it to an executor
(`LocalPool` here: one `python -m engine.study.worker` subprocess per session; `RayPool` in
engine.study.ray_pool: one Ray task per session running the same worker), and settles the cell
from its session's own status when the worker ends. All writes go to one SQLite database in WAL
mode: each worker writes its session's events through the ordinary runner, the driver writes
only the grid table. Run it again after a crash, Ctrl-C or kill: only unfinished cells run.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from engine.paths import runs_dir
from engine.session.store import SessionStore
from engine.study import grid
from engine.study.grid import EXIT_BUSY
from engine.study.spec import StudySpec

Tick = Callable[[list[dict[str, Any]]], None]
STOP_GRACE_S = 30.0
ERROR_TAIL = 2000


class Executor(Protocol):
    """Runs cells' workers: start one, report those that ended, interrupt the rest."""

    def start(self, cell: int) -> None: ...

    def finished(self, timeout: float) -> list[tuple[int, int | None, str | None]]: ...

    def interrupt(self, grace: float) -> list[tuple[int, int | None, str | None]]: ...

    def close(self) -> None: ...


@dataclass
class StudyOutcome:
    counts: dict[str, int]
    ran: list[int] = field(default_factory=list)
    wall_s: float = 0.0
    interrupted: bool = False


def worker_command(db_path: str | Path, study: str, cell: int) -> list[str]:
    return [sys.executable, "-m", "engine.study.worker", "--db", str(Path(db_path).resolve()),
            "--study", study, "--cell", str(cell)]


def log_dir(db_path: str | Path, study: str) -> Path:
    """Each worker's stdout and stderr: runs/studies/<study>/cell-NNN.log beside the database."""
    return runs_dir(Path(db_path)) / "studies" / study


def _tail(path: Path) -> str | None:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return text[-ERROR_TAIL:].strip() or None


class LocalPool:
    """One worker subprocess per cell on this machine (the default executor)."""

    def __init__(self, db_path: str | Path, study: str, *, env: dict[str, str] | None = None):
        self.db_path = Path(db_path)
        self.study = study
        self.env = env
        self.procs: dict[int, tuple[subprocess.Popen[bytes], IO[bytes], Path]] = {}

    def start(self, cell: int) -> None:
        logs = log_dir(self.db_path, self.study)
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"cell-{cell:03d}.log"
        log = log_path.open("ab")
        proc = subprocess.Popen(worker_command(self.db_path, self.study, cell), stdin=subprocess.DEVNULL,
                                stdout=log, stderr=subprocess.STDOUT, env=self.env)
        self.procs[cell] = (proc, log, log_path)

    def _reap(self, cell: int) -> tuple[int, int | None, str | None]:
        proc, log, log_path = self.procs.pop(cell)
        log.close()
        code = proc.returncode
        return cell, code, (None if code in (0, 130, EXIT_BUSY) else _tail(log_path))

    def finished(self, timeout: float) -> list[tuple[int, int | None, str | None]]:
        deadline = time.monotonic() + timeout
        while True:
            done = [c for c, (p, _, _) in self.procs.items() if p.poll() is not None]
            if done or time.monotonic() >= deadline:
                return [self._reap(c) for c in done]
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def interrupt(self, grace: float = STOP_GRACE_S) -> list[tuple[int, int | None, str | None]]:
        """SIGTERM every worker (each stops its session: interrupted), SIGKILL those still alive
        after `grace` seconds."""
        for proc, _, _ in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + grace
        for proc, _, _ in self.procs.values():
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return [self._reap(c) for c in list(self.procs)]

    def close(self) -> None:
        if self.procs:
            self.interrupt(grace=5.0)


def runnable_cells(store: SessionStore, name: str, *, retry_failed: bool = False,
                   participant: str | None = None) -> list[int]:
    states = (*grid.RUNNABLE, grid.FAILED) if retry_failed else grid.RUNNABLE
    return [r["cell"] for r in grid.grid_rows(store, name)
            if r["state"] in states and (participant is None or r["participant_id"] == participant)]


def prepare_data(spec: StudySpec, progress: Any = None) -> None:
    """Build (or find in the cache) the study's data once, before workers would race for it."""
    from engine.agent.session_setup import resolve_workspace

    resolve_workspace(spec.session_config(spec.cells()[0]), progress=progress)


def run_study(store: SessionStore, spec: StudySpec, executor: Executor, *, workers: int = 1,
              on_tick: Tick | None = None, retry_failed: bool = False, participant: str | None = None,
              poll_s: float = 1.0) -> StudyOutcome:
    """Run every runnable cell of the study, at most `workers` at a time (see the module docstring).
    Ctrl-C interrupts the running workers (their sessions stop: interrupted) and re-raises."""
    started = time.monotonic()
    pending = runnable_cells(store, spec.name, retry_failed=retry_failed, participant=participant)
    outcome = StudyOutcome(counts={})
    running: set[int] = set()
    try:
        while pending or running:
            while pending and len(running) < max(1, workers):
                cell = pending.pop(0)
                if grid.claim(store, spec.name, cell, retry_failed=retry_failed):
                    executor.start(cell)
                    running.add(cell)
                    outcome.ran.append(cell)
            for cell, code, error in executor.finished(timeout=poll_s):
                running.discard(cell)
                grid.settle(store, spec.name, cell, exit_code=code, error=error)
            if on_tick is not None:
                on_tick(grid.grid_rows(store, spec.name))
    except KeyboardInterrupt:
        outcome.interrupted = True
        for cell, code, error in executor.interrupt(STOP_GRACE_S):
            grid.settle(store, spec.name, cell, exit_code=code, error=error)
        raise
    finally:
        executor.close()
        outcome.wall_s = time.monotonic() - started
        outcome.counts = grid.counts(grid.grid_rows(store, spec.name))
    return outcome


def default_env() -> dict[str, str]:
    """The workers' environment: this one, with this source tree importable (a factory coder
    named by module path, a checkout that was never installed)."""
    env = dict(os.environ)
    here = str(Path.cwd())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH", "")) if p)
    return env
