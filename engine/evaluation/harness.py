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

import atexit
import json
import math
import os
import secrets
import select
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Mapping

import pandas as pd

from engine.data.common import read_csv
from engine.errors import DataError, WorkError
from engine.evaluation.harness_worker import normalise
from engine.execution.base import ExecResult, Job, out_of_memory_reason
from engine.execution.local import LocalExecutor, kill_tree, tree_memory_mb
from engine.execution.sandbox import RunSpec, Sandbox, run_env
from engine.execution.workspace import session_input_of
from engine.evaluation.metrics import MetricSet, compute_metrics
from engine.task import DDI_SKIN_TONE_TO_GROUP

VERDICTS = (
    "ok", "no_predict", "import_error", "exception", "timeout", "out_of_memory", "missing_files", "extra_files",
    "nan", "out_of_range", "wrong_type",
)
_LOG_TAIL = 2000


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

    def event_payload(self, node_id: int, split: str, *, blinded: bool = False) -> dict[str, Any]:
        """The payload of an `evaluated` event (see engine.session.events)."""
        summary = self.summary or {"group_auc": {}, "group_auc_reason": {}, "n": 0}
        return {
            "node_id": node_id,
            "split": split,
            "ok": self.ok,
            "verdict": self.verdict,
            "reason": self.reason,
            "summary": summary,
            "medfair": self.medfair,
            "blinded": blinded,
        }


# --------------------------------------------------------------------------- labels and scoring


def load_labels(labels: str | os.PathLike[str] | pd.DataFrame) -> pd.DataFrame:
    """Held-out labels as a DataFrame (file, label 0/1, group).

    Accepts the workspace format (file,label,group[,skin_tone]) and DDI metadata
    (DDI_file,skin_tone,malignant). Anything else, and empty or unknown cells, are a DataError
    naming the file and the offending lines (rows, for a DataFrame).
    """
    import numpy as np

    if isinstance(labels, pd.DataFrame):
        df, where, first, unit = labels, "labels", 1, "row"
    else:
        where, first, unit = str(labels), 2, "line"  # line 1 is the header
        df = read_csv(labels, "labels")
    df = df.reset_index(drop=True)

    def missing(v: Any) -> bool:
        try:
            return v is None or bool(pd.isna(v)) or (isinstance(v, str) and not v.strip())
        except (TypeError, ValueError):
            return False

    def text(column: str) -> pd.Series:
        return df[column].map(lambda v: "" if missing(v) else str(v).strip())

    def lines(mask: pd.Series) -> str:
        idx = [int(i) + first for i in df.index[mask.to_numpy(dtype=bool)]]
        shown = ", ".join(map(str, idx[:5])) + (f" and {len(idx) - 5} more" if len(idx) > 5 else "")
        return f"{unit}{'s' if len(idx) > 1 else ''} {shown}"

    def values(series: pd.Series, mask: pd.Series) -> str:
        vals = sorted({str(v)[:40] for v in series[mask.to_numpy(dtype=bool)]})
        return ", ".join(repr(v) for v in vals[:5]) + (" …" if len(vals) > 5 else "")

    cols = set(df.columns)
    if {"file", "label", "group"} <= cols:
        file_col, label_col = "file", "label"
        group = text("group")
        if (group == "").any():
            raise DataError(f"{where}: empty group cell on {lines(group == '')}")
    elif {"DDI_file", "malignant", "skin_tone"} <= cols:
        file_col, label_col = "DDI_file", "malignant"
        tone_text = text("skin_tone")
        if (tone_text == "").any():
            raise DataError(f"{where}: empty skin_tone cell on {lines(tone_text == '')} (expected 12, 34 or 56)")
        tones = pd.to_numeric(tone_text, errors="coerce")
        unknown = ~tones.isin(list(DDI_SKIN_TONE_TO_GROUP))
        if unknown.any():
            raise DataError(f"{where}: unknown skin_tone value(s) {values(tone_text, unknown)} on "
                            f"{lines(unknown)} (expected 12, 34, 56)")
        group = tones.astype(int).map(DDI_SKIN_TONE_TO_GROUP).astype(str)
    else:
        raise DataError(
            f"{where}: expected columns file,label,group (workspace) or DDI_file,malignant,skin_tone "
            f"(DDI); found {', '.join(map(str, df.columns))}"
        )
    files = text(file_col)
    if (files == "").any():
        raise DataError(f"{where}: empty {file_col} cell on {lines(files == '')}")

    words = {"true": 1, "false": 0, "1": 1, "0": 0, "malignant": 1, "benign": 0, "1.0": 1, "0.0": 0}

    def label(v: Any) -> int | None:
        if missing(v):
            return None
        if isinstance(v, (bool, np.bool_)):
            return int(v)
        if isinstance(v, (int, float, np.integer, np.floating)):
            return int(v) if v in (0, 1) else None
        return words.get(str(v).strip().lower())

    lab = df[label_col].map(label)
    bad = lab.isna()
    if bad.any():
        raise DataError(f"{where}: {label_col} must be 0/1 (or True/False); found "
                        f"{values(df[label_col].map(lambda v: '' if missing(v) else v), bad)} on {lines(bad)}")
    out = pd.DataFrame({"file": files.astype(str), "label": lab.astype(int), "group": group.astype(str)})
    dup = out["file"].duplicated()
    if dup.any():
        raise DataError(f"{where}: duplicate file names {values(out['file'], dup)} on {lines(dup)}")
    return out.reset_index(drop=True)


