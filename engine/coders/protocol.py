"""The coder interface: what the search asks of an agent (draft, improve, debug, review).

Two implementations: the offline coder (engine/coders/offline/, a simulated agent labelled as
such) and the LLM coder (engine/coders/llm/coder.py, any OpenAI-compatible Chat Completions server).
A coder never raises for a bad reply: it returns a CoderReply with `code=None` and `error` set,
which the search records as a failed step.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from engine.measures.summary import EvaluationSummary


@dataclass
class LlmCall:
    """One HTTP attempt at a Chat Completions call (a retried call gives several)."""
    role: str                 # draft | improve | debug | review
    model: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_s: float = 0.0
    cost: float = 0.0
    ok: bool = True
    error: str | None = None
    tokens_estimated: bool = False   # the server reported no usage: tokens are ~chars/4 estimates
    messages: list[dict[str, Any]] = field(default_factory=list)  # the request's messages
    reply: str = ""           # the reply text as it came back ("" when nothing came back);
                              # tool calls appended as `name(arguments)` lines
    first_token_s: float | None = None   # streamed: seconds until the first token (prompt reading)
    tokens_per_s: float | None = None    # streamed: writing speed after the first token
    server_model: str | None = None      # the model id the server's reply named
    check: dict[str, Any] | None = None  # the reply rule its reply hit: {rule, attempt, message}
                                         # (engine.coders.llm.reply_rules); None: none, or not checked


@dataclass
class MemoryItem:
    """What the agent remembers of an earlier node (AIDE's 'memory')."""
    node_id: int
    stage: str
    plan: str
    status: str
    measured_auc: float | None = None
    measured_gap: float | None = None
    summary: str = ""


@dataclass
class NodeView:
    """A node handed to improve/debug/review."""
    node_id: int
    stage: str
    plan: str
    code: str
    status: str
    output: str = ""                       # tail of the execution output
    exc_type: str | None = None
    components: dict[str, Any] | None = None
    measured: EvaluationSummary | None = None  # its validation figures, as far as the feedback setting shows them
    tried: list[dict[str, Any]] = field(default_factory=list)  # components of its existing children
    eval_failure: str | None = None        # the run ended, but the independent evaluation of its
                                           # predict() failed: why (raised, wrong keys, no model)


@dataclass
class CoderContext:
    # The task protocol whose prompts the context is for (engine.agent.task_protocol); a subclass
    # carrying another protocol's settings names its own (prompts_be_fair.BeFairContext).
    protocol: ClassVar[str] = "befair"
    scaffoldable: ClassVar[bool] = True    # its prompts can ask for the scaffold's two functions
    instruction: str                       # exact instruction-level text
    metric_line: str                       # "Area under the receiver operator curve (AUROC)"
    data_preview: str                      # preview of the obfuscated training data
    step: int
    seed: int
    guidance_global: list[str] = field(default_factory=list)
    guidance_node: list[str] = field(default_factory=list)   # only for the node being expanded
    memory: list[MemoryItem] = field(default_factory=list)
    level: str = "base"
    scaffold: bool = False                 # the reply fills befair's scaffold (engine.coders.llm.scaffold)
    feedback: str = "auc"                  # what it is shown of befair's measurements (engine.session.feedback)


@dataclass
class CoderReply:
    plan: str
    code: str | None
    error: str | None = None               # why there is no usable code
    components: dict[str, Any] | None = None
    llm_calls: list[LlmCall] = field(default_factory=list)


@dataclass
class Review:
    is_bug: bool
    summary: str
    claimed_metric: float | None = None
    llm_calls: list[LlmCall] = field(default_factory=list)
    lower_is_better: bool | None = None    # the metric's direction, as the review says (AIDE's)


StreamHook = Callable[[str, str], None]        # (role, the reply so far)
ProgressHook = Callable[[str, Any], None]      # (role, engine.coders.llm.client.StreamStats)


class CoderBase:
    """What the runner asks of every coder beyond its four answers; a coder overrides what
    applies to it (the LLM coder: its API key, its budget, its streamed replies)."""
    secrets: tuple[str, ...] = ()      # values the runner redacts from every event it stores
    budget_usd: float | None = None    # the session pauses when its LLM cost reaches it; None: no budget

    def attach_stream(self, on_stream: StreamHook, on_progress: ProgressHook) -> None:
        """Hand each reply on as it streams (a coder that streams calls these on its thread)."""


RUNNER_ASKS = ("secrets", "budget_usd", "attach_stream")   # beyond draft/improve/debug/review


def missing_members(coder: object) -> list[str]:
    """What `coder` lacks of what the runner asks (a coder from a study's factory, say)."""
    return [name for name in ("name", "label", "simulated", *RUNNER_ASKS, "draft", "improve", "debug", "review")
            if not hasattr(coder, name)]


class Coder(Protocol):
    name: str          # "offline" | "openai"
    label: str         # shown everywhere, e.g. "offline coder (simulated agent)"
    simulated: bool

    @property
    def secrets(self) -> tuple[str, ...]: ...

    @property
    def budget_usd(self) -> float | None: ...

    def attach_stream(self, on_stream: StreamHook, on_progress: ProgressHook) -> None: ...

    def draft(self, ctx: CoderContext) -> CoderReply: ...

    def improve(self, ctx: CoderContext, parent: NodeView) -> CoderReply: ...

    def debug(self, ctx: CoderContext, parent: NodeView) -> CoderReply: ...

    def review(self, ctx: CoderContext, node: NodeView) -> Review: ...
