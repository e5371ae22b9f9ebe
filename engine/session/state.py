"""The reducer: SessionState = fold(events). Pure and deterministic.

Live view, replay, import, resume and the materialised nodes table all go through `apply`.
`apply` mutates the state it is given (for speed on long sessions); `fold` starts from a fresh
state, so folding the same events always gives the same state.
"""
from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar
from collections.abc import Callable, Hashable, Iterable, Iterator

from engine.measures.summary import EvaluationSummary
from engine.session import event_types as et
from engine.session import events as ev
from engine.session.event_types import ABSENT

T = TypeVar("T")
OUTPUT_KEEP = 64_000  # characters of live output kept per node (head and tail)
ENDED = ("finished", "stopped", "failed")  # the session statuses after which nothing runs it


@dataclass
class NodeState:
    node_id: int
    parent_id: int | None
    step: int
    stage: str
    plan: str = ""
    code: str = ""
    status: str = "queued"
    origin: str = "agent"
    components: dict[str, Any] | None = None
    guidance_ids: list[int] = field(default_factory=list)
    children: list[int] = field(default_factory=list)
    created_seq: int = 0
    created_ts: float = 0.0
    workdir: str | None = None
    exec_time: float | None = None
    exit_code: int | None = None
    exc_type: str | None = None
    output_head: str = ""
    output_tail: str = ""
    truncated: bool = False
    cut_chars: int = 0                   # characters of output cut between head and tail
    peak_mem_mb: float | None = None
    live_head: str = ""
    live_tail: str = ""
    conversation: list[dict[str, Any]] = field(default_factory=list)   # llm_call payloads of this node
    live_dropped: int = 0
    is_bug: bool | None = None
    review_summary: str | None = None
    claimed_metric: float | None = None
    lower_is_better: bool | None = None  # the review's direction of claimed_metric (None: higher is better)
    validation: EvaluationSummary | None = None
    test: EvaluationSummary | None = None
    eval_verdicts: dict[str, str] = field(default_factory=dict)
    eval_reasons: dict[str, str | None] = field(default_factory=dict)
    eval_sources: dict[str, str] = field(default_factory=dict)   # split -> where its figures come from,
                                                                 # when not measured here (imports)
    medfair: dict[str, dict[str, Any]] = field(default_factory=dict)
    test_blinded: bool = False
    audit_flags: dict[str, bool] = field(default_factory=dict)
    audit_evidence: dict[str, str] = field(default_factory=dict)
    audit_note: str | None = None       # "not audited: …": the code could not be read (flags unknown)
    claim: dict[str, Any] | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    pruned: bool = False
    interrupted_reason: str | None = None
    exec_started_ts: float | None = None  # when its run started (the running node's timer)

    @property
    def live_output(self) -> str:
        """Output streamed so far: the first and the last OUTPUT_KEEP/2 characters."""
        if not self.live_dropped:
            return self.live_head + self.live_tail
        return f"{self.live_head}\n… {self.live_dropped} characters omitted …\n{self.live_tail}"

    @property
    def stored_output(self) -> str:
        """Head and tail of the run's output, with the cut between them said in characters."""
        if not self.truncated:
            return self.output_head + self.output_tail
        cut = f"[… {self.cut_chars:,} characters cut …]" if self.cut_chars else "[… output cut …]"
        return f"{self.output_head}\n{cut}\n{self.output_tail}"

    @property
    def val_auc(self) -> float | None:
        return self.validation.auc if self.validation is not None else None

    @property
    def val_gap(self) -> float | None:
        return self.validation.auc_gap if self.validation is not None else None

    @property
    def val_worst(self) -> float | None:
        return self.validation.worst_auc if self.validation is not None else None

    @property
    def finished(self) -> bool:
        return self.status in ("ok", "buggy", "timeout", "interrupted")

    @property
    def failure_reason(self) -> str | None:
        if self.status == "ok" and self.eval_verdicts.get("validation", "ok") == "ok":
            return None
        if self.status == "timeout":
            return f"timed out after {self.exec_time or 0:.0f} s"
        if self.status == "interrupted":
            return self.interrupted_reason or "interrupted"
        if self.status == "buggy":
            return self.exc_type or self.review_summary or "the pipeline failed"
        verdict = self.eval_verdicts.get("validation")
        if verdict and verdict != "ok":
            return f"evaluation: {self.eval_reasons.get('validation') or verdict}"
        return None


