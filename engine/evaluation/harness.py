"""The evaluation harness: run a node's `predict(folder)` in its own process and score it here.

The pipeline contract: a node's ``solution.py`` trains when run as a script and defines
``predict(folder) -> {filename: probability}`` (a DataFrame with a filename and a probability
column is accepted too).

`evaluate` runs ``harness_worker.py`` through the executor inside the sandbox (engine.execution):
cwd = the node's directory (read-only), the held-out images read-only (staged as hard links when
their folder holds anything but images), one writable folder for the results; time, memory and
every process it starts are bounded as for a node's run. It then reads the predictions the worker
wrote (no symlink, no FIFO, bounded size) and scores them against the labels, which stay in this
process. Every failure becomes a verdict, never an exception: ok, no_predict, import_error,
exception, timeout, out_of_memory, missing_files, extra_files, nan, out_of_range, wrong_type.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from engine.errors import DataError, WorkError
from engine.evaluation.heldout import load_labels, score_predictions
from engine.evaluation.metrics import MetricSet
from engine.evaluation.warm_worker import LOG_TAIL, WORKER_INSIDE, WORKER_SCRIPT, WarmKey, warm_enabled, warm_worker
from engine.execution.base import ExecResult, Job, out_of_memory_reason
from engine.execution.local import LocalExecutor
from engine.execution.sandbox import Sandbox
from engine.execution.run_dirs import session_input_of

__all__ = ["EvalOutcome", "evaluate", "evaluate_splits", "load_labels", "score_predictions"]


@dataclass
class EvalOutcome:
    ok: bool
    verdict: str
    reason: str | None = None
    summary: dict[str, Any] = field(default_factory=dict)
    medfair: dict[str, Any] = field(default_factory=dict)
    predictions: dict[str, float] = field(default_factory=dict)
    elapsed: float = 0.0
    metrics: MetricSet | None = None
    log_tail: str = ""


# --------------------------------------------------------------------------- the process

_IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".tif", ".tiff", ".webp")
_MAX_PREDICTIONS_BYTES = 64 * 1024 * 1024


def _only_images(folder: Path) -> bool:
    return all(e.is_file() and not e.name.startswith(".") and e.name.lower().endswith(_IMAGE_SUFFIXES)
               for e in os.scandir(folder))


def _stage_images(src: Path, dst: Path) -> int:
    """Hard-link (or copy) the image files of src into dst: a folder holding nothing else."""
    dst.mkdir(parents=True)
    n = 0
    for entry in os.scandir(src):
        if not entry.is_file() or entry.name.startswith("."):
            continue
        if not entry.name.lower().endswith(_IMAGE_SUFFIXES):
            continue  # never let anything label-like through
        target = dst / entry.name
        try:
            os.link(entry.path, target)
        except OSError:
            shutil.copy2(entry.path, target)
        n += 1
    return n


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1][:300] if lines else ""


def _read_result(path: Path) -> dict[str, Any] | None:
    """The worker's JSON result, read without trusting it: no symlink, no FIFO, bounded size."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_size > _MAX_PREDICTIONS_BYTES:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            result = json.loads(fh.read().decode("utf-8"))
        return result if isinstance(result, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)


def evaluate(
    node_dir: str | os.PathLike[str],
    solution_file: str | os.PathLike[str],
    images_dir: str | os.PathLike[str],
    labels_csv: str | os.PathLike[str] | pd.DataFrame,
    **kw: Any,
) -> EvalOutcome:
    """Import the node's solution in a separate, sandboxed process, call predict on the held-out
    images and score the result here. GPUs stay visible unless device == "cpu"."""
    return evaluate_splits(node_dir, solution_file, {"split": (images_dir, labels_csv)}, **kw)["split"]


