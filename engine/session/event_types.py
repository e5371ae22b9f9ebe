"""Typed events: one frozen dataclass per event kind (engine.session.events holds the kinds' names
and the schema's prose).

Each class turns into the JSON payload stored in the events table (`to_payload`) and back
(`from_payload`). Payloads are never rewritten, so `from_payload` loads every payload stored by
earlier versions:

- a key some versions never wrote defaults to `ABSENT`, and an `ABSENT` field is left out of the
  payload again, so a payload round-trips to the same keys and values;
- a key this version does not know is kept in `extra` and written back as it was (nothing lost).

Nested payload parts (the config, an evaluation's summary, the audit's flags) stay mappings.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from engine.session import events as ev


class _Absent:
    """The value of a field whose key the payload did not hold (an older version's payload)."""

    _instance: ClassVar[_Absent | None] = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT = _Absent()
Absent = _Absent

Payload = dict[str, Any]
JsonMap = Mapping[str, Any]
T = TypeVar("T", bound="TypedEvent")


@dataclass(frozen=True, slots=True, kw_only=True)
class TypedEvent:
    """One event's payload; `kind` names it in the events table."""

    kind: ClassVar[str] = ""
    extra: JsonMap = field(default_factory=dict)  # keys this version does not know, kept as stored

    def to_payload(self) -> Payload:
        payload: Payload = {}
        for name in _names_of(type(self)):
            value = getattr(self, name)
            if value is not ABSENT:
                payload[name] = value
        for key, value in self.extra.items():
            payload.setdefault(key, value)
        return payload

    @classmethod
    def from_payload(cls: type[T], payload: JsonMap) -> T:
        if "extra" not in payload:
            try:
                return cls(**payload)  # the common case: every key known, none missing
            except TypeError:
                pass
        names = _names_of(cls)
        known = {k: v for k, v in payload.items() if k in names}
        extra = {k: v for k, v in payload.items() if k not in names}
        try:
            return cls(**known, extra=extra)
        except TypeError as exc:  # a required key is missing
            raise ValueError(f"{cls.kind} payload: {exc}") from None


_NAMES: dict[type, tuple[str, ...]] = {}


def _names_of(cls: type[TypedEvent]) -> tuple[str, ...]:
    """The payload keys a class knows (its fields but `extra`), cached per class."""
    names = _NAMES.get(cls)
    if names is None:
        names = tuple(f.name for f in dataclasses.fields(cls) if f.name != "extra")
        _NAMES[cls] = names
    return names


@dataclass(frozen=True, slots=True, kw_only=True)
class _ByCommand(TypedEvent):
    """An event a steering command caused: who issued it (a study's participant since 008)."""

    by: str
    command_id: int | None = None
    participant_id: str | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionStarted(TypedEvent):
    kind: ClassVar[str] = ev.SESSION_STARTED
    config: JsonMap
    instruction: str
    coder: JsonMap
    data: JsonMap


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeCreated(TypedEvent):
    kind: ClassVar[str] = ev.NODE_CREATED
    node_id: int
    parent_id: int | None
    step: int
    stage: str
    plan: str
    guidance_ids: list[int]
    components: JsonMap | None | Absent = ABSENT
    origin: str | Absent = ABSENT
    aide_id: str | Absent = ABSENT  # an imported AIDE node's id in its journal
    mlzero_node: int | Absent = ABSENT  # an imported MLZero node's index in its log


@dataclass(frozen=True, slots=True, kw_only=True)
class Code(TypedEvent):
    kind: ClassVar[str] = ev.CODE
    node_id: int
    code: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecStarted(TypedEvent):
    kind: ClassVar[str] = ev.EXEC_STARTED
    node_id: int
    workdir: str
    sandbox: str | None | Absent = ABSENT  # absent before the sandbox


@dataclass(frozen=True, slots=True, kw_only=True)
class Output(TypedEvent):
    kind: ClassVar[str] = ev.OUTPUT
    node_id: int
    text: str
    stream: str


@dataclass(frozen=True, slots=True, kw_only=True)
class ExecFinished(TypedEvent):
    """The sandbox's keys (cut_chars .. sandboxed) are absent from payloads recorded before it;
    every emit site of this version writes them."""

    kind: ClassVar[str] = ev.EXEC_FINISHED
    node_id: int
    status: str
    exit_code: int | None
    exec_time: float | None  # None: an imported run that did not record it
    exc_type: str | None
    output_head: str
    output_tail: str
    truncated: bool
    cut_chars: int | Absent = ABSENT
    output_chars: int | Absent = ABSENT
    peak_mem_mb: float | None | Absent = ABSENT
    out_of_memory: bool | Absent = ABSENT
    sandboxed: bool | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class Review(TypedEvent):
    kind: ClassVar[str] = ev.REVIEW
    node_id: int
    is_bug: bool
    summary: str
    claimed_metric: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Evaluated(TypedEvent):
    """The summary's figures stay a mapping (its keys grew with each version: see events.py)."""

    kind: ClassVar[str] = ev.EVALUATED
    node_id: int
    split: str
    ok: bool
    verdict: str
    reason: str | None | Absent = ABSENT
    summary: JsonMap | Absent = ABSENT
    medfair: JsonMap | Absent = ABSENT
    blinded: bool | Absent = ABSENT
    predictions_kept: bool | Absent = ABSENT
    sealed: bool | Absent = ABSENT
    revealed: bool | Absent = ABSENT
    source: str | Absent = ABSENT
    predictions: str | Absent = ABSENT
    predictions_sha256: str | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class Audited(TypedEvent):
    kind: ClassVar[str] = ev.AUDITED
    node_id: int
    flags: JsonMap
    evidence: JsonMap | Absent = ABSENT
    claim: JsonMap | Absent = ABSENT
    note: str | None | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyDecision(TypedEvent):
    kind: ClassVar[str] = ev.POLICY_DECISION
    action: str
    node_id: int | None = None
    reason: str = ""
    forced: bool | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class Guidance(_ByCommand):
    kind: ClassVar[str] = ev.GUIDANCE
    guidance_id: int
    text: str
    scope: str
    node_id: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Paused(_ByCommand):
    kind: ClassVar[str] = ev.PAUSED
    reason: str | None | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class Resumed(_ByCommand):
    kind: ClassVar[str] = ev.RESUMED


@dataclass(frozen=True, slots=True, kw_only=True)
class Pruned(_ByCommand):
    kind: ClassVar[str] = ev.PRUNED
    node_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class BudgetSet(_ByCommand):
    kind: ClassVar[str] = ev.BUDGET_SET
    steps: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ExpandRequested(_ByCommand):
    kind: ClassVar[str] = ev.EXPAND_REQUESTED
    node_id: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StopRequested(_ByCommand):
    """By "time limit" (no command) when a study session's time limit is reached, with a reason."""

    kind: ClassVar[str] = ev.STOP_REQUESTED
    interrupt: bool = True
    reason: str | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class CriterionSet(_ByCommand):
    kind: ClassVar[str] = ev.CRITERION_SET
    criterion: str


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmCall(TypedEvent):
    """messages, reply and tokens_estimated are absent in sessions recorded before them; the
    streaming figures and server_model likewise."""

    kind: ClassVar[str] = ev.LLM_CALL
    role: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    cost: float
    ok: bool
    node_id: int | None | Absent = ABSENT
    error: str | None | Absent = ABSENT
    tokens_estimated: bool | Absent = ABSENT
    messages: list[JsonMap] | Absent = ABSENT
    reply: str | Absent = ABSENT
    first_token_s: float | None | Absent = ABSENT
    tokens_per_s: float | None | Absent = ABSENT
    server_model: str | None | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmStream(TypedEvent):
    """Sessions recorded earlier hold `delta` (the text since the last llm_stream) instead of
    the offsets and times."""

    kind: ClassVar[str] = ev.LLM_STREAM
    role: str
    step: int
    chars: int | Absent = ABSENT
    tokens: int | Absent = ABSENT
    elapsed_s: float | Absent = ABSENT
    first_token_s: float | None | Absent = ABSENT
    tokens_per_s: float | None | Absent = ABSENT
    recent_tokens_per_s: float | None | Absent = ABSENT
    delta: str | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeInterrupted(TypedEvent):
    kind: ClassVar[str] = ev.NODE_INTERRUPTED
    node_id: int
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionResumed(TypedEvent):
    kind: ClassVar[str] = ev.SESSION_RESUMED
    by: str
    interrupted: list[int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Compared(TypedEvent):
    kind: ClassVar[str] = ev.COMPARED
    split: str
    method: str
    by: JsonMap


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalChoice(TypedEvent):
    """by_minimax, by_robust, criterion and ties came later than by_claimed / by_validation."""

    kind: ClassVar[str] = ev.FINAL_CHOICE
    by_claimed: int | None | Absent = ABSENT
    by_validation: int | None | Absent = ABSENT
    by_minimax: int | None | Absent = ABSENT
    by_robust: int | None | Absent = ABSENT
    reasons: JsonMap | Absent = ABSENT
    criterion: str | None | Absent = ABSENT
    ties: JsonMap | None | Absent = ABSENT


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionFinished(TypedEvent):
    kind: ClassVar[str] = ev.SESSION_FINISHED
    status: str
    reason: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Error(TypedEvent):
    kind: ClassVar[str] = ev.ERROR
    message: str
    node_id: int | None | Absent = ABSENT
    where: str | None | Absent = ABSENT
    participant_id: str | Absent = ABSENT


EVENT_TYPES: dict[str, type[TypedEvent]] = {
    cls.kind: cls
    for cls in (
        SessionStarted, NodeCreated, Code, ExecStarted, Output, ExecFinished, Review, Evaluated, Audited,
        PolicyDecision, Guidance, Paused, Resumed, Pruned, BudgetSet, ExpandRequested, StopRequested,
        LlmCall, LlmStream, NodeInterrupted, SessionResumed, CriterionSet, Compared, FinalChoice,
        SessionFinished, Error,
    )
}


def parse(kind: str, payload: JsonMap) -> TypedEvent:
    """A stored event's payload as its typed event (ValueError: unknown kind or a required key missing)."""
    cls = EVENT_TYPES.get(kind)
    if cls is None:
        raise ValueError(f"unknown event kind {kind!r}")
    return cls.from_payload(payload)