@dataclass
class GuidanceState:
    guidance_id: int
    text: str
    scope: str
    node_id: int | None
    by: str
    seq: int
    used_by: list[int] = field(default_factory=list)


@dataclass
class SessionState:
    session_id: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    instruction: str = ""
    coder: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)
    status: str = "new"  # new | running | paused, then one of ENDED
    nodes: dict[int, NodeState] = field(default_factory=dict)
    guidance: dict[int, GuidanceState] = field(default_factory=dict)
    budget: int = 0
    decisions: list[dict[str, Any]] = field(default_factory=list)
    pending_expand: list[int] = field(default_factory=list)
    stop_requested: bool = False
    running_node: int | None = None
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0
    final_choice: dict[str, Any] | None = None
    criterion: str | None = None        # the expert's live switch of what ★ follows (criterion_set)
    feedback: str | None = None         # the expert's live switch of what the agent is shown (feedback_set)
    comparisons: dict[str, dict[str, Any]] = field(default_factory=dict)  # split -> the last `compared`
    finish_reason: str | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)
    started_ts: float | None = None
    last_ts: float | None = None
    finished_ts: float | None = None
    last_seq: int = 0
    live_reply: dict[str, Any] | None = None   # a streamed reply being written: {role, step, chars,
                                               # tokens, elapsed_s, tokens_per_s, text}; text only
                                               # for old sessions (their llm_stream held deltas; the
                                               # live text is in engine.session.live_reply now)
    unassigned_calls: list[dict[str, Any]] = field(default_factory=list)  # llm calls with no node
    # derived values computed once while the state does not change (see `memoised`); None: off
    memo: dict[Any, Any] | None = field(default=None, repr=False, compare=False)

    # -- derived views -------------------------------------------------------------------
    @property
    def level(self) -> str:
        level: str = self.config.get("level", "")
        return level

    @property
    def unsandboxed(self) -> bool:
        """True when this session ran agent code here without the sandbox (`--sandbox none`, or a
        session recorded before the sandbox existed). Imported sessions ran elsewhere: False."""
        if "import" in str(self.coder.get("name", "")) or not self.config:
            return False
        unsandboxed: bool = self.config.get("sandbox", "none") != "bwrap"
        return unsandboxed

    @property
    def agent_steps(self) -> int:
        """Steps used: nodes an agent created (live or imported); human-written nodes do not count."""
        return sum(1 for n in self.nodes.values() if n.origin != "human")

    @property
    def simulated(self) -> bool:
        return bool(self.coder.get("simulated"))

    def children(self, node_id: int | None) -> list[NodeState]:
        if node_id is None:
            return [n for n in self.nodes.values() if n.parent_id is None]
        return [self.nodes[c] for c in self.nodes[node_id].children if c in self.nodes]

    def is_pruned(self, node_id: int) -> bool:
        """A node is pruned when it or any ancestor was pruned."""
        seen = set()
        current: int | None = node_id
        while current is not None and current in self.nodes and current not in seen:
            seen.add(current)
            if self.nodes[current].pruned:
                return True
            current = self.nodes[current].parent_id
        return False

    def pruned_ids(self) -> frozenset[int]:
        """Every node that is pruned itself or under a pruned ancestor (one pass, O(nodes))."""
        ids: frozenset[int] = derived(self, "pruned_ids", self._pruned_ids)
        return ids

    def _pruned_ids(self) -> frozenset[int]:
        out: set[int] = set()
        stack = [n.node_id for n in self.nodes.values() if n.pruned]
        while stack:
            nid = stack.pop()
            if nid in out or nid not in self.nodes:
                continue
            out.add(nid)
            stack.extend(self.nodes[nid].children)
        return frozenset(out)

    def debug_depth(self, node_id: int) -> int:
        """How many consecutive debug steps lead to this node."""
        depth, current = 0, self.nodes.get(node_id)
        while current is not None and current.stage == "debug":
            depth += 1
            current = self.nodes.get(current.parent_id) if current.parent_id is not None else None
        return depth

    def guidance_in_force(self, node_id: int | None = None) -> tuple[list[GuidanceState], list[GuidanceState]]:
        """(global guidance so far, guidance aimed at node_id that no expansion used yet)."""
        glob = [g for g in self.guidance.values() if g.scope == "global"]
        node = [
            g for g in self.guidance.values()
            if g.scope == "node" and node_id is not None and g.node_id == node_id and not g.used_by
        ]
        return glob, node


