"""The warm evaluation worker: `harness_worker.py --serve` kept alive in one sandbox per set of
mounts and settings, so an evaluation is a fork of an interpreter that has imported the libraries
already (see WarmWorker). A small pool per process; `close_warm_workers` runs at exit and a folder
left by a killed owner is swept by the next one (`sweep_stale_warm_folders`).
"""
from __future__ import annotations

import atexit
import json
import os
import secrets
import select
import shutil
import stat
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import WorkError
from engine.execution.base import ExecResult
from engine.execution.local import kill_tree, tree_memory_mb
from engine.execution.sandbox import RunSpec, Sandbox, run_env
from engine.execution.run_dirs import session_input_of

WORKER_SCRIPT = Path(__file__).resolve().parent / "harness_worker.py"
WORKER_INSIDE = "/opt/befair/harness_worker.py"  # where the sandbox mounts it
LOG_TAIL = 2000  # characters of a run's output kept with its outcome

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
class WarmKey:
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

    def __init__(self, key: WarmKey):
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
        worker = WORKER_INSIDE if key.sandbox.isolated else str(WORKER_SCRIPT)
        spec = RunSpec(cwd=self.stage, writable=[self.out], read_only=[self.stage, *map(Path, key.mounts)],
                       files=[(WORKER_SCRIPT, WORKER_INSIDE)] if key.sandbox.isolated else [], gpu=self.gpu)
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
        log = _tail(out / "log.txt", 2 * LOG_TAIL)
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


_POOL: dict[WarmKey, WarmWorker] = {}  # in order of use, the most recent last
_POOL_LOCK = threading.Lock()
POOL_SIZE = 2  # warm workers kept per process (each holds the libraries' memory)


def warm_worker(key: WarmKey) -> WarmWorker:
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
