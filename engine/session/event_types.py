"""Typed events: one frozen dataclass per event kind (engine.session.events holds the kinds' names
and the schema's prose).

Each class turns into the JSON payload stored in the events table (`to_payload`) and back
(`from_payload`). Payloads are never rewritten, so `from_payload` loads every payload stored by
earlier versions:

- a key some versions never wrote defaults to `ABSENT`, and an `ABSENT` field is left out of the
  payload again, so a payload round-trips to the same keys and values;
- a key this version does not know is kept in `extra` and written back as it was (nothing lost).

Nested payload parts (the config, an evaluation's summary, the audit's flags) stay mappings; an
evaluation's summary is read by engine.measures.summary.EvaluationSummary.
"""
from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, TypeVar

from engine.session import events as ev


class Absent(enum.Enum):
    """The value of a field whose key the payload did not hold (an older version's payload).
    An enum of one member, so that `value is ABSENT` narrows the field's type."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Final = Absent.ABSENT

Payload = dict[str, Any]
JsonMap = Mapping[str, Any]
T = TypeVar("T", bound="TypedEvent")


class _NoExtra(Mapping[str, Any]):
    """The empty, immutable (so shareable) default of `extra`."""

    def __getitem__(self, key: str) -> Any:
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0

    def __hash__(self) -> int:
        return 0


_NO_EXTRA = _NoExtra()


@dataclass(frozen=True, kw_only=True)
class TypedEvent:
    """One event's payload; `kind` names it in the events table.

    Not slotted: `from_payload` fills a new instance's `__dict__` with the fields' defaults and
    the payload, bypassing the frozen `__init__` (the store parses every event it loads, and
    setting each field through `object.__setattr__` cost more than the dict reducer's whole fold)."""

    kind: ClassVar[str] = ""
    extra: JsonMap = _NO_EXTRA  # keys this version does not know, kept as stored

    def to_payload(self) -> Payload:
        payload: Payload = {}
        for name in _shape_of(type(self)).names:
            value = getattr(self, name)
            if value is not ABSENT:
                payload[name] = value
        for key, value in self.extra.items():
            payload.setdefault(key, value)
        return payload

    @classmethod
    def from_payload(cls: type[T], payload: JsonMap) -> T:
        shape = _SHAPES.get(cls) or _shape_of(cls)
        if tuple(payload) in shape.fitting or shape.fits(payload):  # the common case: every key known
            event = _new(cls)
            fields = event.__dict__
            fields.update(shape.defaults)  # every field in the instance: the reducer's reads stay fast
            fields.update(payload)
            return event
        known = {k: v for k, v in payload.items() if k in shape.known}
        extra = {k: v for k, v in payload.items() if k not in shape.known}
        try:
            return cls(**cls.missing_means(payload), **known, extra=extra)
        except TypeError as exc:  # a required key is missing, and no default says what that means
            raise ValueError(f"{cls.kind} payload: {exc}") from None

    # What a payload without a required key means: the values the reducer has always read then
    # (a hand-written or damaged payload; no version of befair wrote one).
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {}

    @classmethod
    def missing_means(cls, payload: JsonMap) -> dict[str, Any]:
        return {k: v for k, v in cls.MISSING_MEANS.items() if k not in payload}


_new = object.__new__


@dataclass(frozen=True)
class _Shape:
    names: tuple[str, ...]  # the payload keys a class knows (its fields but `extra`)
    known: frozenset[str]
    required: frozenset[str]  # fields without a default
    defaults: dict[str, Any]  # the other fields' defaults (`extra` included)
    fitting: set[tuple[str, ...]] = dataclasses.field(default_factory=set)  # key lists seen to fit

    def fits(self, payload: JsonMap) -> bool:
        """Every required key and no unknown one (remembered: a fold meets the same few key lists)."""
        keys = payload.keys()
        if not (self.required <= keys and keys <= self.known):
            return False
        if len(self.fitting) < 64:
            self.fitting.add(tuple(payload))
        return True


_SHAPES: dict[type, _Shape] = {}


def _shape_of(cls: type[TypedEvent]) -> _Shape:
    shape = _SHAPES.get(cls)
    if shape is None:
        fields = [f for f in dataclasses.fields(cls) if f.name != "extra"]
        names = tuple(f.name for f in fields)
        required = frozenset(f.name for f in fields if f.default is dataclasses.MISSING
                             and f.default_factory is dataclasses.MISSING)
        defaults = {f.name: f.default for f in dataclasses.fields(cls) if f.default is not dataclasses.MISSING}
        shape = _SHAPES[cls] = _Shape(names, frozenset(names), required, defaults)
    return shape


@dataclass(frozen=True, kw_only=True)
class _ByCommand(TypedEvent):
    """An event a steering command caused: who issued it (a study's participant since 008)."""

    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"by": ""}

    by: str
    command_id: int | None = None
    participant_id: str | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class SessionStarted(TypedEvent):
    kind: ClassVar[str] = ev.SESSION_STARTED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"config": {}, "instruction": "", "coder": {}, "data": {}}
    config: JsonMap
    instruction: str
    coder: JsonMap
    data: JsonMap


