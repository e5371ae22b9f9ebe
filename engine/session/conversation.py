"""What the agent was told and what it answered, per node: the presentation of `llm_call` events.

For a node, `node_calls` lists its LLM calls in order (numbered across the session) with their
messages, raw reply, what was parsed from it (the node's plan and code, or the review), usage and
latency, and where the instruction level's text and each guidance in force appear in the
messages (or that a guidance did not reach the call).

Prompts repeat: every call carries the task, the data overview and often the same system
message. A large piece of text (a message, or a markdown section of one) is shown where it first
appears in the session; later occurrences become a reference, "same as call 3 (node 1 · draft),
message 2".

Pure functions of a `SessionState`; the console's Conversation tab draws them.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from engine.session.state import NodeState, SessionState

DEDUP_MIN = 400          # characters: shorter pieces are always shown
_SECTION = re.compile(r"(?m)^(?=#{1,3} )")   # a markdown heading starts a section


@dataclass(frozen=True)
class Piece:
    """Part of a message: text shown, or a reference to where the same text was shown first."""
    text: str
    ref: str | None = None        # "same as call 3 (node 1 · draft), message 2"

    @property
    def shown(self) -> bool:
        return self.ref is None


@dataclass(frozen=True)
class Mark:
    """Where a text the human controls appears: the instruction level, or a guidance."""
    label: str                    # "instruction (fairness-metric)" | "guidance #2"
    places: tuple[str, ...]       # "message 2 (user)", ... ; empty: not in this call


@dataclass
class CallView:
    number: int                   # order among the session's calls, from 1
    node_id: int | None
    role: str
    model: str
    tokens_in: int
    tokens_out: int
    latency_s: float | None
    cost: float
    ok: bool
    error: str | None
    estimated: bool
    messages: list[tuple[str, list[Piece]]]   # (role, pieces)
    reply: list[Piece]
    parsed: list[tuple[str, str]]             # (what, text): plan, code, review …
    marks: list[Mark] = field(default_factory=list)
    attached: bool = True         # False: recorded without a node, made just before this node

    @property
    def title(self) -> str:
        return f"call {self.number} · {self.role}" + (f" · node {self.node_id}" if self.node_id is not None else "")


def session_calls(state: SessionState) -> list[dict[str, Any]]:
    """Every llm_call payload of the session, in the order they were recorded."""
    calls = [c for n in state.nodes.values() for c in n.conversation] + list(state.unassigned_calls)
    return sorted(calls, key=lambda c: int(c.get("seq") or 0))


def _sections(text: str) -> list[str]:
    parts = [p for p in _SECTION.split(text) if p]
    return parts or [text]


def _origin(number: int, call: dict[str, Any]) -> str:
    node = call.get("node_id")
    return f"call {number}" + (f" (node {node} · {call.get('role')})" if node is not None else f" ({call.get('role')})")


class _Seen:
    """First occurrences of large texts across the session's calls: whole messages, their
    markdown sections, and the human's own long texts (a guidance, the instruction) wherever
    they are quoted (a plan that repeats a guidance, a reply that echoes it)."""

    def __init__(self, quoted: dict[str, str]) -> None:
        self.first: dict[str, str] = {}
        self.quoted = {text: label for text, label in quoted.items() if len(text) >= DEDUP_MIN}

    def pieces(self, text: str, where: str) -> list[Piece]:
        if len(text) < DEDUP_MIN:
            return [Piece(text)]
        if text in self.first:
            return [Piece(text, f"same as {self.first[text]} · {len(text):,} characters")]
        out = []
        for section in _sections(text):
            if len(section) >= DEDUP_MIN and section in self.first:
                out.append(Piece(section, f"same as {self.first[section]} · {len(section):,} characters"))
                continue
            if len(section) >= DEDUP_MIN:
                self.first[section] = where
            out.append(Piece(self.inline(section, where)))
        self.first.setdefault(text, where)
        return out

    def inline(self, text: str, where: str) -> str:
        """`text` with each long quoted text already shown elsewhere replaced by a reference."""
        for quoted, label in self.quoted.items():
            if quoted not in text:
                continue
            if quoted not in self.first:
                self.first[quoted] = where
                first, rest = text.split(quoted, 1)
                text = first + quoted + rest.replace(quoted, _ref(label, where, quoted))
            else:
                text = text.replace(quoted, _ref(label, self.first[quoted], quoted))
        return text


def _ref(label: str, where: str, text: str) -> str:
    return f"⟨{label}: same as {where} · {len(text):,} characters⟩"


def _marks(state: SessionState, messages: list[dict[str, Any]], guidance_ids: list[int]) -> list[Mark]:
    texts = [(f"message {i} ({m.get('role')})", str(m.get("content") or "")) for i, m in enumerate(messages, 1)]
    out = []
    instruction = state.instruction.strip()
    if instruction:
        out.append(Mark(f"instruction ({state.level or 'level ?'})",
                        tuple(where for where, text in texts if instruction in text)))
    for gid in guidance_ids:
        g = state.guidance.get(gid)
        if g is not None and g.text.strip():
            out.append(Mark(f"guidance #{gid}", tuple(where for where, text in texts if g.text.strip() in text)))
    return out


def _parsed(node: NodeState | None, role: str) -> list[tuple[str, str]]:
    """What the engine took from the reply: the node's plan and code, or its review."""
    if node is None:
        return []
    if role == "review":
        out = [("review", node.review_summary or "")]
        if node.claimed_metric is not None:
            out.append(("claimed metric", f"{node.claimed_metric:.4f}"))
        if node.is_bug is not None:
            out.append(("judged buggy", "yes" if node.is_bug else "no"))
        return out
    return [("plan", node.plan), ("code", node.code)]


