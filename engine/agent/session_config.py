"""A session's settings, recorded verbatim in its session_started event.

SessionConfig's fields are the declarations of the session's options (engine.options.setting: the
field gives the stored name and type, its declaration the default, help, section, flag, choices,
rule and study spec key); the options a session keeps in its `extra` are declared beside it
(EXTRA_OPTIONS), the LLM coder's with its configuration (engine.coders.llm.config.LLM_OPTIONS), and
engine.agent.settings gathers them, with `befair run`'s own, into the one table of options.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Mapping

from engine.agent.task_protocol import TASK_PROTOCOLS, TaskProtocol, task_protocol
from engine.coders.llm.config import LLM_OPTIONS
from engine.data.synth import DEFAULTS as SYNTH_DEFAULTS
from engine.data.synth import FULL as SYNTH_FULL
from engine.execution.sandbox import resolve_mode
from engine.measures.operating_point import DEFAULT as DEFAULT_OPERATING_POINT, Setting
from engine.measures.operating_point import canonical as canonical_operating_point
from engine.options import AT_LEAST_1, SHARE, ZERO_OR_MORE, Option, declared, setting
from engine.session.feedback import DEFAULT_FEEDBACK, FEEDBACK, LEGACY_FEEDBACK
from engine.session.selection import CRITERIA as BEST_CRITERIA
from engine.session.selection import DEFAULT_CRITERION
from engine.task import CUSTOM, LEVELS, instruction_text

__all__ = ["BEST_CRITERIA", "DEFAULT_CRITERION", "DEFAULT_STEP_TIMEOUT", "EXTRA_OPTIONS", "FEEDBACK", "POLICIES",
           "PROTOCOLS", "SANDBOX_CHOICES", "SANDBOX_MODES", "SESSION_OPTIONS", "SessionConfig", "feedback_allowed"]

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
# What the agent may be shown of befair's measurements, by protocol: AIDE's prompts (be-fair) have
# no place for them, so its agent sees its own output only, as the study's did.
_FEEDBACK_BY_PROTOCOL = {"be-fair": ("none",)}


def feedback_allowed(protocol: str) -> tuple[str, ...]:
    return _FEEDBACK_BY_PROTOCOL.get(protocol, FEEDBACK)


def default_feedback(protocol: str) -> str:
    allowed = feedback_allowed(protocol)
    return DEFAULT_FEEDBACK if DEFAULT_FEEDBACK in allowed else allowed[0]


def _operating_point_ok(value: Any) -> bool:
    Setting.parse(str(value))   # a ValueError says what is wrong
    return True


@dataclass
class SessionConfig:
    # Each field declares its option (engine.options.setting). A field's meaning never changes once
    # recorded: add fields, never rename one, never reorder them (the recorded dict keeps their order).
    # -- the task ---------------------------------------------------------------------------
    level: str = setting("base", "instruction level", section="task", flag="--level", choices=(*LEVELS, CUSTOM),
                         at_setup=True)
    custom_text: str | None = setting(None, "the instruction for --level custom (recorded verbatim)",
                                      section="task", flag="--custom-text", at_setup=True)
    steps: int = setting(20, "step budget: nodes the search may create", section="task", flag="--steps",
                         at_setup=True, spec="steps", check=AT_LEAST_1, bounds=(1, 500), what="the step budget")
    # -- limits, blinding, the sandbox ------------------------------------------------------
    # 0: the protocol's (600; be-fair: AIDE's hour, the study's exec.timeout)
    step_timeout: float = setting(
        0.0, f"seconds per node execution (default {DEFAULT_STEP_TIMEOUT:.0f}; "
        f"{STEP_TIMEOUT_BY_PROTOCOL['be-fair']:.0f} under --protocol be-fair, as the study's AIDE)",
        section="execution", flag="--step-timeout", at_setup=True, spec="step_timeout", given_only=True,
        check=(lambda v: v > 0 and math.isfinite(v), "a positive number of seconds"),
        bounds=(10, 86_400), what="the time limit per step (seconds)")
    time_limit_s: float | None = setting(None, "the whole session's time in seconds: it ends then, as at its "
                                         "budget", section="execution", spec="time_limit")
    eval_timeout: float | None = setting(None, "seconds per node evaluation (default: the step timeout)",
                                         section="execution", flag="--eval-timeout", spec="eval_timeout",
                                         check=(lambda v: v > 0, "a positive number of seconds"))
    memory_limit_mb: int = setting(8192, "MiB per node, for its run and its evaluation (0: no limit)",
                                   section="execution", flag="--memory-limit", dest="memory_limit",
                                   spec="memory_limit_mb", check=(lambda v: v >= 0, "0 (no limit) or more MiB"))
    output_cap: int = setting(200_000, "bytes of output kept per node (head and tail)", section="execution")
    # -- what the agent is shown, what "best" means (engine.session.selection, .feedback) ----
    best: str = setting(DEFAULT_CRITERION, "what 'best node' means for ★ and for the search's improve step "
                        "(default: validation; claimed under --protocol be-fair); switch it live with `befair "
                        "steer SESSION criterion C` or the console", section="evaluation", flag="--best",
                        choices=BEST_CRITERIA, at_setup=True, spec="best", given_only=True)
    # None: the protocol's default
    feedback: str | None = setting(
        None, "what the agent is shown of befair's measurements: none (its own output only, as AIDE), auc (the "
        "measured validation AUC; the default at every level) or groups (AUC, each skin-tone group's AUC and the "
        "gap); switch it live with `befair steer SESSION feedback F`; --protocol be-fair: none",
        section="evaluation", flag="--feedback", choices=FEEDBACK, at_setup=True, spec="feedback", given_only=True)
    blind_test: bool = setting(False, "mark test metrics blinded (studies)", section="execution",
                               flag="--blind-test", action="store_true", at_setup=True, spec="blind_test")
    # where a lesion is called malignant on every surface (engine.measures.operating_point); sessions
    # recorded before the setting read as the default
    operating_point: str = setting(
        DEFAULT_OPERATING_POINT, "where a lesion is called malignant in every per-skin-tone figure: "
        "sensitivity:0.90 (the cut-off that catches 90%% of malignant lesions on validation, all skin tones "
        "pooled), sensitivity:0.95, or a fixed probability:0.3", section="evaluation", flag="--operating-point",
        metavar="SPEC", at_setup=True, spec="operating_point",
        check=(_operating_point_ok, "sensitivity:S or probability:P, each between 0 and 1"))
    # a kind of engine.agent.coder_registry.CODERS, which fills in its choices and their words
    coder: str = setting("offline", "the coder", section="task", flag="--coder", at_setup=True, spec="coder.name")
    model: str | None = None    # the openai coder's model (None: the LLM config's); its option: LLM_OPTIONS
    seed: int = setting(0, "the agent's seed (same seed, same session)", section="data", flag="--seed",
                        at_setup=True, spec="seed", bounds=(0, 2**31 - 1), what="the seed")
    # -- the search policy, the offline coder -----------------------------------------------
    num_drafts: int | None = setting(None, "initial drafts (default: budget/4 in 1-5 under --policy befair, 5 "
                                     "under aide)", section="search", flag="--num-drafts", spec="search.num_drafts",
                                     check=AT_LEAST_1)
    policy: str = setting("befair", "how the next step is chosen: befair (drafts scale with the budget, a failure "
                          "is debugged at once) or aide (AIDE's exact rule: 5 drafts, then debug with --debug-prob); "
                          "--protocol be-fair always uses aide", section="search", flag="--policy", choices=POLICIES)
    debug_prob: float = setting(0.5, "--policy aide: probability of debugging a buggy leaf", section="search",
                                flag="--debug-prob", spec="search.debug_prob", check=SHARE)
    max_debug_depth: int = setting(3, "debug attempts in a row", section="search", flag="--max-debug-depth",
                                   spec="search.max_debug_depth", check=ZERO_OR_MORE)
    failure_rate: float = setting(0.15, "offline coder: share of pipelines written with a bug", section="search",
                                  flag="--failure-rate", spec="search.failure_rate", check=SHARE)
    # -- data -------------------------------------------------------------------------------
    data: str = setting("synth", "'synth' (generated SynthDerm, cached) or a prepared workspace folder",
                        section="data", flag="--data", at_setup=True, spec="data")
    # as run: bwrap | none (the option's "auto" resolves to bwrap); sessions recorded before the sandbox read "none"
    sandbox: str = setting("auto", "run agent code in a bubblewrap sandbox (auto/bwrap: refuse where namespaces "
                           "are unavailable); none: run it unsandboxed, and mark the session UNSANDBOXED",
                           recorded="bwrap", section="execution", flag="--sandbox", choices=SANDBOX_CHOICES,
                           spec="sandbox")
    protocol: str = setting("befair", "befair: the product's task (a validation set withheld and measured); "
                            "be-fair: the study's exact task (mydataset.csv + MyImages/, AIDE's prompts, test set "
                            "only, blinded; needs an LLM coder)", section="evaluation", flag="--protocol",
                            choices=PROTOCOLS)
    # -- studies ----------------------------------------------------------------------------
    participant_id: str | None = setting(None, "participant id (user studies)", section="study",
                                         flag="--participant", dest="participant", at_setup=True)
    study_id: str | None = setting(None, "study id (user studies)", section="study", flag="--study", dest="study")
    repeat_index: int | None = setting(None, "repeat index within a study", section="study", flag="--repeat",
                                       dest="repeat", check=ZERO_OR_MORE)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.best not in BEST_CRITERIA:
            raise ValueError(f"best must be one of {BEST_CRITERIA}, not {self.best!r}")
        if self.steps < 0:
            raise ValueError("the step budget cannot be negative")
        if self.eval_timeout is not None and self.eval_timeout <= 0:
            raise ValueError("the evaluation timeout must be positive")
        if self.time_limit_s is not None and self.time_limit_s <= 0:
            raise ValueError("the session's time limit must be positive")
        if self.sandbox not in SANDBOX_MODES:
            raise ValueError(f"sandbox must be one of {SANDBOX_MODES}, not {self.sandbox!r}")
        if self.protocol not in PROTOCOLS:
            raise ValueError(f"protocol must be one of {PROTOCOLS}, not {self.protocol!r}")
        self._follow(task_protocol(self.protocol))
        self._check_feedback()
        if not self.step_timeout:
            self.step_timeout = STEP_TIMEOUT_BY_PROTOCOL.get(self.protocol, DEFAULT_STEP_TIMEOUT)
        if self.policy not in POLICIES:
            raise ValueError(f"policy must be one of {POLICIES}, not {self.policy!r}")
        self.operating_point = canonical_operating_point(self.operating_point)
        instruction_text(self.level, self.custom_text)  # validates the level

    def _follow(self, protocol: TaskProtocol) -> None:
        """The rules of the session's task protocol (the be-fair one: the study's)."""
        if not protocol.allows_criterion(self.best):  # the study's task withholds no validation set to choose by
            allowed = " or ".join(repr(c) for c in protocol.criteria or ())
            raise ValueError(f"the {protocol.name} protocol withholds no validation set: best must be {allowed} "
                             "(the agent's own choice, as in the study)")
        if protocol.test_only:
            self.blind_test = True      # measured on the test set only, blinded while the session runs
        if protocol.policy is not None:
            self.policy = protocol.policy   # the study's agent searched by AIDE's rule

    def _check_feedback(self) -> None:
        if self.feedback is None:
            self.feedback = default_feedback(self.protocol)
        if self.feedback not in FEEDBACK:
            raise ValueError(f"feedback must be one of {FEEDBACK}, not {self.feedback!r}")
        if self.feedback not in feedback_allowed(self.protocol):
            raise ValueError(f"the {self.protocol} protocol shows the agent AIDE's prompts: feedback must be "
                             f"{' or '.join(feedback_allowed(self.protocol))}")

    @property
    def instruction(self) -> str:
        return instruction_text(self.level, self.custom_text)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_options(cls, values: Mapping[str, Any]) -> "SessionConfig":
        """The settings these option values give (keyed by the command line's dest, as argparse's
        namespace; a value of None: not given), each kept where its option says: a field, extra,
        extra["synth"] (when the data are SynthDerm) or extra["llm"] (never the key, nor the
        config file's path). Raises ValueError for settings no session can have."""
        kw: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for dest, option in SESSION_OPTIONS.items():
            value = values.get(dest)
            if value is None or not option.stored:
                continue
            if option.stored == "field":
                kw[option.name] = value
            elif option.stored == "extra.synth":
                extra.setdefault("synth", {})[option.name.removeprefix("synth_")] = value
            elif option.stored == "llm":
                extra.setdefault("llm", {})[option.name] = value   # recorded so resume uses the same server
            else:
                extra[option.name] = value
        if kw.get("data", _declared("data")) == "synth":
            extra.setdefault("synth", {})
        else:
            extra.pop("synth", None)
        if "best" not in kw:   # not given: the protocol's first criterion
            criteria = task_protocol(str(kw.get("protocol", _declared("protocol")))).criteria
            kw["best"] = criteria[0] if criteria else DEFAULT_CRITERION
        kw["sandbox"] = resolve_mode(str(kw.get("sandbox") or _declared("sandbox")))
        return cls(**kw, extra=extra)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SessionConfig":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known.setdefault("sandbox", "none")  # recorded before the sandbox existed: it ran without one
        known.setdefault("policy", "aide")   # recorded before befair's policy existed: AIDE's rule
        if known.get("protocol", "befair") == "befair":   # recorded before the setting: shown every figure
            known.setdefault("feedback", LEGACY_FEEDBACK)
        return cls(**known)


# SynthDerm's settings: kept in extra["synth"] when the data are generated; the sizes are given on the command
# line and at setup (not given: the generator's defaults), whose lowest are the generator's minimums
# (engine.data.synth.generate) and highest the real sets' sizes
_SYNTH: dict[str, Any] = {"section": "data", "stored": "extra.synth"}
_SYNTH_SIZE: dict[str, Any] = {**_SYNTH, "at_setup": True, "given_only": True}
# The options a session keeps in its `extra`: SynthDerm's and the evaluation device.
EXTRA_OPTIONS: tuple[Option, ...] = (
    Option("synth_n_train", int, SYNTH_DEFAULTS["n_train"], "SynthDerm training images", flag="--synth-n-train",
           spec="data.synth.n_train", check=AT_LEAST_1, bounds=(21, SYNTH_FULL["n_train"]),
           what="the number of training images", **_SYNTH_SIZE),
    Option("synth_n_test", int, SYNTH_DEFAULTS["n_test"], "SynthDerm test images", flag="--synth-n-test",
           spec="data.synth.n_test", check=AT_LEAST_1, bounds=(18, SYNTH_FULL["n_test"]),
           what="the number of test images", **_SYNTH_SIZE),
    Option("synth_size", int, SYNTH_DEFAULTS["size"], "SynthDerm image size in pixels", flag="--synth-size",
           spec="data.synth.size", check=(lambda v: v >= 1, "at least 1 pixel"), bounds=(16, 512),
           what="the image size (pixels)", **_SYNTH_SIZE),
    Option("synth_seed", int, SYNTH_DEFAULTS["seed"], "the seed SynthDerm is generated with", spec="data.synth.seed",
           check=ZERO_OR_MORE, **_SYNTH),
    Option("device", str, None, "evaluation device (cpu, cuda); default: GPU when present", section="search",
           flag="--device", stored="extra"),
)
# every option a session keeps, by the command line's name: its fields', the LLM coder's, its extra's
SESSION_OPTIONS: dict[str, Option] = {o.cli_dest: o for o in (*declared(SessionConfig), *LLM_OPTIONS, *EXTRA_OPTIONS)}


def _declared(name: str) -> Any:
    """The declared default of the option stored as SessionConfig's field `name`."""
    return SESSION_OPTIONS[name].default