@dataclass(frozen=True, kw_only=True)
class NodeCreated(TypedEvent):
    kind: ClassVar[str] = ev.NODE_CREATED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"parent_id": None, "step": 0, "stage": "draft", "plan": "",
                                                  "guidance_ids": ()}
    node_id: int
    parent_id: int | None
    step: int
    stage: str
    plan: str
    guidance_ids: list[int]
    components: Payload | None | Absent = ABSENT
    origin: str | Absent = ABSENT
    aide_id: str | Absent = ABSENT  # an imported AIDE node's id in its journal
    mlzero_node: int | Absent = ABSENT  # an imported MLZero node's index in its log


@dataclass(frozen=True, kw_only=True)
class Code(TypedEvent):
    kind: ClassVar[str] = ev.CODE
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"code": ""}
    node_id: int
    code: str


@dataclass(frozen=True, kw_only=True)
class ExecStarted(TypedEvent):
    kind: ClassVar[str] = ev.EXEC_STARTED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"workdir": None}
    node_id: int
    workdir: str
    sandbox: str | None | Absent = ABSENT  # absent before the sandbox


@dataclass(frozen=True, kw_only=True)
class Output(TypedEvent):
    kind: ClassVar[str] = ev.OUTPUT
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"text": "", "stream": "stdout"}
    node_id: int
    text: str
    stream: str


@dataclass(frozen=True, kw_only=True)
class ExecFinished(TypedEvent):
    """The sandbox's keys (cut_chars .. sandboxed) are absent from payloads recorded before it;
    every emit site of this version writes them."""

    kind: ClassVar[str] = ev.EXEC_FINISHED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"status": "ok", "exit_code": None, "exec_time": None,
                                                  "exc_type": None, "output_head": "", "output_tail": "",
                                                  "truncated": False}
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


@dataclass(frozen=True, kw_only=True)
class Review(TypedEvent):
    kind: ClassVar[str] = ev.REVIEW
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"is_bug": None, "summary": None}
    node_id: int
    is_bug: bool
    summary: str
    claimed_metric: float | None = None
    lower_is_better: bool | Absent = ABSENT  # the metric's direction, when the review said (AIDE's)


@dataclass(frozen=True, kw_only=True)
class Evaluated(TypedEvent):
    """`summary` stays the payload as stored (its keys grew with each version): the reducer reads
    it through engine.measures.summary.EvaluationSummary, the one loader of every version."""

    kind: ClassVar[str] = ev.EVALUATED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"split": "validation", "ok": False}
    node_id: int
    split: str
    ok: bool
    verdict: str
    reason: str | None | Absent = ABSENT
    summary: Payload | Absent = ABSENT
    medfair: Payload | Absent = ABSENT
    blinded: bool | Absent = ABSENT
    predictions_kept: bool | Absent = ABSENT
    sealed: bool | Absent = ABSENT
    revealed: bool | Absent = ABSENT
    source: str | Absent = ABSENT
    predictions: str | Absent = ABSENT
    predictions_sha256: str | Absent = ABSENT

    @classmethod
    def missing_means(cls, payload: JsonMap) -> dict[str, Any]:
        means = super().missing_means(payload)
        if "verdict" not in payload:
            means["verdict"] = "ok" if payload.get("ok") else "error"
        return means


@dataclass(frozen=True, kw_only=True)
class Audited(TypedEvent):
    kind: ClassVar[str] = ev.AUDITED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"flags": {}}
    node_id: int
    flags: JsonMap
    evidence: JsonMap | Absent = ABSENT
    claim: Payload | Absent = ABSENT
    note: str | None | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class PolicyDecision(TypedEvent):
    kind: ClassVar[str] = ev.POLICY_DECISION
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"action": ""}
    action: str
    node_id: int | None = None
    reason: str = ""
    forced: bool | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class Guidance(_ByCommand):
    kind: ClassVar[str] = ev.GUIDANCE
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"by": "", "text": "", "scope": "global"}
    guidance_id: int
    text: str
    scope: str
    node_id: int | None = None


@dataclass(frozen=True, kw_only=True)
class Paused(_ByCommand):
    kind: ClassVar[str] = ev.PAUSED
    reason: str | None | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class Resumed(_ByCommand):
    kind: ClassVar[str] = ev.RESUMED


@dataclass(frozen=True, kw_only=True)
class Pruned(_ByCommand):
    kind: ClassVar[str] = ev.PRUNED
    node_id: int


@dataclass(frozen=True, kw_only=True)
class BudgetSet(_ByCommand):
    kind: ClassVar[str] = ev.BUDGET_SET
    steps: int


@dataclass(frozen=True, kw_only=True)
class ExpandRequested(_ByCommand):
    kind: ClassVar[str] = ev.EXPAND_REQUESTED
    node_id: int