def _names(names: list[str], limit: int = 3) -> str:
    shown = ", ".join(sorted(names)[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def score_predictions(
    predictions: Mapping[str, Any] | pd.DataFrame, labels_csv: str | os.PathLike[str] | pd.DataFrame
) -> tuple[str, str | None, MetricSet | None]:
    """(verdict, reason, metrics) for predictions against held-out labels; never raises on bad
    predictions (bad labels are a DataError: that is the engine's problem, not the node's)."""
    labels = load_labels(labels_csv)
    verdict, reason, preds = normalise(predictions)
    if verdict != "ok" or preds is None:
        return verdict, reason, None
    expected = set(labels["file"])
    missing = sorted(expected - set(preds))
    extra = sorted(set(preds) - expected)
    if extra:
        also = f"; {len(missing)} held-out image(s) have none" if missing else ""
        return "extra_files", f"{len(extra)} prediction(s) for unknown images ({_names(extra)}){also}", None
    if missing:
        return "missing_files", f"no prediction for {len(missing)} of {len(expected)} images ({_names(missing)})", None
    scores = [preds[f] for f in labels["file"]]
    nan = [f for f, s in zip(labels["file"], scores, strict=True) if math.isnan(s)]
    if nan:
        return "nan", f"{len(nan)} prediction(s) are NaN ({_names(nan)})", None
    bad = [f for f, s in zip(labels["file"], scores, strict=True) if not 0.0 <= s <= 1.0]
    if bad:
        example = preds[sorted(bad)[0]]
        return "out_of_range", f"{len(bad)} prediction(s) outside [0, 1] (e.g. {sorted(bad)[0]}: {example:.4g})", None
    return "ok", None, compute_metrics(labels["label"].to_numpy(), scores, labels["group"].tolist(), intervals=True)


# --------------------------------------------------------------------------- the process

_WORKER = Path(__file__).resolve().parent / "harness_worker.py"
_WORKER_INSIDE = "/opt/befair/harness_worker.py"
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

    def done(verdict: str, reason: str | None, *, preds: dict[str, float] | None = None,
             metrics: MetricSet | None = None, log: str = "") -> EvalOutcome:
        return EvalOutcome(
            ok=verdict == "ok", verdict=verdict, reason=reason,
            summary=metrics.summary() if metrics else {}, medfair=metrics.medfair() if metrics else {},
            predictions=preds or {}, elapsed=time.perf_counter() - started, metrics=metrics, log_tail=log,
        )

    if not solution.is_file() or solution.is_symlink():
        return {name: done("import_error", f"no solution file at {solution.name}") for name in splits}
    for images_dir, _ in splits.values():
        if not Path(images_dir).is_dir():
            raise DataError(f"held-out images folder not found: {images_dir}")

    sandbox = sandbox if sandbox is not None else Sandbox.create("auto")
    folders = [Path(images_dir).resolve() for images_dir, _ in splits.values()]
    inside = solution.parent.resolve() == node_dir or solution.resolve().is_relative_to(node_dir)
    if (warm if warm is not None else warm_enabled(sandbox)) and inside and all(_only_images(f) for f in folders):
        session_input = session_input_of(node_dir)
        key = _WarmKey(python, sandbox, device, int(threads),
                       tuple(sorted({str(f) for f in folders} | ({str(session_input)} if session_input else set()))))
        kept = warm_worker(key)
        if kept.lock.acquire(blocking=False):  # else a fresh worker: never wait behind another run
            try:
                result, files = kept.run(node_dir, solution, folders, float(timeout), memory_limit_mb)
                log_text = result.output_tail[-_LOG_TAIL:]
                return {name: _outcome(files[i], labels[name], done, log_text, result, timeout, memory_limit_mb)
                        for i, name in enumerate(splits)}
            except WorkError:
                pass  # the warm worker did not start: a fresh process below
            finally:
                kept.finish()
                kept.lock.release()
    tmp = Path(tempfile.mkdtemp(prefix="befair-eval-"))
    try:
        out_dir = tmp / "out"
        out_dir.mkdir()
        worker = _WORKER_INSIDE if sandbox.isolated else str(_WORKER)
        cmd = [python, worker, "--solution", str(solution)]
        outputs: dict[str, Path] = {}
        read_only: list[Path] = []
        for i, (name, (images_dir, _)) in enumerate(splits.items()):
            folder = Path(images_dir).resolve()
            if not _only_images(folder):
                folder = tmp / f"images_{i}"
                _stage_images(Path(images_dir), folder)
            read_only.append(folder)
            outputs[name] = out_dir / f"predictions_{i}.json"
            cmd += ["--task", str(folder), str(outputs[name])]
        job = Job(node_id=0, workdir=node_dir, command=cmd, timeout=float(timeout), memory_limit_mb=memory_limit_mb,
                  output_cap=2 * _LOG_TAIL, threads=threads, read_only=read_only, writable=[out_dir],
                  files=[(_WORKER, _WORKER_INSIDE)] if sandbox.isolated else [], workdir_writable=False,
                  device=device)
        executor = LocalExecutor(sandbox=sandbox, heartbeat=0.1, flush_interval=0.5)
        result = executor.result(executor.submit(job))
        log_text = (result.output_head + result.output_tail)[-_LOG_TAIL:]
        return {name: _outcome(outputs[name], labels[name], done, log_text, result, timeout, memory_limit_mb)
                for name in splits}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


# --------------------------------------------------------------------------- the warm worker

WARM_ENV = "BEFAIR_WARM_EVAL"  # "0": a fresh worker process per evaluation (no warm worker)
_START_TIMEOUT = 300.0


WARM_PREFIX = "befair-warm-"  # + the owner's pid: a folder whose owner is gone was left by a kill


def sweep_stale_warm_folders(tmp: Path | None = None) -> list[Path]:
    """Remove warm-worker folders whose process is gone (killed with -9: no cleanup ran)."""
    removed = []
    for folder in Path(tmp or tempfile.gettempdir()).glob(f"{WARM_PREFIX}*-*"):
        pid = folder.name[len(WARM_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


@dataclass(frozen=True)
class _WarmKey:
    python: str
    sandbox: Sandbox
    device: str | None
    threads: int
    mounts: tuple[str, ...]  # held-out image folders and the session's input, read-only


class WarmWorker:
    """`harness_worker.py --serve` in one long-lived sandbox: the libraries are imported once,
    each evaluation is a fork of it (see harness_worker.serve). The node's files are staged
    (hard links, else copies; links kept as links, never followed) into a read-only folder of
    the sandbox under the node folder's own name, beside an `input` link to the session's
    input; each evaluation writes into a fresh folder that is emptied after it. A timeout, an
    out-of-memory kill or a lost channel ends the whole sandbox; the next evaluation starts a
    new one."""

    def __init__(self, key: _WarmKey):
        self.key = key
        self.lock = threading.Lock()
        sweep_stale_warm_folders()
        self.root = Path(tempfile.mkdtemp(prefix=f"{WARM_PREFIX}{os.getpid()}-"))
        self.stage, self.out = self.root / "stage", self.root / "out"
        self.proc: subprocess.Popen[bytes] | None = None
        self.baseline_mb = 0.0
        self.out_of_memory = False

    @property
    def gpu(self) -> bool:
        """The worker sees the GPU as a job would (see engine.execution.local)."""
        device = self.key.device
        return device.startswith("cuda") if device else os.path.exists("/dev/nvidiactl")

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self) -> None:
        for folder in (self.stage, self.out):
            folder.mkdir(exist_ok=True)
        key = self.key
        worker = _WORKER_INSIDE if key.sandbox.isolated else str(_WORKER)
        spec = RunSpec(cwd=self.stage, writable=[self.out], read_only=[self.stage, *map(Path, key.mounts)],
                       files=[(_WORKER, _WORKER_INSIDE)] if key.sandbox.isolated else [], gpu=self.gpu)
        self.proc = subprocess.Popen(
            key.sandbox.wrap([key.python, worker, "--serve"], spec), cwd=str(self.stage),
            env=run_env(threads=key.threads, device=key.device), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        if self._reply(time.monotonic() + _START_TIMEOUT) != {"ready": True}:
            self.stop()
            raise WorkError("the warm evaluation worker did not start")
        self.baseline_mb = tree_memory_mb(self.proc.pid)

    def stop(self) -> None:
        if self.proc is not None:
            kill_tree(self.proc.pid)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
            for pipe in (self.proc.stdin, self.proc.stdout):
                if pipe is not None:
                    pipe.close()
        self.proc = None

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.root, ignore_errors=True)

    def _reply(self, deadline: float, limit_mb: int = 0) -> dict[str, Any] | None:
        """The next line the worker writes, or None at the deadline, past the memory limit
        (the sandbox is then ended) or on a closed channel."""
        assert self.proc is not None and self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], min(left, 0.25))
            if ready:
                line = self.proc.stdout.readline()
                if not line:
                    return None
                try:
                    reply = json.loads(line)
                except ValueError:
                    return None
                return reply if isinstance(reply, dict) else None
            if limit_mb and tree_memory_mb(self.proc.pid) - self.baseline_mb > limit_mb:
                self.out_of_memory = True
                return None

    def run(self, node_dir: Path, solution: Path, images: list[Path], timeout: float,
            memory_limit_mb: int) -> tuple[ExecResult, list[Path]]:
        """One evaluation: (the run's result as the executor would give it, the output files)."""
        if not self.alive:
            self.stop()
            self.start()
        assert self.proc is not None and self.proc.stdin is not None
        self.out_of_memory = False
        started = time.monotonic()
        eval_id = secrets.token_hex(8)
        stage = self.stage / eval_id
        out = self.out / eval_id
        stage.mkdir()
        out.mkdir()
        node_copy = stage / node_dir.name
        _stage_tree(node_dir, node_copy)
        session_input = session_input_of(node_dir)
        if session_input is not None:
            os.symlink(str(session_input), stage / "input", target_is_directory=True)
        outputs = [out / f"predictions_{i}.json" for i in range(len(images))]
        request = {"nonce": eval_id, "cwd": str(node_copy), "solution": str(node_copy / solution.relative_to(node_dir)),
                   "tasks": [[str(img), str(o)] for img, o in zip(images, outputs, strict=True)],
                   "log": str(out / "log.txt"), "memory_limit_mb": memory_limit_mb,
                   "address_limit": not self.gpu}  # CUDA reserves more address space than it uses
        try:
            self.proc.stdin.write((json.dumps(request) + "\n").encode())
            self.proc.stdin.flush()
            reply = self._reply(started + timeout, memory_limit_mb)
        except OSError:
            reply = None
        while reply is not None and reply.get("nonce") != eval_id:  # never another run's reply
            reply = self._reply(started + timeout, memory_limit_mb)
        if reply is None:
            self.stop()
        status = "ok" if reply is not None and reply.get("exit") == 0 else \
            ("timeout" if reply is None and not self.out_of_memory and time.monotonic() >= started + timeout
             else "buggy")
        log = _tail(out / "log.txt", 2 * _LOG_TAIL)
        result = ExecResult(status=status, exit_code=reply.get("exit") if reply else None,
                            exec_time=time.monotonic() - started, exc_type=None, output_head="", output_tail=log,
                            truncated=False, out_of_memory=self.out_of_memory, sandboxed=self.key.sandbox.isolated)
        return result, outputs

    def finish(self) -> None:
        """Empty the staging and output folders (after the outputs were read)."""
        for folder in (self.stage, self.out):
            if folder.is_dir():
                for entry in os.scandir(folder):
                    _remove(Path(entry.path))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _stage_tree(src: Path, dst: Path) -> None:
    """src's files hard-linked (or copied) into dst; links recreated as links, never followed;
    anything but files, folders and links skipped."""
    dst.mkdir()
    for entry in os.scandir(src):
        target = dst / entry.name
        if entry.is_symlink():
            os.symlink(os.readlink(entry.path), target)
        elif entry.is_dir(follow_symlinks=False):
            _stage_tree(Path(entry.path), target)
        elif entry.is_file(follow_symlinks=False):
            try:
                os.link(entry.path, target, follow_symlinks=False)
            except OSError:
                shutil.copy2(entry.path, target, follow_symlinks=False)


def _tail(path: Path, limit: int) -> str:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return ""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return ""
        os.lseek(fd, max(0, info.st_size - limit), os.SEEK_SET)
        return os.read(fd, limit).decode("utf-8", errors="replace")
    finally:
        os.close(fd)


_POOL: dict[_WarmKey, WarmWorker] = {}  # in order of use, the most recent last
_POOL_LOCK = threading.Lock()
POOL_SIZE = 2  # warm workers kept per process (each holds the libraries' memory)


def warm_worker(key: _WarmKey) -> WarmWorker:
    """The warm worker for these mounts and settings; the least recently used idle one is
    closed when more than POOL_SIZE would be kept."""
    with _POOL_LOCK:
        worker = _POOL.pop(key, None) or WarmWorker(key)
        _POOL[key] = worker
        for old_key in list(_POOL)[:-POOL_SIZE]:
            old = _POOL[old_key]
            if old.lock.acquire(blocking=False):  # never one in use
                try:
                    old.close()
                finally:
                    old.lock.release()
                del _POOL[old_key]
        return worker


@atexit.register
def close_warm_workers() -> None:
    with _POOL_LOCK:
        for worker in _POOL.values():
            worker.close()
        _POOL.clear()


def warm_enabled(sandbox: Sandbox) -> bool:
    """The warm worker is used inside bubblewrap only (its clean-up relies on the pid namespace)."""
    return sandbox.isolated and os.environ.get(WARM_ENV, "1") != "0" and hasattr(os, "fork")


class _Done(Protocol):
    """evaluate_splits' `done`: an EvalOutcome from a verdict."""

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
