"""The local executor: agent code as a child process on this machine, inside the sandbox.

Each job is wrapped by `engine.execution.sandbox.Sandbox` (bubblewrap namespaces, or "none"),
runs in its own process group with the allow-listed environment, and is limited in:

- wall time: `job.timeout`, checked on every heartbeat however much the job prints;
- memory: an address-space limit (RLIMIT_AS, CPU jobs) and a watchdog that samples the
  proportional memory (PSS) of every process of the run and kills it past the limit; either way
  the result says "out of memory (limit N MiB)";
- output: read in 64 KiB blocks by two threads, handed out in batches of whole lines (at most
  every `flush_interval` s or `flush_bytes` characters), streamed up to `output_cap` characters,
  and kept as head and tail; collecting it is linear in its size.

When a run ends, normally or not, every process it started is killed: the sandbox's pid
namespace dies with its first process, and the executor also kills the process group and every
descendant it can still see (the only clean-up there is with `--sandbox none`).
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
from collections.abc import Callable, Iterator
from typing import IO

from engine.execution.base import (
    DEFAULT_MEMORY_LIMIT_MB, ExecResult, Job, OutputChunk, OutputKeeper, exception_type, out_of_memory_reason,
)
from engine.execution.sandbox import RunSpec, Sandbox, run_env
from engine.execution.run_dirs import pgid_file, session_input_of

_PR_SET_PDEATHSIG = 1
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
_MEMORY_ERRORS = ("MemoryError", "_ArrayMemoryError", "can't allocate memory", "Cannot allocate memory",
                  "std::bad_alloc", "CUDA out of memory", "OutOfMemoryError")


def node_env(job: Job) -> dict[str, str]:
    """The environment a pipeline runs with: an allow-list (see sandbox.run_env), never os.environ."""
    return run_env(threads=job.threads, node_id=job.node_id, device=job.device, extra=job.env)


def _uses_gpu(job: Job) -> bool:
    """A job sees the GPU when it asks for cuda, or names no device on a machine that has one."""
    if job.device:
        return str(job.device).startswith("cuda")
    return os.path.exists("/dev/nvidiactl")


def _preexec(memory_limit_mb: int) -> Callable[[], None]:
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


# --------------------------------------------------------------------------- the process tree


def descendants(pid: int) -> list[int]:
    """Every live descendant of pid (through /proc/<pid>/task/*/children)."""
    found: list[int] = []
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def _memory_mb(pid: int) -> float:
    """Proportional set size (shared pages split between sharers), falling back to RSS."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            for line in fh:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * _PAGE / (1024 * 1024)
    except (OSError, ValueError, IndexError):
        return 0.0


def tree_memory_mb(pid: int) -> float:
    return sum(_memory_mb(p) for p in [pid, *descendants(pid)])


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> bool:
    try:
        os.killpg(pgid, sig)
        return True
    except (ProcessLookupError, PermissionError, OSError):
        return False


def _start_time(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def kill_tree(pid: int, seen: dict[int, str | None] | None = None) -> None:
    """Kill pid's process group, every descendant still visible, and the processes `seen`
    earlier (pid -> start time, so a reused pid is left alone): setsid'd ones included."""
    kids = descendants(pid)
    kill_group(pid)
    targets: dict[int, str | None] = {p: None for p in [pid, *kids]}
    for p, started in (seen or {}).items():
        if started is not None and _start_time(p) == started:
            targets[p] = started
    for p in targets:
        try:
            os.kill(p, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, OSError):
            pass


# --------------------------------------------------------------------------- handles


@dataclass
class LocalHandle:
    job: Job
    proc: subprocess.Popen[bytes]
    started: float
    deadline: float
    queue: "queue.Queue[tuple[str, bytes | str | None]]"
    keeper: OutputKeeper
    memory_limit_mb: int = 0
    readers: list[threading.Thread] = field(default_factory=list)
    open_streams: int = 2
    cancelled: bool = False
    timed_out: bool = False
    out_of_memory: bool = False
    peak_mb: float = 0.0
    next_memory_check: float = 0.0
    finished: float | None = None
    streamed_chars: int = 0
    stream_capped: bool = False
    drained: bool = False
    exited_at: float | None = None
    sandboxed: bool = False
    seen: dict[int, str | None] = field(default_factory=dict)   # descendants seen: pid -> start time
    unfinished: dict[str, str] = field(default_factory=lambda: {"stdout": "", "stderr": ""})  # kept output
    _result: ExecResult | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid


def _reader(pipe: IO[bytes], name: str, q: queue.Queue[tuple[str, bytes | str | None]]) -> None:
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


class _Pending:
    """Output not yet handed out, per stream, as a list of pieces (linear, unlike `str +=`)."""

    def __init__(self) -> None:
        self.parts: dict[str, list[str]] = {"stdout": [], "stderr": []}
        self.size = 0
        self.order: list[str] = []

    def add(self, name: str, text: str) -> None:
        self.parts[name].append(text)
        self.size += len(text)
        if name not in self.order:
            self.order.append(name)

    def take(self, *, final: bool) -> list[tuple[str, str]]:
        """(stream, text) pieces ready to hand out: whole lines, or everything when final."""
        out: list[tuple[str, str]] = []
        for name in list(self.order):
            text = "".join(self.parts[name])
            if final:
                ready, rest = text, ""
            else:
                cut = text.rfind("\n")
                if cut < 0:
                    self.parts[name] = [text]
                    continue
                ready, rest = text[: cut + 1], text[cut + 1:]
            self.parts[name] = [rest] if rest else []
            self.size -= len(ready)
            if not rest:
                self.order.remove(name)
            out.append((name, ready))
        return out


class LocalExecutor:
    """Runs jobs as local child processes inside `sandbox` (see the module docstring).

    With no sandbox given it uses bubblewrap and raises SandboxUnavailable where namespaces
    cannot be created: running model-written code unsandboxed takes an explicit Sandbox("none").
    """

    def __init__(self, *, sandbox: Sandbox | None = None, flush_interval: float = 0.2, flush_bytes: int = 65536,
                 heartbeat: float = 0.2, memory_poll: float = 0.25, python: str | None = None):
        self.sandbox = sandbox if sandbox is not None else Sandbox.create("auto")
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.heartbeat = heartbeat
        self.memory_poll = memory_poll
        self.python = python or sys.executable

    # -- the Executor interface ---------------------------------------------------------
    def submit(self, job: Job) -> LocalHandle:
        workdir = Path(job.workdir).resolve()
        argv = list(job.command) if job.command else [self.python, job.script]
        if not job.command and not (workdir / job.script).is_file():
            raise FileNotFoundError(f"{workdir / job.script} does not exist")
        memory = DEFAULT_MEMORY_LIMIT_MB if job.memory_limit_mb is None else int(job.memory_limit_mb)
        session_input = session_input_of(workdir)
        spec = RunSpec(cwd=workdir, writable=([workdir] if job.workdir_writable else []) + list(job.writable),
                       read_only=([] if job.workdir_writable else [workdir]) + list(job.read_only)
                       + ([session_input] if session_input else []),
                       files=list(job.files), gpu=_uses_gpu(job))
        proc = subprocess.Popen(
            self.sandbox.wrap(argv, spec), cwd=str(workdir), env=node_env(job),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, preexec_fn=_preexec(0 if _uses_gpu(job) else memory), close_fds=True,
        )
        started = time.monotonic()
        if job.workdir_writable:
            try:
                pgid_file(workdir).write_text(str(proc.pid))
            except OSError:
                pass
        handle = LocalHandle(job=job, proc=proc, started=started, deadline=started + float(job.timeout),
                             queue=queue.Queue(), keeper=OutputKeeper(job.output_cap), memory_limit_mb=memory,
                             sandboxed=self.sandbox.isolated)
        for pipe, name in ((proc.stdout, "stdout"), (proc.stderr, "stderr")):
            t = threading.Thread(target=_reader, args=(pipe, name, handle.queue), daemon=True,
                                 name=f"befair-node{job.node_id}-{name}")
            t.start()
            handle.readers.append(t)
        return handle

    def stream(self, handle: LocalHandle) -> Iterator[list[OutputChunk]]:
        """Batches of output while the process runs; an (often empty) batch at least every
        `heartbeat` seconds. Ends when the process has exited and its output is drained."""
        pending = _Pending()
        last_flush = last_yield = time.monotonic()
        while not handle.drained:
            self._enforce_limits(handle)
            now = time.monotonic()
            wait = max(0.01, min(self.heartbeat - (now - last_yield), self.flush_interval - (now - last_flush)))
            for name, text in self._drain_queue(handle, wait):
                if text is None:
                    handle.open_streams -= 1
                    self._keep(handle, name, "", final=True)
                    continue
                self._keep(handle, name, text, final=False)
                if not handle.stream_capped:
                    pending.add(name, text)
            self._check_exit(handle)
            now = time.monotonic()
            batch: list[OutputChunk] = []
            full = pending.size >= self.flush_bytes
            if handle.drained or full or now - last_flush >= self.flush_interval:
                batch = self._chunks(handle, pending.take(final=handle.drained or full))
                last_flush = now
            if batch or now - last_yield >= self.heartbeat or handle.drained:
                last_yield = now
                yield batch

    def cancel(self, handle: LocalHandle) -> None:
        if handle.proc.poll() is None:
            handle.cancelled = True
        kill_tree(handle.proc.pid, handle.seen)

    def result(self, handle: LocalHandle) -> ExecResult:
        if handle._result is not None:
            return handle._result
        if not handle.drained:
            for _ in self.stream(handle):
                pass
        handle._result = self._verdict(handle)
        if handle.job.workdir_writable:
            try:
                pgid_file(Path(handle.job.workdir).resolve()).unlink()
            except OSError:
                pass
        return handle._result

    # -- helpers ------------------------------------------------------------------------
    def _drain_queue(self, handle: LocalHandle, wait: float) -> list[tuple[str, str | None]]:
        try:
            got = [handle.queue.get(timeout=wait)]
        except queue.Empty:
            return []
        while len(got) < 4096:  # take what is already there, in bounded rounds
            try:
                got.append(handle.queue.get_nowait())
            except queue.Empty:
                break
        return got  # type: ignore[return-value]

    @staticmethod
    def _keep(handle: LocalHandle, name: str, text: str, *, final: bool) -> None:
        """Keep output in whole lines, so stdout and stderr interleave line by line and a
        traceback is never split by the other stream (a line over 64 KiB is kept as it comes)."""
        text = handle.unfinished[name] + text
        cut = len(text) if final or len(text) > 65536 else text.rfind("\n") + 1
        handle.unfinished[name] = text[cut:]
        if cut:
            handle.keeper.add(text[:cut])

    def _enforce_limits(self, handle: LocalHandle) -> None:
        if handle.proc.poll() is not None or handle.cancelled or handle.timed_out or handle.out_of_memory:
            return
        now = time.monotonic()
        if now >= handle.deadline:
            handle.timed_out = True
            kill_tree(handle.proc.pid)
            return
        if now < handle.next_memory_check:
            return
        handle.next_memory_check = now + self.memory_poll
        for pid in descendants(handle.proc.pid):
            handle.seen.setdefault(pid, _start_time(pid))
        used = tree_memory_mb(handle.proc.pid)
        handle.peak_mb = max(handle.peak_mb, used)
        if handle.memory_limit_mb > 0 and used > handle.memory_limit_mb:
            handle.out_of_memory = True
            kill_tree(handle.proc.pid)

    def _check_exit(self, handle: LocalHandle) -> None:
        if handle.open_streams <= 0:
            self._wait(handle)
            handle.drained = True
        elif handle.proc.poll() is not None:
            # exited, but a process it started may hold the pipes open: end it all soon
            handle.exited_at = handle.exited_at or time.monotonic()
            kill_tree(handle.proc.pid, handle.seen)
            if time.monotonic() - handle.exited_at > 2.0:
                self._wait(handle)
                handle.drained = True

    def _wait(self, handle: LocalHandle) -> None:
        while True:
            try:
                handle.proc.wait(timeout=self.heartbeat)
                break
            except subprocess.TimeoutExpired:
                self._enforce_limits(handle)
        kill_tree(handle.proc.pid, handle.seen)  # nothing the run started outlives it
        handle.finished = time.monotonic()

    def _chunks(self, handle: LocalHandle, pieces: list[tuple[str, str]]) -> list[OutputChunk]:
        batch = []
        for name, text in pieces:
            text = self._cap(handle, text)
            if text:
                batch.append(OutputChunk(text=text, stream=name))
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

    def _verdict(self, handle: LocalHandle) -> ExecResult:
        exit_code = handle.proc.returncode
        keeper = handle.keeper
        output = keeper.head + keeper.tail
        oom = handle.out_of_memory or (exit_code != 0 and handle.memory_limit_mb > 0
                                       and any(m in output[-4000:] for m in _MEMORY_ERRORS))
        if handle.cancelled:
            status = "interrupted"
        elif handle.timed_out:
            status = "timeout"
        elif exit_code == 0 and not handle.out_of_memory:
            status = "ok"
        else:
            status = "buggy"
        exc = exception_type(keeper.tail or output) or exception_type(output)
        if status == "timeout":
            exc = exc or "TimeoutError"
        elif status == "buggy" and oom:
            exc = out_of_memory_reason(handle.memory_limit_mb)
        elif status == "buggy" and exc is None and exit_code is not None and exit_code < 0:
            try:
                exc = f"killed by {signal.Signals(-exit_code).name}"
            except ValueError:
                exc = f"killed by signal {-exit_code}"
        return ExecResult(
            status=status, exit_code=exit_code, exec_time=(handle.finished or time.monotonic()) - handle.started,
            exc_type=exc, output_head=keeper.head, output_tail=keeper.tail, truncated=keeper.truncated,
            output_chars=keeper.total, peak_rss_mb=handle.peak_mb or None, out_of_memory=status == "buggy" and oom,
            sandboxed=handle.sandboxed,
        )
