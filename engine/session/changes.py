"""What an event changes, decided once: the store's row updates and the console's redraws both read it.

`apply_changes(state, event, changes)` folds the event (state.apply) and records in `changes` which
nodes, guidance entries and subtrees it touched, the output text it carried, and whether the best
node, the scores or the session's summary may have moved. A batch of events shares one Changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from engine.session import events as ev
from engine.session.selection import MAY_CHANGE_BEST
from engine.session.state import SessionState, apply

# events whose node_id names the node they are about, but that change nothing drawn for it
_NOT_ABOUT_THE_NODE = frozenset({ev.GUIDANCE, ev.POLICY_DECISION})
# events that change no row: the output is streamed to the panel, the rest is only in the log
_NO_ROW_CHANGE = frozenset({ev.OUTPUT, ev.POLICY_DECISION, ev.ERROR})


@dataclass
class Changes:
    nodes: set[int] = field(default_factory=set)          # their row, tree line or panel
    guidance: set[int] = field(default_factory=set)       # guidance entries to draw
    subtrees: set[int] = field(default_factory=set)       # a pruned node: it and all below it
    output: dict[int, list[str]] = field(default_factory=dict)  # text a node printed
    rows: set[int] = field(default_factory=set)           # nodes whose database row is out of date
    best: bool = False      # the best node by some criterion may have moved
    scores: bool = False    # figures on the scoreboard and the plot may have moved
    summary: bool = False   # the session's own row may have moved
    live: bool = False      # a streaming reply moved on

    def __bool__(self) -> bool:
        return bool(self.nodes or self.guidance or self.subtrees or self.output or self.rows
                    or self.best or self.scores or self.summary or self.live)


def apply_changes(state: SessionState, event: ev.Event, changes: Changes | None = None) -> Changes:
    """Fold `event` into `state` and record what it changed (into `changes` when given)."""
    changes = changes if changes is not None else Changes()
    apply(state, event)
    record(state, event, changes)
    return changes


def record(state: SessionState, event: ev.Event, changes: Changes) -> None:
    kind, payload = event.kind, event.payload
    node_id = payload.get("node_id")
    if kind in (ev.LLM_STREAM, ev.LLM_CALL):
        changes.live = True
    if kind == ev.OUTPUT and node_id is not None:
        changes.output.setdefault(node_id, []).append(payload.get("text") or "")
    if kind not in _NO_ROW_CHANGE:
        changes.summary = True
        if node_id is not None and node_id in state.nodes:
            changes.rows.add(node_id)
    if kind in (ev.LLM_STREAM, ev.OUTPUT):
        return
    if node_id is not None and kind not in _NOT_ABOUT_THE_NODE:
        changes.nodes.add(node_id)
    if kind == ev.NODE_CREATED:
        changes.guidance.update(payload.get("guidance_ids") or [])
        if payload.get("parent_id") is not None:
            changes.nodes.add(payload["parent_id"])
    elif kind == ev.GUIDANCE:
        changes.guidance.add(payload["guidance_id"])
    elif kind == ev.PRUNED and node_id is not None:
        changes.subtrees.add(node_id)
    changes.best |= kind in MAY_CHANGE_BEST
    changes.scores |= kind in MAY_CHANGE_BEST or kind == ev.SESSION_FINISHED
