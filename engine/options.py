"""One setting, declared once: its name, type, default, help, section, choices, flag, environment
variable, whether the setup screen shows it and its key in a study spec.

    Option("steps", int, 20, "step budget: nodes the search may create", section="task",
           flag="--steps", at_setup=True, spec="steps", check=(lambda v: v >= 1, "at least 1"))

The session's settings (engine.agent.settings.OPTIONS) and a coder's (engine.agent.coder_registry,
engine.coders.llm.config.LLM_OPTIONS) are tables of these; the `befair run` flags, the setup
screen's defaults, the study spec's keys and the environment variables are read from them.
`name` is the setting's name where it is stored (a SessionConfig field, a key of its `extra`, or
an LlmConfig field); `dest` is the command line's name for it when that differs (argparse's
dest: `--llm-timeout` is stored as `timeout`).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Option:
    name: str
    type: type
    default: object
    help: str
    section: str = ""
    flag: str | None = None          # the command-line flag, e.g. "--max-tokens"; None: none
    dest: str | None = None          # argparse's dest when not `name`
    metavar: str | None = None
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None   # a callable: read when asked
    env: str | None = None           # the environment variable it is read from
    at_setup: bool = False           # the setup screen offers it
    spec: str | None = None          # its key in a study spec ("steps", "search.num_drafts", "coder.model")
    given_only: bool = False         # the flag defaults to None, "not given": the value then comes from
                                     # elsewhere (the task protocol, a config file, the environment)
    stored: str = "field"            # where a session keeps it: "field" (SessionConfig), "extra" (its
                                     # extra dict), "extra.synth", "llm" (extra["llm"]); "": not kept
    action: str | None = None        # argparse's action: "store_true", "append"
    check: tuple[Callable[[Any], bool], str] | None = None   # a valid value, and the rule in words

    @property
    def cli_dest(self) -> str:
        return self.dest or self.name

    def allowed(self) -> tuple[str, ...] | None:
        """The choices, read now (a callable's too)."""
        return self.choices() if callable(self.choices) else self.choices

    @property
    def cli_default(self) -> object:
        """The flag's default: False for a switch, [] for a repeatable one, None when not given
        means "from elsewhere", else the declared default."""
        if self.action == "store_true":
            return False
        if self.action == "append":
            return []
        return None if self.given_only else self.default

    def add_to(self, parser: Any, help_text: str | None = None) -> None:
        """Add this option's flag to an argparse parser or group (`help_text`: its --help words)."""
        kw: dict[str, Any] = {"dest": self.cli_dest, "default": self.cli_default,
                              "help": self.help if help_text is None else help_text}
        if self.action:
            kw["action"] = self.action
        else:
            kw["type"] = self.type
            choices = self.allowed()
            if choices is not None:
                kw["choices"] = list(choices)
        if self.metavar:
            kw["metavar"] = self.metavar
        parser.add_argument(self.flag, **kw)
