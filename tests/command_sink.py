"""The runner's side of a steering command in tests: engine.agent.commands applied through a
session's writer, as the runner applies them between steps."""
from __future__ import annotations

from typing import Any


class WriterSink:
    stop = False
    interrupt = False

    def __init__(self, writer: Any):
        self.writer = writer

    @property
    def state(self) -> Any:
        return self.writer.state

    def emit(self, event: Any, *, consumes: dict[str, Any] | None = None, result: str = "applied") -> Any:
        return self.writer.emit(event, consumes=consumes, result=result)

    def consume(self, cmd: dict[str, Any], result: str) -> None:
        self.writer.consume_command(cmd, result)
