"""A session's settings, recorded verbatim in its session_started event."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any
from collections.abc import Mapping

from engine.agent.settings import (DEFAULT_STEP_TIMEOUT, OPTIONS, POLICIES, PROTOCOLS, SANDBOX_MODES,
                                   STEP_TIMEOUT_BY_PROTOCOL, default)
from engine.agent.task_protocol import TaskProtocol, task_protocol
from engine.execution.sandbox import resolve_mode
from engine.measures.operating_point import canonical as canonical_operating_point
from engine.session.feedback import DEFAULT_FEEDBACK, FEEDBACK, LEGACY_FEEDBACK
from engine.session.selection import CRITERIA as BEST_CRITERIA
from engine.session.selection import DEFAULT_CRITERION
from engine.task import instruction_text

__all__ = ["BEST_CRITERIA", "DEFAULT_CRITERION", "DEFAULT_STEP_TIMEOUT", "FEEDBACK", "POLICIES", "PROTOCOLS",
           "SANDBOX_MODES", "SessionConfig", "feedback_allowed"]
# What the agent may be shown of befair's measurements, by protocol: AIDE's prompts (be-fair) have
# no place for them, so its agent sees its own output only, as the study's did.
_FEEDBACK_BY_PROTOCOL = {"be-fair": ("none",)}


def feedback_allowed(protocol: str) -> tuple[str, ...]:
    return _FEEDBACK_BY_PROTOCOL.get(protocol, FEEDBACK)


def default_feedback(protocol: str) -> str:
    allowed = feedback_allowed(protocol)
    return DEFAULT_FEEDBACK if DEFAULT_FEEDBACK in allowed else allowed[0]


@dataclass
class SessionConfig:
    # Each field is an option of engine.agent.settings' table, which declares its default, help,
    # section, flag and spec key; the field gives its stored name and type. A field's meaning never
    # changes once recorded: add fields, never rename one.
    level: str = default("level")                   # an instruction level, or "custom"
    custom_text: str | None = default("custom_text")   # the instruction when level == "custom"
    steps: int = default("steps")                   # step budget (nodes the search may create)
    step_timeout: float = default("step_timeout")   # seconds per node execution; 0: the protocol's (600;
                                                    # be-fair: AIDE's hour, the study's exec.timeout)
    time_limit_s: float | None = default("time_limit_s")   # the whole session's time (studies)
    eval_timeout: float | None = default("eval_timeout")   # None: the step timeout
    memory_limit_mb: int = default("memory_limit_mb")      # address-space limit for a node's process
    output_cap: int = default("output_cap")         # bytes of output kept per node (head and tail)
    best: str = default("best")                     # what ★ and the search follow (engine.session.selection)
    feedback: str | None = default("feedback")      # what the agent is shown (engine.session.feedback);
                                                    # None: the protocol's default
    blind_test: bool = default("blind_test")        # hide test metrics until the session ends (studies)
    operating_point: str = default("operating_point")   # where a lesion is called malignant on every surface
                                                    # (engine.measures.operating_point); sessions recorded
                                                    # before the setting read as the default
    coder: str = default("coder")                   # a kind of engine.agent.coder_registry.CODERS
    model: str | None = None                        # LLM model for the openai coder (None: the LLM config's)
    seed: int = default("seed")
    num_drafts: int | None = default("num_drafts")  # None: scaled with the budget (befair), 5 (aide)
    policy: str = default("policy")                 # befair | aide (see POLICIES); the be-fair protocol uses aide
    debug_prob: float = default("debug_prob")
    max_debug_depth: int = default("max_debug_depth")
    failure_rate: float = default("failure_rate")   # offline coder: share of pipelines written with a bug
    data: str = default("data")                     # synth | a prepared workspace directory
    sandbox: str = "bwrap"                          # bwrap | none, as run (the option's "auto" resolves to
                                                    # bwrap); sessions recorded before the sandbox read as "none"
    protocol: str = default("protocol")             # befair | be-fair (see PROTOCOLS)
    participant_id: str | None = default("participant_id")
    study_id: str | None = default("study_id")
    repeat_index: int | None = default("repeat_index")
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
        for dest, option in OPTIONS.items():
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
        if kw.get("data", default("data")) == "synth":
            extra.setdefault("synth", {})
        else:
            extra.pop("synth", None)
        if "best" not in kw:   # not given: the protocol's first criterion
            criteria = task_protocol(str(kw.get("protocol", default("protocol")))).criteria
            kw["best"] = criteria[0] if criteria else DEFAULT_CRITERION
        kw["sandbox"] = resolve_mode(str(kw.get("sandbox") or default("sandbox")))
        return cls(**kw, extra=extra)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "SessionConfig":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known.setdefault("sandbox", "none")  # recorded before the sandbox existed: it ran without one
        known.setdefault("policy", "aide")   # recorded before befair's policy existed: AIDE's rule
        if known.get("protocol", "befair") == "befair":   # recorded before the setting: shown every figure
            known.setdefault("feedback", LEGACY_FEEDBACK)
        return cls(**known)