def evaluate_splits(
    node_dir: str | os.PathLike[str],
    solution_file: str | os.PathLike[str],
    splits: Mapping[str, tuple[str | os.PathLike[str], str | os.PathLike[str] | pd.DataFrame]],
    *,
    timeout: float = 600,
    device: str | None = None,
    python: str = sys.executable,
    sandbox: Sandbox | None = None,
    memory_limit_mb: int = 0,
    threads: int = 2,
    warm: bool | None = None,
) -> dict[str, EvalOutcome]:
    """`evaluate` for several held-out sets ({name: (images_dir, labels)}) with ONE import of the
    solution: the process start, imports and model load are paid once. `timeout` covers them all;
    the splits predicted before it ran out keep their results.

    The worker runs through the executor, inside `sandbox` (default: bubblewrap, refused where it
    is unavailable): it sees the node folder read-only, the held-out images read-only, a folder
    for its results and nothing else; labels stay in this process.

    `warm` (default: on inside bubblewrap, unless $BEFAIR_WARM_EVAL=0): the worker is a fork of
    a pre-imported `WarmWorker` kept for this process, so an evaluation pays no Python start and
    no library import; the node's files are staged under their folder's name (see WarmWorker)."""
    started = time.perf_counter()
    node_dir = Path(node_dir).resolve()
    solution = Path(solution_file)
    if not solution.is_absolute():
        solution = node_dir / solution
    labels = {name: load_labels(lab) for name, (_, lab) in splits.items()}  # DataErrors are the engine's
    if not solution.is_file() or solution.is_symlink():
        return {name: _done(started, "import_error", f"no solution file at {solution.name}") for name in splits}
    for images_dir, _ in splits.values():
        if not Path(images_dir).is_dir():
            raise DataError(f"held-out images folder not found: {images_dir}")

    run = _Evaluation(started, node_dir, solution, splits, labels, float(timeout), device, python,
                      sandbox if sandbox is not None else Sandbox.create("auto"), memory_limit_mb, int(threads))
    folders = [Path(images_dir).resolve() for images_dir, _ in splits.values()]
    inside = solution.parent.resolve() == node_dir or solution.resolve().is_relative_to(node_dir)
    if (warm if warm is not None else warm_enabled(run.sandbox)) and inside and all(_only_images(f) for f in folders):
        outcomes = _evaluate_warm(run, folders)
        if outcomes is not None:
            return outcomes
    return _evaluate_fresh(run)


def _done(started: float, verdict: str, reason: str | None, *, preds: dict[str, float] | None = None,
          metrics: MetricSet | None = None, log: str = "") -> EvalOutcome:
    return EvalOutcome(
        ok=verdict == "ok", verdict=verdict, reason=reason,
        summary=metrics.summary() if metrics else {}, medfair=metrics.medfair() if metrics else {},
        predictions=preds or {}, elapsed=time.perf_counter() - started, metrics=metrics, log_tail=log,
    )


@dataclass
class _Evaluation:
    """One call of evaluate_splits: what its warm and fresh paths share."""

    started: float
    node_dir: Path
    solution: Path
    splits: Mapping[str, tuple[str | os.PathLike[str], str | os.PathLike[str] | pd.DataFrame]]
    labels: dict[str, pd.DataFrame]
    timeout: float
    device: str | None
    python: str
    sandbox: Sandbox
    memory_limit_mb: int
    threads: int

    def done(self, verdict: str, reason: str | None, *, preds: dict[str, float] | None = None,
             metrics: MetricSet | None = None, log: str = "") -> EvalOutcome:
        return _done(self.started, verdict, reason, preds=preds, metrics=metrics, log=log)

    def outcomes(self, files: list[Path], log_text: str, result: ExecResult) -> dict[str, EvalOutcome]:
        return {name: _outcome(files[i], self.labels[name], self.done, log_text, result, self.timeout,
                               self.memory_limit_mb)
                for i, name in enumerate(self.splits)}


