"""The study's Ray executor: each session a Ray task (with the spec's CPU/GPU request) that runs
the same worker process as the local pool, `python -m engine.study.worker`.

Where events go: the worker writes its session straight into the study's SQLite database (WAL)
through the ordinary runner, exactly as under the local pool, so the path of the database must be
the same on every Ray node: one machine (a multi-GPU box), or a shared filesystem with working
POSIX locks. Nothing passes through the Ray object store but exit codes, so there is nothing to
merge: an event exists once, at its (session_id, seq) (a unique index), written by the one
process that runs the session (cells are claimed in the grid table first; a worker that finds
its session alive elsewhere exits with 75 and writes nothing).

A task whose worker is killed (the node lost, `ray stop`, OOM) leaves its session running
without a heartbeat: the cell reads interrupted and the next `befair study run` resumes it.
Ray's own task retries are off (max_retries=0) so that a retry never races that resume.
"""
from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from engine.errors import UsageError
from engine.study.grid import EXIT_BUSY
from engine.study.pool import ERROR_TAIL, STOP_GRACE_S, default_env, worker_command


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("the Ray executor needs ray: pip install 'befair[ray]' (or use --executor local)") from None
    return ray


def run_worker(command: list[str], env: dict[str, str], grace: float = STOP_GRACE_S) -> tuple[int, str | None]:
    """The body of a cell's Ray task: the worker process, SIGTERMed (its session stops cleanly)
    when the task is cancelled."""
    proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=env)
    try:
        out, _ = proc.communicate()
    except BaseException:  # cancelled (KeyboardInterrupt / TaskCancelledError inside the task)
        proc.send_signal(signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
        raise
    text = out.decode("utf-8", errors="replace")[-ERROR_TAIL:].strip()
    return proc.returncode, (None if proc.returncode in (0, 130, EXIT_BUSY) else text or None)


class RayPool:
    """Cells as Ray tasks. `address`: an existing cluster ("auto", "ray://host:10001", ...);
    None starts a local one with `num_cpus` CPUs."""

    def __init__(self, db_path: str | Path, study: str, *, resources: dict[str, float],
                 address: str | None = None, num_cpus: int | None = None, env: dict[str, str] | None = None):
        self.ray = _import_ray()
        self.db_path = Path(db_path).resolve()
        self.study = study
        self.env = env or default_env()
        self.started_ray = False
        if not self.ray.is_initialized():
            init_kw: dict[str, Any] = {"address": address, "include_dashboard": False,
                                       "log_to_driver": False}
            if address is None:
                init_kw["num_cpus"] = num_cpus
            init_kw["runtime_env"] = {"env_vars": {"PYTHONPATH": self.env.get("PYTHONPATH", "")}}
            self.ray.init(**init_kw)
            self.started_ray = True
        self.task = self.ray.remote(max_retries=0)(run_worker).options(
            num_cpus=resources.get("num_cpus", 1.0), num_gpus=resources.get("num_gpus", 0.0),
            **({"memory": int(resources["memory_mb"] * 2**20)} if resources.get("memory_mb") else {}))
        self.refs: dict[Any, int] = {}

    def start(self, cell: int) -> None:
        ref = self.task.remote(worker_command(self.db_path, self.study, cell), self.env)
        self.refs[ref] = cell

    def _collect(self, refs: list[Any]) -> list[tuple[int, int | None, str | None]]:
        out: list[tuple[int, int | None, str | None]] = []
        for ref in refs:
            cell = self.refs.pop(ref)
            try:
                code, error = self.ray.get(ref)
            except Exception as exc:  # the task died (worker killed, cancelled, node lost)
                code, error = None, f"{type(exc).__name__}: {str(exc)[-ERROR_TAIL:]}"
            out.append((cell, code, error))
        return out

    def finished(self, timeout: float) -> list[tuple[int, int | None, str | None]]:
        if not self.refs:
            time.sleep(timeout)
            return []
        done, _ = self.ray.wait(list(self.refs), num_returns=len(self.refs), timeout=timeout)
        return self._collect(done)

    def interrupt(self, grace: float = STOP_GRACE_S) -> list[tuple[int, int | None, str | None]]:
        for ref in self.refs:
            self.ray.cancel(ref, force=False)
        done, _ = self.ray.wait(list(self.refs), num_returns=len(self.refs), timeout=grace)
        left = [r for r in self.refs if r not in done]
        for ref in left:
            self.ray.cancel(ref, force=True)
        return self._collect(list(self.refs))

    def close(self) -> None:
        if self.refs:
            self.interrupt(grace=5.0)
        if self.started_ray:
            self.ray.shutdown()
