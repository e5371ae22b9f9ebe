"""What both prompt sets share (engine.coders.llm.prompts and engine.coders.llm.prompts_be_fair): the shape
of a prompt set, the human's guidance, marked as the domain expert's, and the review's answer
format (a tool call, or JSON said in words for a server without function calling).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from engine.coders.protocol import CoderContext, NodeView


GUIDANCE_PREAMBLE = (
    "The following guidance comes from the human domain expert who is steering this search. It "
    "is the expert's, not part of the original task description. Follow it unless it is "
    "impossible, and say in your plan how you follow it."
)


def guidance_section(ctx: CoderContext, *, include_node: bool) -> str | None:
    """The human's guidance in force, marked as the domain expert's; None when there is none."""
    global_items = [g.strip() for g in ctx.guidance_global if g and g.strip()]
    node_items = [g.strip() for g in ctx.guidance_node if g and g.strip()] if include_node else []
    if not global_items and not node_items:
        return None
    parts = [GUIDANCE_PREAMBLE]
    if global_items:
        parts.append("For every step, the domain expert says:\n"
                     + "\n".join(f'- "{g}"' for g in global_items))
    if node_items:
        parts.append("For this step (about the solution below), the domain expert says:\n"
                     + "\n".join(f'- "{g}"' for g in node_items))
    return "\n\n".join(parts)


REVIEW_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "submit_review",
        "description": "Submit a review evaluating the output of the training script.",
        "parameters": {
            "type": "object",
            "properties": {
                "is_bug": {
                    "type": "boolean",
                    "description": "true if the output log shows that the execution failed or "
                    "has some bug, otherwise false.",
                },
                "summary": {
                    "type": "string",
                    "description": "if there is a bug, propose a fix. Otherwise, write a short "
                    "summary (2-3 sentences) describing the empirical findings.",
                },
                "metric": {
                    "type": ["number", "null"],
                    "description": "If the code ran successfully, report the value of the "
                    "validation AUROC it printed. Otherwise, leave it null.",
                },
            },
            "required": ["is_bug", "summary", "metric"],
        },
    },
}

REVIEW_JSON_FORMAT = (
    "Reply with only a JSON object, no other text, of the form "
    '{"is_bug": true or false, "summary": "...", "metric": <number or null>}: is_bug is true if '
    "the output log shows that the execution failed or has some bug; summary proposes a fix if "
    "there is a bug and otherwise describes the empirical findings in 2-3 sentences; metric is "
    "the validation AUROC the code printed, or null if it printed none."
)


@dataclass(frozen=True)
class PromptSet:
    """One task protocol's four prompts, each a nested dict of sections (engine.coders.llm.prompts
    compiles it): draft(ctx, exec_timeout), improve and debug(ctx, parent, exec_timeout),
    review(ctx, node, json_only); and the tool its review is asked to call (a server without
    function calling is told the JSON in words by review(..., json_only=True))."""
    draft: Callable[[CoderContext, float | None], dict[str, Any]]
    improve: Callable[[CoderContext, NodeView, float | None], dict[str, Any]]
    debug: Callable[[CoderContext, NodeView, float | None], dict[str, Any]]
    review: Callable[[CoderContext, NodeView, bool], dict[str, Any]]
    review_tool: dict[str, Any] = field(default_factory=lambda: REVIEW_TOOL)
