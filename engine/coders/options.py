"""One setting a coder kind declares: the table the registry, the CLI and the LLM config read.

    CoderOption("max_tokens", int, 4096, "completion cap ...", flag="--max-tokens", metavar="TOKENS")

`name` is the setting's name where it is stored (a SessionConfig field for the offline coder, an
LlmConfig field for the LLM coder); `dest` is the command line's name for it when that differs
(argparse's dest: `--llm-timeout` is stored as `timeout`).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CoderOption:
    name: str
    type: type
    default: object
    help: str
    flag: str | None = None          # the command-line flag, e.g. "--max-tokens"
    dest: str | None = None          # argparse's dest when not `name`
    metavar: str | None = None

    @property
    def cli_dest(self) -> str:
        return self.dest or self.name
