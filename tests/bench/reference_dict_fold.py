"""Today's fold, kept as the benchmarks' reference: the reducer as it read payload dicts, before
it dispatched on typed events (issue 21). A verbatim copy of engine/session/state.py's handlers
at commit 950f965; only used to measure the typed fold against it in the same run."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from engine.session import events as ev
from engine.session.state import OUTPUT_KEEP, GuidanceState, NodeState, SessionState, new_state
from engine.session.store import SessionStore
from engine.session.store.connection import gc_paused, payload_loads


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


def _feedback_set(s: SessionState, p: Payload, e: ev.Event) -> None:
    if p.get("feedback"):
        s.feedback = str(p["feedback"])


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
    ev.FEEDBACK_SET: _feedback_set,
    ev.COMPARED: _compared,
    ev.SESSION_FINISHED: _session_finished,
    ev.ERROR: _error,
}


def load_and_fold(store: SessionStore, session_id: str) -> SessionState:
    """Today's SessionStore.state: the events read as bare dicts, then today's fold."""
    sql = "select seq, ts, kind, payload from events where session_id = ? and seq > ? order by seq"
    with gc_paused():
        events = [ev.Event(seq=seq, kind=kind, payload=payload_loads(payload), ts=ts, session_id=session_id)
                  for seq, ts, kind, payload in store.db.conn.execute(sql, [session_id, 0])]
        return fold(events, session_id)
