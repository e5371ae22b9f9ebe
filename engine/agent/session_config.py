"""A session's settings, recorded verbatim in its session_started event."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from engine.agent.task_protocol import TASK_PROTOCOLS, TaskProtocol, task_protocol
from engine.measures.operating_point import DEFAULT as DEFAULT_OPERATING_POINT
from engine.measures.operating_point import canonical as canonical_operating_point
from engine.session.feedback import DEFAULT_FEEDBACK, FEEDBACK, LEGACY_FEEDBACK
from engine.session.selection import CRITERIA as BEST_CRITERIA
from engine.session.selection import DEFAULT_CRITERION
from engine.task import instruction_text

__all__ = ["BEST_CRITERIA", "DEFAULT_CRITERION", "FEEDBACK", "PROTOCOLS", "SANDBOX_MODES", "SessionConfig",
           "feedback_allowed"]
SANDBOX_MODES = ("bwrap", "none")
# The task a session's agent is given: the product's own (a withheld validation split, its prompt)
# or the "Be Fair!" study's exact one (engine.data.be_fair_layout: mydataset.csv + MyImages/, AIDE's prompt).
PROTOCOLS = tuple(TASK_PROTOCOLS)  # ("befair", "be-fair"): engine.agent.task_protocol
# How the search picks its next step (engine.agent.policy): befair's (drafts scaled with the budget,
# a failure debugged at once) or AIDE's exact rule (5 drafts, then debug with probability debug_prob).
POLICIES = ("befair", "aide")
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


@dataclass
class SessionConfig:
    level: str = "base"                 # base | fairness-hint | fairness-metric | fairness-methods | custom
    custom_text: str | None = None      # the instruction when level == "custom"
    steps: int = 20                     # step budget (nodes the search may create)
    step_timeout: float = 0.0           # seconds per node execution; 0: the protocol's (600; be-fair: AIDE's
                                        # hour, the study's exec.timeout)
    time_limit_s: float | None = None   # the whole session's time (studies): it ends then, as at its budget
    eval_timeout: float | None = None   # seconds per node evaluation (None: the step timeout)
    memory_limit_mb: int = 8192         # address-space limit for a node's process
    output_cap: int = 200_000           # bytes of output kept per node (head and tail)
    best: str = DEFAULT_CRITERION       # what "best" means at the start: what ★ and the search follow
                                        # (engine.session.selection)
    feedback: str | None = None         # what the agent is shown of befair's measurements
                                        # (engine.session.feedback); None: the protocol's default
    blind_test: bool = False            # hide test metrics until the session ends (studies)
    operating_point: str = DEFAULT_OPERATING_POINT  # where a lesion is called malignant on every surface:
                                        # "sensitivity:0.90" (the cut-off catching 90 % of malignant lesions
                                        # on validation) or "probability:0.3" (engine.measures.operating_point);
                                        # sessions recorded before the setting read as the default
    coder: str = "offline"              # offline | openai
    model: str | None = None            # LLM model for the openai coder
    seed: int = 0
    num_drafts: int | None = None       # None: scaled with the budget (befair), 5 (aide)
    policy: str = "befair"              # befair | aide (see POLICIES); the be-fair protocol uses aide
    debug_prob: float = 0.5
    max_debug_depth: int = 3
    failure_rate: float = 0.15          # offline coder: share of pipelines written with a bug
    data: str = "synth"                 # synth | a prepared workspace directory
    sandbox: str = "bwrap"              # bwrap | none: how agent code runs (see engine.execution.sandbox);
                                        # sessions recorded before the sandbox existed read as "none"
    protocol: str = "befair"            # befair | be-fair (see PROTOCOLS); recorded with the session
    participant_id: str | None = None
    study_id: str | None = None
    repeat_index: int | None = None
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
    def from_dict(cls, d: dict[str, Any]) -> "SessionConfig":
        known = {k: v for k, v in d.items() if k in cls.__dataclass_fields__}
        known.setdefault("sandbox", "none")  # recorded before the sandbox existed: it ran without one
        known.setdefault("policy", "aide")   # recorded before befair's policy existed: AIDE's rule
        if known.get("protocol", "befair") == "befair":   # recorded before the setting: shown every figure
            known.setdefault("feedback", LEGACY_FEEDBACK)
        return cls(**known)
