"""One setting, declared once: its name, type, default, help, section, choices, flag, environment
variable, whether the setup screen shows it and its key in a study spec.

A setting kept in a typed model is declared by that model's field (`setting`): the field gives the
name and the type, the declaration the rest, and `declared(Model)` reads the Options back:

    @dataclass
    class SessionConfig:
        steps: int = setting(20, "step budget: nodes the search may create", section="task",
                             flag="--steps", at_setup=True, spec="steps", check=AT_LEAST_1)

A setting kept nowhere, or in a dict, is an Option of its own: Option("quiet", bool, False, ...).
The session's settings (engine.agent.settings.OPTIONS) and a coder's (engine.agent.coder_registry,
engine.coders.llm.config.LLM_OPTIONS) are tables of these; the `befair run` flags, the setup
screen's inputs, the study spec's keys and the environment variables are read from them.
`name` is the setting's name where it is stored (a SessionConfig field, a key of its `extra`, or
an LlmConfig field); `dest` is the command line's name for it when that differs (argparse's
dest: `--llm-timeout` is stored as `timeout`).
"""
from __future__ import annotations

import types
import typing
from collections.abc import Callable
from dataclasses import MISSING, Field, dataclass, field, fields
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
    bounds: tuple[int, int] | None = None   # the setup screen's range for a whole number (lowest, highest)
    what: str = ""                   # the setting in the setup screen's messages ("the step budget")

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


AT_LEAST_1: tuple[Callable[[Any], bool], str] = (lambda v: v >= 1, "at least 1")
ZERO_OR_MORE: tuple[Callable[[Any], bool], str] = (lambda v: v >= 0, "0 or more")
SHARE: tuple[Callable[[Any], bool], str] = (lambda v: 0 <= v <= 1, "between 0 and 1")

_DECLARES = "befair.option"   # a field's metadata key: the rest of its option's declaration


def setting(default: Any, help: str, *, recorded: Any = MISSING, **declaration: Any) -> Any:
    """A dataclass field that declares an option (Option's keywords; its name and type are the
    field's, its `type` may be given where the flag reads another, as a switch read as on|off; a `spec`
    ending in "." names a table of the study spec, the field's name its key there: "coder." gives
    "coder.temperature").
    `recorded`: the field's own default where a model keeps what the option's default resolves to
    (the sandbox "auto" is recorded as "bwrap")."""
    kept = default if recorded is MISSING else recorded
    return field(default=kept, metadata={_DECLARES: {"default": default, "help": help, **declaration}})


def declared(model: type) -> tuple[Option, ...]:
    """The options a dataclass's fields declare (`setting`), in field order."""
    hints = typing.get_type_hints(model)
    return tuple(_option(f, hints[f.name]) for f in fields(model) if _DECLARES in f.metadata)


def _option(declaring: Field[Any], hint: Any) -> Option:
    declaration = dict(declaring.metadata[_DECLARES])
    if str(declaration.get("spec")).endswith("."):   # a spec table ("coder."): the field's name is its key there
        declaration["spec"] += declaring.name
    return Option(declaring.name, declaration.pop("type", None) or _plain(hint), **declaration)


def _plain(hint: Any) -> type:
    """`int` of `int | None`; a plain type as it is."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return next(arg for arg in typing.get_args(hint) if arg is not type(None))  # type: ignore[no-any-return]
    return hint  # type: ignore[no-any-return]

