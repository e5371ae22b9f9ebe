"""The executor interface: how the search runs a node's `python solution.py`.

The search only talks to an `Executor` (submit, stream, cancel, result), so a distributed
executor (Ray, one GPU per task) can replace the local one without touching the search.

    handle = executor.submit(job)
    for batch in executor.stream(handle):      # lists of OutputChunk, at least every `heartbeat`
        ...                                    # (possibly empty: the caller may poll commands)
        if stop_wanted:
            executor.cancel(handle)
    result = executor.result(handle)           # ExecResult (status ok|buggy|timeout|interrupted)
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from collections.abc import Iterator

DEFAULT_MEMORY_LIMIT_MB = 16384   # address space; torch/CUDA reserve a lot of virtual memory
DEFAULT_OUTPUT_CAP = 200_000      # characters of output kept (head and tail)


@dataclass
class Job:
    """One run of agent code: `python <script>` (or `command`) inside `workdir`.

    Inside the sandbox the run sees `workdir` (read-write unless `workdir_writable` is False),
    `read_only` and `writable` (same paths inside), `files` ((host file, path inside), read-only)
    and the Python runtime; nothing else of the host. The caller names every path: nothing is
    mounted because the workdir links to it.
    """
    node_id: int
    workdir: Path
    script: str = "solution.py"
    timeout: float = 600.0
    memory_limit_mb: int = DEFAULT_MEMORY_LIMIT_MB   # 0: no limit
    output_cap: int = DEFAULT_OUTPUT_CAP
    env: dict[str, str] = field(default_factory=dict)  # extra environment variables (allow-listed base)
    threads: int = 2                                  # OMP/MKL/torch threads
    command: list[str] | None = None                  # default: [python, script]
    read_only: list[Path] = field(default_factory=list)
    writable: list[Path] = field(default_factory=list)
    files: list[tuple[Path, str]] = field(default_factory=list)
    workdir_writable: bool = True
    device: str | None = None                         # "cuda..." binds the GPU devices; "cpu" hides them


@dataclass
class OutputChunk:
    text: str          # newline-terminated lines (the last chunk of a stream may lack one)
    stream: str        # "stdout" | "stderr"


@dataclass
class ExecResult:
    status: str                    # ok | buggy | timeout | interrupted
    exit_code: int | None
    exec_time: float
    exc_type: str | None
    output_head: str
    output_tail: str
    truncated: bool
    output_chars: int = 0          # characters the process wrote in all
    peak_rss_mb: float | None = None   # peak memory of the run's processes (PSS, sampled)
    out_of_memory: bool = False        # killed for passing the memory limit
    sandboxed: bool = False

    @property
    def cut_chars(self) -> int:
        return max(0, self.output_chars - len(self.output_head) - len(self.output_tail))

    @property
    def output(self) -> str:
        if self.truncated:
            return f"{self.output_head}\n{cut_marker(self.cut_chars)}\n{self.output_tail}"
        return self.output_head + self.output_tail

    def to_payload(self, node_id: int) -> dict[str, Any]:
        """The exec_finished event's payload."""
        return {
            "node_id": node_id, "status": self.status, "exit_code": self.exit_code,
            "exec_time": round(self.exec_time, 4), "exc_type": self.exc_type,
            "output_head": self.output_head, "output_tail": self.output_tail,
            "truncated": self.truncated, "cut_chars": self.cut_chars, "output_chars": self.output_chars,
            "peak_mem_mb": None if self.peak_rss_mb is None else round(self.peak_rss_mb, 1),
            "out_of_memory": self.out_of_memory, "sandboxed": self.sandboxed,
        }


class Executor(Protocol):
    def submit(self, job: Job) -> Any: ...

    def stream(self, handle: Any) -> Iterator[list[OutputChunk]]: ...

    def cancel(self, handle: Any) -> None: ...

    def result(self, handle: Any) -> ExecResult: ...


def cut_marker(n: int) -> str:
    return f"[… {n:,} characters cut …]"


def out_of_memory_reason(limit_mb: int) -> str:
    return f"out of memory (limit {int(limit_mb)} MiB)"


class OutputKeeper:
    """Keeps the first and last `cap/2` characters of everything written (head and tail)."""

    def __init__(self, cap: int):
        self.half = max(1, cap // 2)
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, text: str) -> None:
        self.total += len(text)
        room = self.half - len(self.head)
        if room > 0:
            self.head += text[:room]
            text = text[room:]
        if text:
            self.tail = (self.tail + text)[-self.half:]

    @property
    def truncated(self) -> bool:
        return self.total > len(self.head) + len(self.tail)


_EXC_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning|Timeout|StopIteration))\b(?::|$)")


def exception_type(output: str) -> str | None:
    """The exception a Python traceback in `output` ended with (e.g. "KeyError"), if any."""
    lines = output.rstrip().splitlines()
    if not any(line.startswith("Traceback (most recent call last)") for line in lines):
        return None
    for line in reversed(lines[-200:]):
        m = _EXC_LINE.match(line.strip())
        if m:
            return m.group(1).rsplit(".", 1)[-1]
    return None
