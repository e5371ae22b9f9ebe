"""The local executor: `python solution.py` as a child process on this machine.

Each job runs in its own process group (start_new_session), so a timeout or a cancel kills the
whole group (DataLoader workers included). An address-space limit (RLIMIT_AS) is set in the
child before exec; the child also asks the kernel to kill it if the engine dies (PDEATHSIG), and
its process-group id is written to `<workdir>/.befair_pgid` so a resumed session can clean up.
stdout and stderr are read by two threads and handed out in batches of whole lines, at most
every `flush_interval` seconds or `flush_bytes` characters, so a chatty pipeline does not turn
into one event per line.
"""
from __future__ import annotations

import codecs
import ctypes
import os
import queue
import resource
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from engine.execution.base import (
    DEFAULT_MEMORY_LIMIT_MB, ExecResult, Job, OutputChunk, OutputKeeper, exception_type,
)
from engine.execution.workspace import PGID_FILE

_PR_SET_PDEATHSIG = 1


def node_env(job: Job) -> dict[str, str]:
    """The environment a pipeline runs with: unbuffered output, few threads, fixed hash seed."""
    env = dict(os.environ)
    for key in ("BEFAIR_DB", "PYTHONSTARTUP", "PYTHONINSPECT"):
        env.pop(key, None)
    threads = str(max(1, int(job.threads)))
    env.update({
        "PYTHONUNBUFFERED": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "OPENBLAS_NUM_THREADS": threads,
        "NUMEXPR_NUM_THREADS": threads,
        "TORCH_NUM_THREADS": threads,
        "TOKENIZERS_PARALLELISM": "false",
        "MPLBACKEND": "Agg",
        "BEFAIR_NODE_ID": str(job.node_id),
    })
    env.update(job.env)
    return env


def _preexec(memory_limit_mb: int):
    def setup() -> None:  # runs in the child between fork and exec
        if memory_limit_mb and memory_limit_mb > 0:
            limit = int(memory_limit_mb) * 1024 * 1024
            try:
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            except (ValueError, OSError):
                pass
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except Exception:
            pass
    return setup


@dataclass
class LocalHandle:
    job: Job
    proc: subprocess.Popen
    started: float
    deadline: float
    queue: "queue.Queue[tuple[str, str | None]]"
    keeper: OutputKeeper
    readers: list[threading.Thread] = field(default_factory=list)
    open_streams: int = 2
    cancelled: bool = False
    timed_out: bool = False
    finished: float | None = None
    streamed_chars: int = 0
    stream_capped: bool = False
    drained: bool = False
    exited_at: float | None = None
    partial: dict[str, str] = field(default_factory=lambda: {"stdout": "", "stderr": ""})
    _result: ExecResult | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid


def _reader(pipe, name: str, q: "queue.Queue[tuple[str, str | None]]") -> None:
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    fd = pipe.fileno()
    try:
        while True:
            try:
                data = os.read(fd, 65536)
            except OSError:
                break
            if not data:
                break
            text = decoder.decode(data)
            if text:
                q.put((name, text))
        tail = decoder.decode(b"", final=True)
        if tail:
            q.put((name, tail))
    finally:
        try:
            pipe.close()
        except OSError:
            pass
        q.put((name, None))


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError, OSError):
        return False


