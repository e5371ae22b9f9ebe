"""Progress for work that takes more than a couple of seconds, as rich bars on a terminal and a
line every ~10 % otherwise (logs, CI). Engine code takes a plain callback
`progress(stage, done, total)`; `task_progress` makes one.

    with task_progress("generating SynthDerm") as progress:
        generate(out, ..., progress=progress)
"""
from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Callable, Iterator
from typing import TextIO

ProgressFn = Callable[[str, int, int], None]


@contextlib.contextmanager
def task_progress(description: str, *, quiet: bool = False, stream: TextIO | None = None) -> Iterator[ProgressFn]:
    out = stream or sys.stderr
    if quiet:
        yield lambda stage, done, total: None
        return
    if hasattr(out, "isatty") and out.isatty():
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TaskProgressColumn, TextColumn, \
            TimeElapsedColumn, TimeRemainingColumn

        columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TaskProgressColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn())
        with Progress(*columns, console=Console(file=out), transient=False) as bar:
            tasks: dict[str, TaskID] = {}

            def update(stage: str, done: int, total: int) -> None:
                if stage not in tasks:
                    tasks[stage] = bar.add_task(f"{description}: {stage}", total=total)
                bar.update(tasks[stage], completed=done, total=total)

            yield update
        return
    started = time.monotonic()
    shown: dict[str, int] = {}

    def log(stage: str, done: int, total: int) -> None:
        tenth = int(10 * done / max(total, 1))
        if shown.get(stage, -1) < tenth:
            shown[stage] = tenth
            out.write(f"{description}: {stage} {done}/{total} ({time.monotonic() - started:.0f} s)\n")
            out.flush()

    yield log
