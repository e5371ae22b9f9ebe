"""Steering commands, as the runner consumes them: one small handler per command kind.

Each handler reads the command row (kind, payload, issued_by, id) and the folded state, and
either records what the command did as an event (consuming the command in the same
transaction) or rejects it with an `error` event that says why.
"""
from __future__ import annotations

from typing import Any, Protocol
from collections.abc import Callable

from engine.agent.task_protocol import task_protocol
from engine.agent.session_config import feedback_allowed
from engine.session import event_types as et
from engine.session import events as ev
from engine.session import feedback, selection
from engine.session.state import SessionState


class CommandSink(Protocol):
    """What a handler needs of the runner."""
    stop: bool
    interrupt: bool

    @property
    def state(self) -> SessionState: ...

    def emit(self, typed: et.TypedEvent, *, consumes: dict[str, Any] | None = None,
             result: str = "applied") -> ev.Event: ...

    def consume(self, cmd: dict[str, Any], result: str) -> None: ...


class Rejected(Exception):
    def __init__(self, why: str, node_id: int | None = None):
        super().__init__(why)
        self.why, self.node_id = why, node_id


def _node_id(cmd: dict[str, Any], st: SessionState) -> int:
    try:
        raw: Any = (cmd.get("payload") or {}).get("node_id")  # None raises TypeError below
        node_id = int(raw)
    except (TypeError, ValueError):
        raise Rejected(f"{cmd['kind']} needs a node id") from None
    if node_id not in st.nodes:
        raise Rejected(f"no node {node_id}", node_id)
    return node_id


def _who(cmd: dict[str, Any]) -> dict[str, Any]:
    who = {"by": cmd.get("issued_by") or "user", "command_id": cmd["id"]}
    if cmd.get("participant_id"):
        who["participant_id"] = cmd["participant_id"]
    return who


def guidance_budget(st: SessionState) -> int | None:
    """The most guidance messages a study's participant may give in this session (None: no limit)."""
    budget = ((st.config.get("extra") or {}).get("study") or {}).get("guidance_budget")
    return None if budget is None else int(budget)


def _check_owner(cmd: dict[str, Any], st: SessionState) -> None:
    """A command a study's participant issued must be for their own session."""
    who = cmd.get("participant_id")
    owner = st.config.get("participant_id")
    if who and who != owner:
        raise Rejected(f"participant {who} may not steer this session (it is {owner or 'no participant'}'s)")


def pause(sink: CommandSink, cmd: dict[str, Any]) -> None:
    if sink.state.status == "paused":
        return sink.consume(cmd, "ignored: already paused")
    sink.emit(et.Paused(**_who(cmd), reason=(cmd.get("payload") or {}).get("reason")), consumes=cmd)


def resume(sink: CommandSink, cmd: dict[str, Any]) -> None:
    if sink.state.status != "paused":
        return sink.consume(cmd, "ignored: not paused")
    sink.emit(et.Resumed(**_who(cmd)), consumes=cmd)


def stop(sink: CommandSink, cmd: dict[str, Any]) -> None:
    interrupt = bool((cmd.get("payload") or {}).get("interrupt", True))
    sink.emit(et.StopRequested(**_who(cmd), interrupt=interrupt), consumes=cmd)
    sink.stop = True
    sink.interrupt = sink.interrupt or interrupt


def guide(sink: CommandSink, cmd: dict[str, Any]) -> None:
    p, st = cmd.get("payload") or {}, sink.state
    text = str(p.get("text") or "").strip()
    scope = p.get("scope") or ("node" if p.get("node_id") is not None else "global")
    if not text:
        raise Rejected("empty guidance")
    if scope not in ("global", "node"):
        raise Rejected(f"unknown scope {scope!r}")
    if scope == "node" and p.get("node_id") is None:
        raise Rejected("node guidance needs a node id")
    node_id = _node_id(cmd, st) if scope == "node" else None
    budget = guidance_budget(st)
    if budget is not None and len(st.guidance) >= budget:
        raise Rejected(f"the guidance budget of this session ({budget}) is spent")
    gid = max(st.guidance, default=0) + 1
    sink.emit(et.Guidance(guidance_id=gid, text=text, scope=scope, node_id=node_id, **_who(cmd)), consumes=cmd)