def new_state(session_id: str = "") -> SessionState:
    return SessionState(session_id=session_id)


def fold(events: Iterable[ev.Event], session_id: str = "") -> SessionState:
    state = new_state(session_id)
    last, handler_of = None, _HANDLERS.get
    for last in events:
        handler = handler_of(last.kind)
        if handler is not None and (typed := last.typed or _typed(state, last)) is not None:
            handler(state, typed, last)
    if last is not None:
        _moved_to(state, last)
    return state


def apply(state: SessionState, event: ev.Event) -> SessionState:
    """Fold one event into `state` (typed as the store loaded it, or parsed here)."""
    handler = _HANDLERS.get(event.kind)
    if handler is not None and (typed := event.typed or _typed(state, event)) is not None:
        handler(state, typed, event)
    _moved_to(state, event)
    return state


def _typed(state: SessionState, event: ev.Event) -> et.TypedEvent | None:
    try:
        return et.parse(event.kind, event.payload)
    except ValueError as exc:  # a payload no version wrote: told (the stored event stays as it is)
        state.errors.append({"seq": event.seq, "message": f"unreadable {event.kind} event, not folded: {exc}"})
        return None


def _moved_to(state: SessionState, event: ev.Event) -> None:
    state.last_seq = event.seq
    state.last_ts = event.ts
    if state.memo:
        state.memo.clear()  # folded inside a memoised block: what was derived is out of date
    if not state.session_id:
        state.session_id = event.session_id


# -- handlers: one per event class; `t` is the typed payload, `e` the stored event (seq, ts) ------
def _session_started(s: SessionState, t: et.SessionStarted, e: ev.Event) -> None:
    s.config = dict(t.config or {})
    s.instruction = t.instruction
    s.coder = dict(t.coder or {})
    s.data = dict(t.data or {})
    s.budget = int(s.config.get("steps", 0))
    s.status = "running"
    s.started_ts = e.ts


def _node_created(s: SessionState, t: et.NodeCreated, e: ev.Event) -> None:
    origin, components = t.origin, t.components
    node = NodeState(
        node_id=int(t.node_id), parent_id=t.parent_id, step=int(t.step), stage=t.stage, plan=t.plan or "",
        origin="agent" if origin is ABSENT else origin,
        components=None if components is ABSENT else components,
        guidance_ids=list(t.guidance_ids or []), created_seq=e.seq, created_ts=e.ts,
    )
    s.nodes[node.node_id] = node
    if node.parent_id is not None and node.parent_id in s.nodes:
        s.nodes[node.parent_id].children.append(node.node_id)
    for gid in node.guidance_ids:
        g = s.guidance.get(gid)
        if g is not None and g.scope == "node" and node.node_id not in g.used_by:
            g.used_by.append(node.node_id)
        elif g is not None and g.scope == "global" and not g.used_by:
            g.used_by.append(node.node_id)
    if node.parent_id in s.pending_expand:
        s.pending_expand.remove(node.parent_id)


