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

from engine.session import events as ev

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
    validation: dict[str, Any] | None = None
    test: dict[str, Any] | None = None
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
        return (self.validation or {}).get("auc")

    @property
    def val_gap(self) -> float | None:
        return (self.validation or {}).get("auc_gap")

    @property
    def val_worst(self) -> float | None:
        return (self.validation or {}).get("worst_auc")

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
                                               # live text is in engine.session.live now)
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
    for event in events:
        apply(state, event)
    return state


def apply(state: SessionState, event: ev.Event) -> SessionState:
    handler = _HANDLERS.get(event.kind)
    if handler is not None:
        handler(state, event.payload, event)
    state.last_seq = event.seq
    state.last_ts = event.ts
    if state.memo:
        state.memo.clear()  # folded inside a memoised block: what was derived is out of date
    if not state.session_id:
        state.session_id = event.session_id
    return state


# -- handlers ---------------------------------------------------------------------------
Payload = dict[str, Any]  # an event's JSON payload (see events.py)


def _node_of(s: SessionState, p: Payload) -> NodeState | None:
    """The node a payload's node_id names; None when it names none or one never created."""
    node_id = p.get("node_id")
    return s.nodes.get(node_id) if node_id is not None else None


def _session_started(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.config = dict(p.get("config") or {})
    s.instruction = p.get("instruction", "")
    s.coder = dict(p.get("coder") or {})
    s.data = dict(p.get("data") or {})
    s.budget = int(s.config.get("steps", 0))
    s.status = "running"
    s.started_ts = e.ts


def _node_created(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = NodeState(
        node_id=int(p["node_id"]),
        parent_id=p.get("parent_id"),
        step=int(p.get("step", 0)),
        stage=p.get("stage", "draft"),
        plan=p.get("plan", "") or "",
        origin=p.get("origin", "agent"),
        components=p.get("components"),
        guidance_ids=list(p.get("guidance_ids") or []),
        created_seq=e.seq,
        created_ts=e.ts,
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


def _code(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is not None:
        node.code = p.get("code", "") or ""


def _exec_started(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is not None:
        node.status = "running"
        node.exec_started_ts = e.ts
        node.workdir = p.get("workdir")
        node.live_head, node.live_tail, node.live_dropped = "", "", 0
        s.running_node = node.node_id


def _output(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is None:
        return
    text, half = p.get("text") or "", OUTPUT_KEEP // 2
    room = half - len(node.live_head)
    if room > 0:
        node.live_head += text[:room]
        text = text[room:]
    tail = node.live_tail + text
    if len(tail) > half:
        node.live_dropped += len(tail) - half
        tail = tail[-half:]
    node.live_tail = tail


def _exec_finished(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is None:
        return
    node.status = p.get("status", "ok")
    node.exit_code = p.get("exit_code")
    node.exec_time = p.get("exec_time")
    node.exc_type = p.get("exc_type")
    node.output_head = p.get("output_head", "") or ""
    node.output_tail = p.get("output_tail", "") or ""
    node.truncated = bool(p.get("truncated"))
    node.cut_chars = int(p.get("cut_chars") or 0)
    node.peak_mem_mb = p.get("peak_mem_mb")
    if s.running_node == node.node_id:
        s.running_node = None


def _review(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is not None:
        node.is_bug = p.get("is_bug")
        node.review_summary = p.get("summary")
        node.claimed_metric = p.get("claimed_metric")


def _evaluated(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is None:
        return
    split = p.get("split", "validation")
    node.eval_verdicts[split] = p.get("verdict", "ok" if p.get("ok") else "error")
    node.eval_reasons[split] = p.get("reason")
    if p.get("source"):
        node.eval_sources[split] = str(p["source"])
    summary = p.get("summary") if p.get("ok") else None
    if split == "validation":
        node.validation = summary
    else:
        node.test = summary
        node.test_blinded = bool(p.get("blinded"))
    if p.get("medfair"):
        node.medfair[split] = p["medfair"]


def _audited(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is not None:
        node.audit_flags = dict(p.get("flags") or {})
        node.audit_evidence = dict(p.get("evidence") or {})
        node.audit_note = p.get("note") or None
        node.claim = p.get("claim")


def _policy_decision(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.decisions.append({"seq": e.seq, **p})


def _guidance(s: SessionState, p: Payload, e: ev.Event) -> None:
    gid = int(p["guidance_id"])
    s.guidance[gid] = GuidanceState(
        guidance_id=gid,
        text=p.get("text", ""),
        scope=p.get("scope", "global"),
        node_id=p.get("node_id"),
        by=p.get("by", ""),
        seq=e.seq,
    )


def _paused(s: SessionState, p: Payload, e: ev.Event) -> None:
    if s.status in ("running", "new"):
        s.status = "paused"


def _resumed(s: SessionState, p: Payload, e: ev.Event) -> None:
    if s.status == "paused":
        s.status = "running"


def _pruned(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is not None:
        node.pruned = True


def _budget_set(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.budget = int(p.get("steps", s.budget))


def _expand_requested(s: SessionState, p: Payload, e: ev.Event) -> None:
    nid = p.get("node_id")
    if nid is not None and nid not in s.pending_expand:
        s.pending_expand.append(nid)


def _stop_requested(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.stop_requested = True


def _llm_call(s: SessionState, p: Payload, e: ev.Event) -> None:
    tin, tout, cost = int(p.get("tokens_in", 0)), int(p.get("tokens_out", 0)), float(p.get("cost", 0.0))
    s.tokens_in += tin
    s.tokens_out += tout
    s.cost += cost
    s.live_reply = None
    node = _node_of(s, p)
    if node is not None:
        node.tokens_in += tin
        node.tokens_out += tout
        node.cost += cost
        node.conversation.append(dict(p, seq=e.seq))
    else:
        s.unassigned_calls.append(dict(p, seq=e.seq))


def _llm_stream(s: SessionState, p: Payload, e: ev.Event) -> None:
    live = s.live_reply
    if live is None or live.get("role") != p.get("role") or live.get("step") != p.get("step"):
        live = s.live_reply = {"role": p.get("role"), "step": p.get("step"), "text": "", "chars": 0,
                               "tokens": None, "elapsed_s": None, "tokens_per_s": None}
    if "delta" in p:  # an old session: the text itself, in pieces
        live["text"] += str(p.get("delta") or "")
        live["chars"] = len(live["text"])
        return
    for key in ("chars", "tokens", "elapsed_s", "first_token_s", "tokens_per_s", "recent_tokens_per_s"):
        if key in p:
            live[key] = p[key]


def _node_interrupted(s: SessionState, p: Payload, e: ev.Event) -> None:
    node = _node_of(s, p)
    if node is not None:
        node.status = "interrupted"
        node.interrupted_reason = p.get("reason")
        if s.running_node == node.node_id:
            s.running_node = None


def _session_resumed(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.status = "running"
    s.stop_requested = False
    s.finished_ts = None
    s.finish_reason = None
    s.final_choice = None  # chosen when the session ended; a resumed session chooses again


def _final_choice(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.final_choice = dict(p)


def _criterion_set(s: SessionState, p: Payload, e: ev.Event) -> None:
    if p.get("criterion"):
        s.criterion = str(p["criterion"])


def _compared(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.comparisons[str(p.get("split", "validation"))] = dict(p)


def _session_finished(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.status = p.get("status", "finished")
    s.finish_reason = p.get("reason")
    s.finished_ts = e.ts
    s.running_node = None


def _error(s: SessionState, p: Payload, e: ev.Event) -> None:
    s.errors.append({"seq": e.seq, **p})


_HANDLERS = {
    ev.SESSION_STARTED: _session_started,
    ev.NODE_CREATED: _node_created,
    ev.CODE: _code,
    ev.EXEC_STARTED: _exec_started,
    ev.OUTPUT: _output,
    ev.EXEC_FINISHED: _exec_finished,
    ev.REVIEW: _review,
    ev.EVALUATED: _evaluated,
    ev.AUDITED: _audited,
    ev.POLICY_DECISION: _policy_decision,
    ev.GUIDANCE: _guidance,
    ev.PAUSED: _paused,
    ev.RESUMED: _resumed,
    ev.PRUNED: _pruned,
    ev.BUDGET_SET: _budget_set,
    ev.EXPAND_REQUESTED: _expand_requested,
    ev.STOP_REQUESTED: _stop_requested,
    ev.LLM_CALL: _llm_call,
    ev.LLM_STREAM: _llm_stream,
    ev.NODE_INTERRUPTED: _node_interrupted,
    ev.SESSION_RESUMED: _session_resumed,
    ev.FINAL_CHOICE: _final_choice,
    ev.CRITERION_SET: _criterion_set,
    ev.COMPARED: _compared,
    ev.SESSION_FINISHED: _session_finished,
    ev.ERROR: _error,
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