def prune(sink: CommandSink, cmd: dict[str, Any]) -> None:
    node_id = _node_id(cmd, sink.state)
    sink.emit(et.Pruned(node_id=node_id, **_who(cmd)), consumes=cmd)


def expand(sink: CommandSink, cmd: dict[str, Any]) -> None:
    node_id = _node_id(cmd, sink.state)
    if sink.state.is_pruned(node_id):
        raise Rejected(f"node {node_id} is in a pruned subtree", node_id)
    sink.emit(et.ExpandRequested(node_id=node_id, **_who(cmd)), consumes=cmd)


def set_budget(sink: CommandSink, cmd: dict[str, Any]) -> None:
    try:
        raw: Any = (cmd.get("payload") or {}).get("steps")  # None raises TypeError below
        steps = int(raw)
    except (TypeError, ValueError):
        raise Rejected("set_budget needs a number of steps") from None
    if steps < 0:
        raise Rejected("the step budget cannot be negative")
    sink.emit(et.BudgetSet(steps=steps, **_who(cmd)), consumes=cmd)


def set_criterion(sink: CommandSink, cmd: dict[str, Any]) -> None:
    criterion = str((cmd.get("payload") or {}).get("criterion") or "")
    if criterion not in selection.CRITERIA:
        raise Rejected(f"unknown criterion {criterion!r}; one of {', '.join(selection.CRITERIA)}")
    protocol = task_protocol(sink.state.config.get("protocol") or "befair")
    if not protocol.allows_criterion(criterion):
        raise Rejected(f"the {protocol.name} protocol withholds no validation set: only the agent's own score "
                       "can choose")
    if criterion == selection.current_criterion(sink.state):
        return sink.consume(cmd, f"ignored: already {criterion}")
    sink.emit(et.CriterionSet(criterion=criterion, **_who(cmd)), consumes=cmd)


def set_feedback(sink: CommandSink, cmd: dict[str, Any]) -> None:
    value = str((cmd.get("payload") or {}).get("feedback") or "")
    if value not in feedback.FEEDBACK:
        raise Rejected(f"unknown feedback {value!r}; one of {', '.join(feedback.FEEDBACK)}")
    protocol = str(sink.state.config.get("protocol") or "befair")
    if value not in feedback_allowed(protocol):
        raise Rejected(f"the {protocol} protocol shows the agent AIDE's prompts: nothing of befair's measurements")
    if value == feedback.current_feedback(sink.state):
        return sink.consume(cmd, f"ignored: already {value}")
    sink.emit(et.FeedbackSet(feedback=value, **_who(cmd)), consumes=cmd)


HANDLERS: dict[str, Callable[[CommandSink, dict[str, Any]], None]] = {
    "pause": pause, "resume": resume, "stop": stop, "guide": guide, "prune": prune, "expand": expand,
    "set_budget": set_budget, "set_criterion": set_criterion, "set_feedback": set_feedback,
}


def apply_command(sink: CommandSink, cmd: dict[str, Any]) -> None:
    """Apply one pending command; a bad one is consumed with an error event saying why."""
    handler = HANDLERS.get(cmd["kind"])
    try:
        if handler is None:
            raise Rejected(f"unknown command {cmd['kind']!r}")
        _check_owner(cmd, sink.state)
        handler(sink, cmd)
    except Rejected as exc:
        error = et.Error(message=f"{cmd['kind']} command {cmd['id']} rejected: {exc.why}", node_id=exc.node_id,
                         where="command", participant_id=cmd.get("participant_id") or et.ABSENT)
        sink.emit(error, consumes=cmd, result=f"rejected: {exc.why}")