def _attached_calls(state: SessionState, node: NodeState) -> list[dict[str, Any]]:
    """Calls recorded without a node (node_id null) between the previous node's creation and this one's."""
    earlier = [n.created_seq for n in state.nodes.values() if n.created_seq < node.created_seq]
    after = max(earlier, default=0)
    return [c for c in state.unassigned_calls if after < int(c.get("seq") or 0) < node.created_seq]


def node_calls(state: SessionState, node_id: int) -> list[CallView]:
    """The node's LLM calls (and any recorded without a node just before it), deduplicated
    against every earlier call of the session."""
    node = state.nodes.get(node_id)
    if node is None:
        return []
    mine = {id(c) for c in node.conversation}
    attached = {id(c) for c in _attached_calls(state, node)}
    quoted = {g.text.strip(): f"guidance #{g.guidance_id}" for g in state.guidance.values()}
    seen = _Seen({**quoted, state.instruction.strip(): "the instruction"})
    out = []
    for number, call in enumerate(session_calls(state), 1):
        origin = _origin(number, call)
        messages = [(str(m.get("role") or "?"), seen.pieces(str(m.get("content") or ""), f"{origin}, message {i}"))
                    for i, m in enumerate(call.get("messages") or [], 1) if isinstance(m, dict)]
        reply = seen.pieces(str(call.get("reply") or ""), f"{origin}, reply")
        if id(call) not in mine and id(call) not in attached:
            continue
        role = str(call.get("role") or "?")
        out.append(CallView(
            number=number, node_id=call.get("node_id"), role=role, model=str(call.get("model") or ""),
            tokens_in=int(call.get("tokens_in") or 0), tokens_out=int(call.get("tokens_out") or 0),
            latency_s=call.get("latency_s"), cost=float(call.get("cost") or 0.0), ok=bool(call.get("ok", True)),
            error=call.get("error"), estimated=bool(call.get("tokens_estimated")), messages=messages, reply=reply,
            parsed=[(what, seen.inline(text, f"{origin}, parsed {what}")) for what, text in _parsed(node, role)]
            if call.get("ok", True) else [],
            marks=_marks(state, list(call.get("messages") or []), node.guidance_ids),
            attached=id(call) in mine))
    return out


def live_text(state: SessionState, live: dict[str, Any] | None = None) -> tuple[str, str] | None:
    """(title, text) of a reply the model is writing right now, if any. `live`: the reply with its
    text (engine.session.live_reply: the side channel, or a replay's look-ahead); else the state's own
    (old sessions stored the text in their llm_stream events)."""
    live = live if live is not None else state.live_reply
    if not live:
        return None
    title = f"the model is writing: {live.get('role')} · step {live.get('step')}"
    if live.get("tokens"):
        title += f" · {live['tokens']:,} token{'' if live['tokens'] == 1 else 's'}"
    rate = live.get("recent_tokens_per_s", live.get("tokens_per_s"))
    if rate is not None:
        title += f" · {float(rate):.1f} tokens/s now"
    if live.get("tokens_per_s") is not None:
        title += f" ({float(live['tokens_per_s']):.1f} since the first)"
    return title, str(live.get("text") or "")


def guidance_reference(state: SessionState, node: NodeState, gid: int) -> str | None:
    """None where a guidance is shown in full at this node (the first node it shaped); else a
    reference to that node: later plans show it once, not again and again."""
    g = state.guidance.get(gid)
    if g is None or not g.used_by or g.used_by[0] == node.node_id:
        return None
    return f"guidance #{gid}, shown in full at node {g.used_by[0]} ({len(g.text):,} characters)"


def plan_without_repeats(state: SessionState, node: NodeState, min_chars: int = 120) -> str:
    """The node's plan with long guidance text it repeats replaced by a reference (the guidance
    is shown in full once, at the first node it shaped)."""
    plan = node.plan or ""
    for gid in node.guidance_ids:
        g = state.guidance.get(gid)
        ref = guidance_reference(state, node, gid)
        if g is None or ref is None:
            continue
        for piece in sorted({g.text.strip(), *(p.strip() for p in re.split(r"\n+", g.text))}, key=len, reverse=True):
            if len(piece) >= min_chars and piece in plan:
                plan = plan.replace(piece, f"[{ref}]")
    return plan