@dataclass(frozen=True, kw_only=True)
class StopRequested(_ByCommand):
    """By "time limit" (no command) when a study session's time limit is reached, with a reason."""

    kind: ClassVar[str] = ev.STOP_REQUESTED
    interrupt: bool = True
    reason: str | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class CriterionSet(_ByCommand):
    kind: ClassVar[str] = ev.CRITERION_SET
    criterion: str


@dataclass(frozen=True, kw_only=True)
class FeedbackSet(_ByCommand):
    kind: ClassVar[str] = ev.FEEDBACK_SET
    feedback: str


@dataclass(frozen=True, kw_only=True)
class LlmCall(TypedEvent):
    """messages, reply and tokens_estimated are absent in sessions recorded before them; the
    streaming figures and server_model likewise."""

    kind: ClassVar[str] = ev.LLM_CALL
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"role": "", "model": "", "tokens_in": 0, "tokens_out": 0,
                                                  "latency_s": 0.0, "cost": 0.0, "ok": True}
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
    check: JsonMap | None | Absent = ABSENT    # the reply rule its reply hit (engine.agent.reply_rules)


@dataclass(frozen=True, kw_only=True)
class LlmStream(TypedEvent):
    """Sessions recorded earlier hold `delta` (the text since the last llm_stream) instead of
    the offsets and times."""

    kind: ClassVar[str] = ev.LLM_STREAM
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"role": None, "step": None}
    role: str
    step: int
    chars: int | Absent = ABSENT
    tokens: int | Absent = ABSENT
    elapsed_s: float | Absent = ABSENT
    first_token_s: float | None | Absent = ABSENT
    tokens_per_s: float | None | Absent = ABSENT
    recent_tokens_per_s: float | None | Absent = ABSENT
    delta: str | Absent = ABSENT


@dataclass(frozen=True, kw_only=True)
class NodeInterrupted(TypedEvent):
    kind: ClassVar[str] = ev.NODE_INTERRUPTED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"reason": None}
    node_id: int
    reason: str


@dataclass(frozen=True, kw_only=True)
class SessionResumed(TypedEvent):
    kind: ClassVar[str] = ev.SESSION_RESUMED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"by": "", "interrupted": ()}
    by: str
    interrupted: list[int]


@dataclass(frozen=True, kw_only=True)
class Compared(TypedEvent):
    kind: ClassVar[str] = ev.COMPARED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"split": "validation", "method": "", "by": {}}
    split: str
    method: str
    by: JsonMap


@dataclass(frozen=True, kw_only=True)
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


@dataclass(frozen=True, kw_only=True)
class SessionFinished(TypedEvent):
    kind: ClassVar[str] = ev.SESSION_FINISHED
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"status": "finished"}
    status: str
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class Error(TypedEvent):
    kind: ClassVar[str] = ev.ERROR
    MISSING_MEANS: ClassVar[Mapping[str, Any]] = {"message": ""}
    message: str
    node_id: int | None | Absent = ABSENT
    where: str | None | Absent = ABSENT
    participant_id: str | Absent = ABSENT


EVENT_TYPES: dict[str, type[TypedEvent]] = {
    cls.kind: cls
    for cls in (
        SessionStarted, NodeCreated, Code, ExecStarted, Output, ExecFinished, Review, Evaluated, Audited,
        PolicyDecision, Guidance, Paused, Resumed, Pruned, BudgetSet, ExpandRequested, StopRequested,
        LlmCall, LlmStream, NodeInterrupted, SessionResumed, CriterionSet, FeedbackSet, Compared, FinalChoice,
        SessionFinished, Error,
    )
}


def parse(kind: str, payload: JsonMap) -> TypedEvent:
    """A stored event's payload as its typed event (ValueError: unknown kind or a required key missing)."""
    parser = _PARSERS.get(kind)
    if parser is None:
        raise ValueError(f"unknown event kind {kind!r}")
    return parser(payload)


def parse_or_none(kind: str, payload: JsonMap) -> TypedEvent | None:
    """`parse`, or None for a payload it cannot read (the reducer then says why, in the state's errors)."""
    parser = _PARSERS.get(kind)
    if parser is None:
        return None
    try:
        return parser(payload)
    except ValueError:
        return None


def _parser(cls: type[T]) -> Callable[[JsonMap], T]:
    """`cls.from_payload` with its common case inlined: the store parses every event it loads."""
    shape, new, slow = _shape_of(cls), _new, cls.from_payload
    fitting, defaults = shape.fitting, shape.defaults

    def parse_one(payload: JsonMap) -> T:
        if tuple(payload) in fitting:  # a key list seen to fit
            event = new(cls)
            fields = event.__dict__
            fields.update(defaults)
            fields.update(payload)
            return event
        return slow(payload)

    return parse_one


_PARSERS: dict[str, Callable[[JsonMap], TypedEvent]] = {kind: _parser(cls) for kind, cls in EVENT_TYPES.items()}