class LocalExecutor:
    """Runs jobs as local child processes (see the module docstring)."""

    def __init__(self, *, flush_interval: float = 0.2, flush_bytes: int = 65536, heartbeat: float = 0.2,
                 python: str | None = None):
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.heartbeat = heartbeat
        self.python = python or sys.executable

    # -- the Executor interface ---------------------------------------------------------
    def submit(self, job: Job) -> LocalHandle:
        workdir = Path(job.workdir)
        if not (workdir / job.script).is_file():
            raise FileNotFoundError(f"{workdir / job.script} does not exist")
        memory = DEFAULT_MEMORY_LIMIT_MB if job.memory_limit_mb is None else job.memory_limit_mb
        proc = subprocess.Popen(
            [self.python, job.script],
            cwd=str(workdir),
            env=node_env(job),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=_preexec(memory),
            close_fds=True,
        )
        started = time.monotonic()
        try:
            (workdir / PGID_FILE).write_text(str(proc.pid))
        except OSError:
            pass
        q: "queue.Queue[tuple[str, str | None]]" = queue.Queue()
        handle = LocalHandle(job=job, proc=proc, started=started, deadline=started + float(job.timeout),
                             queue=q, keeper=OutputKeeper(job.output_cap))
        for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            t = threading.Thread(target=_reader, args=(pipe, name, q), daemon=True,
                                 name=f"befair-node{job.node_id}-{name}")
            t.start()
            handle.readers.append(t)
        return handle

    def stream(self, handle: LocalHandle) -> Iterator[list[OutputChunk]]:
        """Batches of output while the process runs; an (often empty) batch at least every
        `heartbeat` seconds. Ends when the process has exited and its output is drained."""
        pending: dict[str, str] = {"stdout": "", "stderr": ""}
        order: list[str] = []
        last_flush = time.monotonic()
        last_yield = last_flush
        while not handle.drained:
            now = time.monotonic()
            if now >= handle.deadline and handle.proc.poll() is None and not handle.cancelled:
                handle.timed_out = True
                kill_group(handle.proc.pid)
            wait = max(0.01, min(self.heartbeat - (now - last_yield), self.flush_interval - (now - last_flush),
                                 handle.deadline - now if not handle.timed_out else self.heartbeat))
            try:
                name, text = handle.queue.get(timeout=wait)
                got = [(name, text)]
                while True:  # take whatever else is already there
                    try:
                        got.append(handle.queue.get_nowait())
                    except queue.Empty:
                        break
            except queue.Empty:
                got = []
            for name, text in got:
                if text is None:
                    handle.open_streams -= 1
                    continue
                handle.keeper.add(text)
                pending[name] += text
                if name not in order:
                    order.append(name)
            if handle.open_streams <= 0:
                self._wait(handle)
                handle.drained = True
            elif handle.proc.poll() is not None:
                # exited, but something it started (outside its group) may hold the pipes open
                exited = handle.exited_at = handle.exited_at or time.monotonic()
                if time.monotonic() - exited > 2.0:
                    self._wait(handle)
                    handle.drained = True
            now = time.monotonic()
            size = sum(len(v) for v in pending.values())
            batch: list[OutputChunk] = []
            if handle.drained or size >= self.flush_bytes or now - last_flush >= self.flush_interval:
                batch = self._take(handle, pending, order, final=handle.drained or size >= self.flush_bytes)
                last_flush = now
            if batch or now - last_yield >= self.heartbeat or handle.drained:
                last_yield = now
                yield batch

    def cancel(self, handle: LocalHandle) -> None:
        if handle.proc.poll() is None:
            handle.cancelled = True
            kill_group(handle.proc.pid)

    def result(self, handle: LocalHandle) -> ExecResult:
        if handle._result is not None:
            return handle._result
        if not handle.drained:
            for _ in self.stream(handle):
                pass
        exit_code = handle.proc.returncode
        exec_time = (handle.finished or time.monotonic()) - handle.started
        output = handle.keeper.head + handle.keeper.tail
        if handle.cancelled:
            status = "interrupted"
        elif handle.timed_out:
            status = "timeout"
        elif exit_code == 0:
            status = "ok"
        else:
            status = "buggy"
        exc = exception_type(handle.keeper.tail or output) or exception_type(output)
        if status == "timeout":
            exc = exc or "TimeoutError"
        elif status == "buggy" and exc is None and exit_code is not None and exit_code < 0:
            try:
                exc = f"killed by {signal.Signals(-exit_code).name}"
            except ValueError:
                exc = f"killed by signal {-exit_code}"
        handle._result = ExecResult(
            status=status, exit_code=exit_code, exec_time=exec_time, exc_type=exc,
            output_head=handle.keeper.head, output_tail=handle.keeper.tail,
            truncated=handle.keeper.truncated, output_chars=handle.keeper.total,
        )
        try:
            (Path(handle.job.workdir) / PGID_FILE).unlink()
        except OSError:
            pass
        return handle._result

    # -- helpers ------------------------------------------------------------------------
    def _wait(self, handle: LocalHandle) -> None:
        while True:
            remaining = handle.deadline - time.monotonic()
            try:
                handle.proc.wait(timeout=max(0.05, min(self.heartbeat, remaining)) if remaining > 0 else 0.05)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() >= handle.deadline and not handle.cancelled:
                    handle.timed_out = True
                    kill_group(handle.proc.pid)
        # a process that closed its pipes early could leave children behind: end the group
        kill_group(handle.proc.pid)
        handle.finished = time.monotonic()

    def _take(self, handle: LocalHandle, pending: dict[str, str], order: list[str], *, final: bool) -> list[OutputChunk]:
        batch: list[OutputChunk] = []
        for name in list(order):
            text = pending[name]
            if not text:
                continue
            if final:
                out, rest = text, ""
            else:
                cut = text.rfind("\n")
                if cut < 0:
                    continue
                out, rest = text[: cut + 1], text[cut + 1:]
            pending[name] = rest
            if not rest:
                order.remove(name)
            out = self._cap(handle, out)
            if out:
                batch.append(OutputChunk(text=out, stream=name))
        return batch

    def _cap(self, handle: LocalHandle, text: str) -> str:
        """Stream at most output_cap characters as events; the tail still reaches exec_finished."""
        if handle.stream_capped:
            return ""
        room = handle.job.output_cap - handle.streamed_chars
        if len(text) <= room:
            handle.streamed_chars += len(text)
            return text
        handle.stream_capped = True
        handle.streamed_chars = handle.job.output_cap
        cut = text[:max(0, room)]
        if cut and not cut.endswith("\n"):
            cut += "\n"
        return cut + "[befair: output cap reached; further output is not streamed, its tail is kept]\n"
