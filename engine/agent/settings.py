"""A session's settings, each declared once, by section: the one table the `befair run` flags,
the setup screen's inputs, the study spec's keys and the environment variables are read from.

    OPTIONS["steps"]              # Option("steps", int, 20, "step budget ...", section="task", ...)
    add_arguments(parser)         # `befair run`'s flags, one group per section (its --help)
    spec_keys()                   # a study spec's keys of session settings ("steps", "search.num_drafts")
    at_setup()                    # the options the setup screen offers
    check_values(values)          # a value outside its declared range, as `--flag must be ... (got v)`

OPTIONS is keyed by the command line's dest (`Option.cli_dest`), unique across the table; an
option's `name` is where a session keeps it (`stored`: a SessionConfig field, a key of its
`extra`, of `extra["synth"]` or of `extra["llm"]`, or nowhere: how this run is run). The table
gathers the declarations: a session's settings are SessionConfig's fields and its EXTRA_OPTIONS
(engine.agent.session_config), the LLM coder's are LlmConfig's fields (engine.coders.llm.config.
LLM_OPTIONS, which also name their environment variables; this table's `llm` section), and how this
run is run is declared here (RUN_OPTIONS). Building a SessionConfig from these values:
SessionConfig.from_options.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from engine.agent.session_config import SESSION_OPTIONS
from engine.options import Option

__all__ = ["OPTIONS", "RUN_OPTIONS", "SECTIONS", "add_arguments", "at_setup", "check_values", "help_text",
           "problem", "spec_keys"]

# section -> the title of its group in `befair run --help`, in the order shown
SECTIONS: dict[str, str] = {
    "task": "the task: instruction level, budget, coder",
    "llm": "LLM coder (--coder openai)",
    "data": "data",
    "evaluation": "what the agent is shown and what 'best' means",
    "execution": "limits, blinding and the sandbox",
    "search": "search policy, the offline coder, the evaluation device",
    "study": "studies, guidance, and where the settings come from",
}

# how this run is run, kept nowhere
RUN_OPTIONS: tuple[Option, ...] = (
    Option("headless", bool, False, "no console: print progress to the terminal", section="task",
           flag="--headless", action="store_true", stored=""),
    Option("guidance", str, None, "global guidance in force from the first step (repeatable)", section="study",
           flag="--guidance", metavar="TEXT", action="append", stored=""),
    Option("session_id", str, None, "use this id for the new session", section="study", flag="--session-id",
           stored=""),
    Option("request", Path, None, "start the session this JSON file describes (written by the console for the "
           "run it starts detached); the settings flags above are then not read", section="study",
           flag="--request", metavar="FILE", stored=""),
    Option("quiet", bool, False, "print nothing but errors", section="study", flag="--quiet", action="store_true",
           stored=""),
)


def _by_section(options: Iterable[Option]) -> dict[str, Option]:
    """The options by command-line name, a section's together (in the order given), the sections in
    SECTIONS' order."""
    order = list(SECTIONS)
    return {o.cli_dest: o for o in sorted(options, key=lambda o: order.index(o.section))}


# a section lists the settings a session keeps (in SessionConfig's order, the LLM coder's, extra's), then the
# run's own
OPTIONS: dict[str, Option] = _by_section((*SESSION_OPTIONS.values(), *RUN_OPTIONS))


def help_text(option: Option) -> str:
    """An option's help for --help: its words, and its default where they do not give it."""
    words = option.help
    if option.action or option.default in (None, "") or option.section == "llm" or "default" in words:
        return words   # (an LLM setting's default is the config file's, the environment's, then LlmConfig's)
    return f"{words} (default: {option.default})" if words else f"default: {option.default}"


def add_arguments(parser: Any) -> None:
    """`befair run`'s flags: a group per section (SECTIONS' titles, in order), an option a flag (import
    engine.agent.coder_registry first: it names the --coder option's choices)."""
    for section, title in SECTIONS.items():
        group = parser.add_argument_group(title)
        for option in OPTIONS.values():
            if option.section == section and option.flag:
                option.add_to(group, help_text(option))


def spec_keys() -> dict[str, Option]:
    """A study spec's keys of session settings ("steps", "search.num_drafts", "coder.model", ...)."""
    return {o.spec: o for o in OPTIONS.values() if o.spec}


def at_setup() -> dict[str, Option]:
    """The options the setup screen offers, by command-line name (dest)."""
    return {dest: o for dest, o in OPTIONS.items() if o.at_setup}


def problem(option: Option, value: Any, name: str) -> str | None:
    """Why `value` breaks `option`'s declared rule, naming it `name` (a flag, a spec key); None: it keeps it."""
    if option.check is None:
        return None
    rule, words = option.check
    try:
        ok = rule(value)
    except ValueError as exc:       # a rule that says what is wrong in its own words
        return f"{name}: {exc}"
    shown = f"{value:g}" if isinstance(value, (int, float)) and not isinstance(value, bool) else repr(value)
    return None if ok else f"{name} must be {words} (got {shown})"


def check_values(values: Mapping[str, Any]) -> str | None:
    """The first value (keyed by cli_dest) outside its option's declared rule, said with its flag;
    None when every given value keeps it."""
    for dest, option in OPTIONS.items():
        value = values.get(dest)
        if value is not None:
            said = problem(option, value, option.flag or dest)
            if said:
                return said
    return None
