"""A session's settings, each declared once, by section: the one table the `befair run` flags,
SessionConfig's defaults, the setup screen's defaults, the study spec's keys and the
environment variables are read from.

    OPTIONS["steps"]              # Option("steps", int, 20, "step budget ...", section="task", ...)
    add_arguments(parser)         # `befair run`'s flags, one group per section (its --help)
    spec_keys()                   # a study spec's keys of session settings ("steps", "search.num_drafts")
    at_setup()                    # the options the setup screen offers
    check_values(values)          # a value outside its declared range, as `--flag must be ... (got v)`

OPTIONS is keyed by the command line's dest (`Option.cli_dest`), unique across the table; an
option's `name` is where a session keeps it (`stored`: a SessionConfig field, a key of its
`extra`, of `extra["synth"]` or of `extra["llm"]`, or nowhere: how this run is run). The LLM
coder's own settings are declared beside its configuration (engine.coders.llm.config.LLM_OPTIONS,
which also names their environment variables) and are this table's `llm` section. Building a
SessionConfig from these values: SessionConfig.from_options (engine.agent.session_config).
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.agent.task_protocol import TASK_PROTOCOLS
from engine.coders.llm.config import LLM_OPTIONS
from engine.data.synth import DEFAULTS as SYNTH_DEFAULTS
from engine.measures.operating_point import DEFAULT as DEFAULT_OPERATING_POINT, Setting
from engine.options import Option
from engine.session.feedback import FEEDBACK
from engine.session.selection import CRITERIA as BEST_CRITERIA
from engine.session.selection import DEFAULT_CRITERION
from engine.task import CUSTOM, LEVELS

__all__ = ["OPTIONS", "POLICIES", "PROTOCOLS", "SANDBOX_CHOICES", "SANDBOX_MODES", "SECTIONS", "add_arguments",
           "at_setup", "check_values", "default", "help_text", "problem", "spec_keys"]

# The task a session's agent is given: the product's own (a withheld validation split, its prompt)
# or the "Be Fair!" study's exact one (engine.data.be_fair_layout: mydataset.csv + MyImages/, AIDE's prompt).
PROTOCOLS = tuple(TASK_PROTOCOLS)  # ("befair", "be-fair"): engine.agent.task_protocol
# How the search picks its next step (engine.agent.policy): befair's (drafts scaled with the budget,
# a failure debugged at once) or AIDE's exact rule (5 drafts, then debug with probability debug_prob).
POLICIES = ("befair", "aide")
SANDBOX_MODES = ("bwrap", "none")            # what a session records
SANDBOX_CHOICES = ("auto", *SANDBOX_MODES)   # what a person may ask for (auto: bwrap, or a refusal)
DEFAULT_STEP_TIMEOUT = 600.0
STEP_TIMEOUT_BY_PROTOCOL = {"be-fair": 3600.0}   # the study's AIDE config: exec.timeout 3600

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


def _operating_point_ok(value: Any) -> bool:
    Setting.parse(str(value))   # a ValueError says what is wrong
    return True


_AT_LEAST_1 = (lambda v: v >= 1, "at least 1")
_ZERO_OR_MORE = (lambda v: v >= 0, "0 or more")
_SHARE = (lambda v: 0 <= v <= 1, "between 0 and 1")

_SESSION: tuple[Option, ...] = (
    # -- the task -------------------------------------------------------------------------
    Option("headless", bool, False, "no console: print progress to the terminal", section="task",
           flag="--headless", action="store_true", stored=""),
    Option("level", str, "base", "instruction level", section="task", flag="--level",
           choices=(*LEVELS, CUSTOM), at_setup=True),
    Option("custom_text", str, None, "the instruction for --level custom (recorded verbatim)", section="task",
           flag="--custom-text", at_setup=True),
    Option("steps", int, 20, "step budget: nodes the search may create", section="task", flag="--steps",
           at_setup=True, spec="steps", check=_AT_LEAST_1),
    # its choices and their words are the kinds of engine.agent.coder_registry, which fills them in
    Option("coder", str, "offline", "the coder", section="task", flag="--coder", at_setup=True, spec="coder.name"),
    # -- data -----------------------------------------------------------------------------
    Option("data", str, "synth", "'synth' (generated SynthDerm, cached) or a prepared workspace folder",
           section="data", flag="--data", at_setup=True, spec="data"),
    Option("synth_n_train", int, SYNTH_DEFAULTS["n_train"], "SynthDerm training images", section="data",
           flag="--synth-n-train", at_setup=True, spec="data.synth.n_train", given_only=True,
           stored="extra.synth", check=_AT_LEAST_1),
    Option("synth_n_test", int, SYNTH_DEFAULTS["n_test"], "SynthDerm test images", section="data",
           flag="--synth-n-test", at_setup=True, spec="data.synth.n_test", given_only=True,
           stored="extra.synth", check=_AT_LEAST_1),
    Option("synth_size", int, SYNTH_DEFAULTS["size"], "SynthDerm image size in pixels", section="data",
           flag="--synth-size", at_setup=True, spec="data.synth.size", given_only=True, stored="extra.synth",
           check=(lambda v: v >= 1, "at least 1 pixel")),
    Option("synth_seed", int, SYNTH_DEFAULTS["seed"], "the seed SynthDerm is generated with", section="data",
           spec="data.synth.seed", stored="extra.synth", check=_ZERO_OR_MORE),
    Option("seed", int, 0, "the agent's seed (same seed, same session)", section="data", flag="--seed",
           at_setup=True, spec="seed"),
    # -- what the agent is shown, what "best" means ---------------------------------------
    Option("best", str, DEFAULT_CRITERION, "what 'best node' means for ★ and for the search's improve step "
           "(default: validation; claimed under --protocol be-fair); switch it live with `befair steer SESSION "
           "criterion C` or the console", section="evaluation", flag="--best", choices=BEST_CRITERIA,
           at_setup=True, spec="best", given_only=True),
    Option("feedback", str, None, "what the agent is shown of befair's measurements: none (its own output only, "
           "as AIDE), auc (the measured validation AUC; the default at every level) or groups (AUC, each "
           "skin-tone group's AUC and the gap); switch it live with `befair steer SESSION feedback F`; "
           "--protocol be-fair: none", section="evaluation", flag="--feedback", choices=FEEDBACK, at_setup=True,
           spec="feedback", given_only=True),
    Option("operating_point", str, DEFAULT_OPERATING_POINT, "where a lesion is called malignant in every "
           "per-skin-tone figure: sensitivity:0.90 (the cut-off that catches 90%% of malignant lesions on "
           "validation, all skin tones pooled), sensitivity:0.95, or a fixed probability:0.3",
           section="evaluation", flag="--operating-point", metavar="SPEC", at_setup=True, spec="operating_point",
           check=(_operating_point_ok, "sensitivity:S or probability:P, each between 0 and 1")),
    Option("protocol", str, "befair", "befair: the product's task (a validation set withheld and measured); "
           "be-fair: the study's exact task (mydataset.csv + MyImages/, AIDE's prompts, test set only, blinded; "
           "needs an LLM coder)", section="evaluation", flag="--protocol", choices=PROTOCOLS),
    # -- limits, blinding, the sandbox ----------------------------------------------------
    Option("blind_test", bool, False, "mark test metrics blinded (studies)", section="execution",
           flag="--blind-test", action="store_true", at_setup=True, spec="blind_test"),
    Option("step_timeout", float, 0.0, f"seconds per node execution (default {DEFAULT_STEP_TIMEOUT:.0f}; "
           f"{STEP_TIMEOUT_BY_PROTOCOL['be-fair']:.0f} under --protocol be-fair, as the study's AIDE)",
           section="execution", flag="--step-timeout", at_setup=True, spec="step_timeout", given_only=True,
           check=(lambda v: v > 0 and math.isfinite(v), "a positive number of seconds")),
    Option("time_limit_s", float, None, "the whole session's time in seconds: it ends then, as at its budget",
           section="execution", spec="time_limit"),
    Option("memory_limit_mb", int, 8192, "MiB per node, for its run and its evaluation (0: no limit)",
           section="execution", flag="--memory-limit", dest="memory_limit", spec="memory_limit_mb",
           check=(lambda v: v >= 0, "0 (no limit) or more MiB")),
    Option("eval_timeout", float, None, "seconds per node evaluation (default: the step timeout)",
           section="execution", flag="--eval-timeout", spec="eval_timeout",
           check=(lambda v: v > 0, "a positive number of seconds")),
    Option("output_cap", int, 200_000, "bytes of output kept per node (head and tail)", section="execution"),
    Option("sandbox", str, "auto", "run agent code in a bubblewrap sandbox (auto/bwrap: refuse where namespaces "
           "are unavailable); none: run it unsandboxed, and mark the session UNSANDBOXED", section="execution",
           flag="--sandbox", choices=SANDBOX_CHOICES, spec="sandbox"),
    # -- the search policy, the offline coder, the device ---------------------------------
    Option("failure_rate", float, 0.15, "offline coder: share of pipelines written with a bug", section="search",
           flag="--failure-rate", spec="search.failure_rate", check=_SHARE),
    Option("policy", str, "befair", "how the next step is chosen: befair (drafts scale with the budget, a "
           "failure is debugged at once) or aide (AIDE's exact rule: 5 drafts, then debug with --debug-prob); "
           "--protocol be-fair always uses aide", section="search", flag="--policy", choices=POLICIES),
    Option("num_drafts", int, None, "initial drafts (default: budget/4 in 1-5 under --policy befair, 5 under "
           "aide)", section="search", flag="--num-drafts", spec="search.num_drafts", check=_AT_LEAST_1),
    Option("debug_prob", float, 0.5, "--policy aide: probability of debugging a buggy leaf", section="search",
           flag="--debug-prob", spec="search.debug_prob", check=_SHARE),
    Option("max_debug_depth", int, 3, "debug attempts in a row", section="search", flag="--max-debug-depth",
           spec="search.max_debug_depth", check=_ZERO_OR_MORE),
    Option("device", str, None, "evaluation device (cpu, cuda); default: GPU when present", section="search",
           flag="--device", stored="extra"),
    # -- studies, guidance, where the settings come from ----------------------------------
    Option("participant_id", str, None, "participant id (user studies)", section="study", flag="--participant",
           dest="participant", at_setup=True),
    Option("study_id", str, None, "study id (user studies)", section="study", flag="--study", dest="study"),
    Option("repeat_index", int, None, "repeat index within a study", section="study", flag="--repeat",
           dest="repeat", check=_ZERO_OR_MORE),
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

OPTIONS: dict[str, Option] = {o.cli_dest: o for o in (*_SESSION[:5], *LLM_OPTIONS, *_SESSION[5:])}


def default(name: str) -> Any:
    """The declared default of the option stored as `name` (SessionConfig's and SetupChoices' defaults)."""
    return next(o.default for o in OPTIONS.values() if o.name == name and o.section != "llm")


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