def _evaluate_warm(run: _Evaluation, folders: list[Path]) -> dict[str, EvalOutcome] | None:
    """The splits evaluated by a fork of the warm worker; None when it is busy or did not start."""
    session_input = session_input_of(run.node_dir)
    key = WarmKey(run.python, run.sandbox, run.device, run.threads,
                  tuple(sorted({str(f) for f in folders} | ({str(session_input)} if session_input else set()))))
    kept = warm_worker(key)
    if not kept.lock.acquire(blocking=False):  # a fresh worker: never wait behind another run
        return None
    try:
        result, files = kept.run(run.node_dir, run.solution, folders, run.timeout, run.memory_limit_mb)
        return run.outcomes(files, result.output_tail[-LOG_TAIL:], result)
    except WorkError:
        return None  # the warm worker did not start: a fresh process
    finally:
        kept.finish()
        kept.lock.release()


def _evaluate_fresh(run: _Evaluation) -> dict[str, EvalOutcome]:
    """The splits evaluated by a fresh worker process through the executor."""
    tmp = Path(tempfile.mkdtemp(prefix="befair-eval-"))
    try:
        out_dir = tmp / "out"
        out_dir.mkdir()
        worker = WORKER_INSIDE if run.sandbox.isolated else str(WORKER_SCRIPT)
        cmd = [run.python, worker, "--solution", str(run.solution)]
        outputs: list[Path] = []
        read_only: list[Path] = []
        for i, (images_dir, _) in enumerate(run.splits.values()):
            folder = Path(images_dir).resolve()
            if not _only_images(folder):
                folder = tmp / f"images_{i}"
                _stage_images(Path(images_dir), folder)
            read_only.append(folder)
            outputs.append(out_dir / f"predictions_{i}.json")
            cmd += ["--task", str(folder), str(outputs[-1])]
        job = Job(node_id=0, workdir=run.node_dir, command=cmd, timeout=run.timeout,
                  memory_limit_mb=run.memory_limit_mb, output_cap=2 * LOG_TAIL, threads=run.threads,
                  read_only=read_only, writable=[out_dir],
                  files=[(WORKER_SCRIPT, WORKER_INSIDE)] if run.sandbox.isolated else [], workdir_writable=False,
                  device=run.device)
        executor = LocalExecutor(sandbox=run.sandbox, heartbeat=0.1, flush_interval=0.5)
        result = executor.result(executor.submit(job))
        return run.outcomes(outputs, (result.output_head + result.output_tail)[-LOG_TAIL:], result)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


class _Done(Protocol):
    """_Evaluation.done: an EvalOutcome from a verdict."""

    def __call__(self, verdict: str, reason: str | None, *, preds: dict[str, float] | None = None,
                 metrics: MetricSet | None = None, log: str = "") -> EvalOutcome: ...


def _outcome(out_file: Path, labels: pd.DataFrame, done: _Done, log_text: str, run: ExecResult,
             timeout: float, memory_limit_mb: int) -> EvalOutcome:
    result = _read_result(out_file)
    if result is None:
        if run.out_of_memory:
            return done("out_of_memory", out_of_memory_reason(memory_limit_mb), log=log_text)
        if run.status == "timeout":
            return done("timeout", f"predict did not finish within {timeout:g} s", log=log_text)
        why = _last_line(log_text) or "no output"
        return done("exception", f"the evaluation process ended (exit code {run.exit_code}) without predictions: "
                    f"{why}", log=log_text)
    if result.get("verdict") != "ok":
        reason = str(result.get("reason") or "")[:500] or None
        if memory_limit_mb and reason and ("MemoryError" in reason or "can't allocate memory" in reason):
            return done("out_of_memory", out_of_memory_reason(memory_limit_mb), log=log_text)
        return done(str(result.get("verdict", "exception")), reason, log=log_text)
    try:
        preds = {str(k): float(v) for k, v in dict(result["predictions"]).items()}
    except (KeyError, TypeError, ValueError) as exc:
        return done("wrong_type", f"the predictions could not be read ({type(exc).__name__})", log=log_text)
    verdict, reason, metrics = score_predictions(preds, labels)
    return done(verdict, reason, preds=preds, metrics=metrics, log=log_text)