def _code(s: SessionState, t: et.Code, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is not None:
        node.code = t.code or ""


def _exec_started(s: SessionState, t: et.ExecStarted, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is not None:
        node.status = "running"
        node.exec_started_ts = e.ts
        node.workdir = t.workdir
        node.live_head, node.live_tail, node.live_dropped = "", "", 0
        s.running_node = node.node_id


def _output(s: SessionState, t: et.Output, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is None:
        return
    text, half = t.text or "", OUTPUT_KEEP // 2
    room = half - len(node.live_head)
    if room > 0:
        node.live_head += text[:room]
        text = text[room:]
    tail = node.live_tail + text
    if len(tail) > half:
        node.live_dropped += len(tail) - half
        tail = tail[-half:]
    node.live_tail = tail


def _exec_finished(s: SessionState, t: et.ExecFinished, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is None:
        return
    node.status = t.status
    node.exit_code = t.exit_code
    node.exec_time = t.exec_time
    node.exc_type = t.exc_type
    node.output_head = t.output_head or ""
    node.output_tail = t.output_tail or ""
    node.truncated = bool(t.truncated)
    cut = t.cut_chars
    node.cut_chars = 0 if cut is ABSENT else int(cut or 0)
    node.peak_mem_mb = None if t.peak_mem_mb is ABSENT else t.peak_mem_mb
    if s.running_node == node.node_id:
        s.running_node = None


def _review(s: SessionState, t: et.Review, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is not None:
        node.is_bug = t.is_bug
        node.review_summary = t.summary
        node.claimed_metric = t.claimed_metric
        node.lower_is_better = None if t.lower_is_better is ABSENT else t.lower_is_better


def _evaluated(s: SessionState, t: et.Evaluated, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is None:
        return
    split = t.split
    node.eval_verdicts[split] = t.verdict
    node.eval_reasons[split] = None if t.reason is ABSENT else t.reason
    if t.source:
        node.eval_sources[split] = str(t.source)
    summary = EvaluationSummary.from_payload(t.summary) if t.ok and t.summary is not ABSENT else None
    if split == "validation":
        node.validation = summary
    else:
        node.test = summary
        node.test_blinded = bool(t.blinded)
    if (medfair := t.medfair) is not ABSENT and medfair:
        node.medfair[split] = medfair


def _audited(s: SessionState, t: et.Audited, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is not None:
        node.audit_flags = dict(t.flags or {})
        node.audit_evidence = {} if t.evidence is ABSENT else dict(t.evidence or {})
        node.audit_note = None if t.note is ABSENT else (t.note or None)
        node.claim = None if t.claim is ABSENT else t.claim


def _policy_decision(s: SessionState, t: et.PolicyDecision, e: ev.Event) -> None:
    s.decisions.append({"seq": e.seq, **e.payload})


def _guidance(s: SessionState, t: et.Guidance, e: ev.Event) -> None:
    gid = int(t.guidance_id)
    s.guidance[gid] = GuidanceState(guidance_id=gid, text=t.text, scope=t.scope, node_id=t.node_id, by=t.by,
                                    seq=e.seq)


def _paused(s: SessionState, t: et.Paused, e: ev.Event) -> None:
    if s.status in ("running", "new"):
        s.status = "paused"


def _resumed(s: SessionState, t: et.Resumed, e: ev.Event) -> None:
    if s.status == "paused":
        s.status = "running"


def _pruned(s: SessionState, t: et.Pruned, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is not None:
        node.pruned = True


def _budget_set(s: SessionState, t: et.BudgetSet, e: ev.Event) -> None:
    s.budget = int(t.steps)


def _expand_requested(s: SessionState, t: et.ExpandRequested, e: ev.Event) -> None:
    if t.node_id not in s.pending_expand:
        s.pending_expand.append(t.node_id)


def _stop_requested(s: SessionState, t: et.StopRequested, e: ev.Event) -> None:
    s.stop_requested = True


def _llm_call(s: SessionState, t: et.LlmCall, e: ev.Event) -> None:
    tin, tout, cost = int(t.tokens_in or 0), int(t.tokens_out or 0), float(t.cost or 0.0)
    s.tokens_in += tin
    s.tokens_out += tout
    s.cost += cost
    s.live_reply = None
    node = s.nodes.get(node_id) if isinstance(node_id := t.node_id, int) else None
    if node is not None:
        node.tokens_in += tin
        node.tokens_out += tout
        node.cost += cost
        node.conversation.append(dict(e.payload, seq=e.seq))
    else:
        s.unassigned_calls.append(dict(e.payload, seq=e.seq))


_LIVE_FIGURES = ("chars", "tokens", "elapsed_s", "first_token_s", "tokens_per_s", "recent_tokens_per_s")


def _llm_stream(s: SessionState, t: et.LlmStream, e: ev.Event) -> None:
    live = s.live_reply
    if live is None or live.get("role") != t.role or live.get("step") != t.step:
        live = s.live_reply = {"role": t.role, "step": t.step, "text": "", "chars": 0,
                               "tokens": None, "elapsed_s": None, "tokens_per_s": None}
    if t.delta is not ABSENT:  # an old session: the text itself, in pieces
        live["text"] += str(t.delta or "")
        live["chars"] = len(live["text"])
        return
    p = e.payload
    for key in _LIVE_FIGURES:
        if key in p:
            live[key] = p[key]


def _node_interrupted(s: SessionState, t: et.NodeInterrupted, e: ev.Event) -> None:
    node = s.nodes.get(t.node_id)
    if node is not None:
        node.status = "interrupted"
        node.interrupted_reason = t.reason
        if s.running_node == node.node_id:
            s.running_node = None


def _session_resumed(s: SessionState, t: et.SessionResumed, e: ev.Event) -> None:
    s.status = "running"
    s.stop_requested = False
    s.finished_ts = None
    s.finish_reason = None
    s.final_choice = None  # chosen when the session ended; a resumed session chooses again


def _final_choice(s: SessionState, t: et.FinalChoice, e: ev.Event) -> None:
    s.final_choice = dict(e.payload)


def _criterion_set(s: SessionState, t: et.CriterionSet, e: ev.Event) -> None:
    if t.criterion:
        s.criterion = str(t.criterion)


def _feedback_set(s: SessionState, t: et.FeedbackSet, e: ev.Event) -> None:
    if t.feedback:
        s.feedback = str(t.feedback)


def _compared(s: SessionState, t: et.Compared, e: ev.Event) -> None:
    s.comparisons[str(t.split)] = dict(e.payload)


def _session_finished(s: SessionState, t: et.SessionFinished, e: ev.Event) -> None:
    s.status = t.status
    s.finish_reason = t.reason
    s.finished_ts = e.ts
    s.running_node = None


def _error(s: SessionState, t: et.Error, e: ev.Event) -> None:
    s.errors.append({"seq": e.seq, **e.payload})


_HANDLERS: dict[str, Callable[[SessionState, Any, ev.Event], None]] = {
    cls.kind: handler for cls, handler in (
        (et.SessionStarted, _session_started), (et.NodeCreated, _node_created), (et.Code, _code),
        (et.ExecStarted, _exec_started), (et.Output, _output), (et.ExecFinished, _exec_finished),
        (et.Review, _review), (et.Evaluated, _evaluated), (et.Audited, _audited),
        (et.PolicyDecision, _policy_decision), (et.Guidance, _guidance), (et.Paused, _paused),
        (et.Resumed, _resumed), (et.Pruned, _pruned), (et.BudgetSet, _budget_set),
        (et.ExpandRequested, _expand_requested), (et.StopRequested, _stop_requested), (et.LlmCall, _llm_call),
        (et.LlmStream, _llm_stream), (et.NodeInterrupted, _node_interrupted),
        (et.SessionResumed, _session_resumed), (et.FinalChoice, _final_choice),
        (et.CriterionSet, _criterion_set), (et.FeedbackSet, _feedback_set), (et.Compared, _compared),
        (et.SessionFinished, _session_finished),
        (et.Error, _error),
    )
}


@contextmanager
def memoised(state: SessionState) -> Iterator[SessionState]:
    """Within this block the state must not change, and what is derived from it (the best node by
    each criterion) is computed once: one console update asks for it from several widgets."""
    outer = state.memo
    state.memo = {} if outer is None else outer
    try:
        yield state
    finally:
        state.memo = outer


def derived(state: SessionState, key: Hashable, compute: Callable[[], T]) -> T:
    """compute(), once per memoised block (see `memoised`); every time outside one."""
    if state.memo is None:
        return compute()
    if key not in state.memo:
        state.memo[key] = compute()
    value: T = state.memo[key]
    return value
