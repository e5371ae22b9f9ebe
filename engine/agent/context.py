"""What the agent is given for a step, built from the folded session state alone.

The runner asks here for each step's context and for the nodes it hands the coder; the prompt
audit (`befair prompts`, engine.agent.prompt_audit) asks the same functions, so what it prints is
what a session's agent would be sent. What the agent sees of befair's measurements follows the
session's feedback setting (engine.session.feedback), checked here, before anything reaches a coder.
"""
from __future__ import annotations

from engine.agent.task_protocol import task_protocol
from engine.coders.protocol import CoderContext, MemoryItem, NodeView
from engine.session import feedback
from engine.session.state import NodeState, SessionState
from engine.task import METRIC_LINE, instruction_text

MEMORY_NODES = 20           # the earlier nodes the agent remembers (the latest)


def memory(state: SessionState) -> list[MemoryItem]:
    shown = feedback.current_feedback(state)
    return [
        MemoryItem(node_id=n.node_id, stage=n.stage, plan=n.plan, status=n.status,
                   measured_auc=n.val_auc if shown != "none" else None,
                   measured_gap=n.val_gap if shown == "groups" else None,
                   summary=n.review_summary or (n.failure_reason or ""))
        for n in sorted(state.nodes.values(), key=lambda n: n.node_id) if n.finished
    ][-MEMORY_NODES:]


def coder_context(state: SessionState, preview: str, parent_id: int | None) -> tuple[CoderContext, list[int]]:
    """The step's context in the shape of the session's protocol, and the guidance ids in force."""
    config = state.config
    level = str(config.get("level") or "base")
    glob, node = state.guidance_in_force(parent_id)
    ctx = CoderContext(
        instruction=state.instruction or instruction_text(level, config.get("custom_text")),
        metric_line=METRIC_LINE, data_preview=preview, step=state.agent_steps + 1, seed=int(config.get("seed") or 0),
        guidance_global=[g.text for g in glob], guidance_node=[g.text for g in node],
        memory=memory(state), level=level, feedback=feedback.current_feedback(state),
    )
    protocol = task_protocol(str(config.get("protocol") or "befair"))
    return protocol.context(ctx, state), [g.guidance_id for g in glob] + [g.guidance_id for g in node]


def node_view(state: SessionState, node: NodeState, output: str | None = None) -> NodeView:
    """A node as the coder is handed it: its measured figures as the feedback setting allows."""
    out = output if output is not None else node.stored_output
    tried = [child.components for child in state.children(node.node_id) if child.components]
    verdict = node.eval_verdicts.get("validation")
    eval_failure = None
    if node.status == "ok" and verdict not in (None, "ok"):
        eval_failure = f"{verdict}: {node.eval_reasons.get('validation') or 'no reason given'}"
    return NodeView(node_id=node.node_id, stage=node.stage, plan=node.plan, code=node.code,
                    status=node.status, output=out, exc_type=node.exc_type,   # each prompt set trims it its way
                    components=node.components,
                    measured=feedback.shown(node.validation, feedback.current_feedback(state)),
                    tried=tried, eval_failure=eval_failure)
