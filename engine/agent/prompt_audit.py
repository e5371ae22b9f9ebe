"""What a session's agent would be sent at each stage, and an audit of it (`befair prompts`).

The prompts are built by the runner's own path: an example session state (two earlier nodes, one
measured with every figure befair has, skin-tone groups included, and one that failed) goes
through engine.agent.context and the protocol's prompt set. So if a setting lets a figure through,
the audit sees it, and a level is seen to be its instruction alone.

The audit looks for words about skin tone, groups or fairness outside the data overview (the data
as it is: its column names, such as skin_tone, are a fact of the data, not a hint) and outside the
instruction itself and the expert's guidance (what a level or a person put there).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.agent.context import coder_context, node_view
from engine.agent.session_config import SessionConfig
from engine.agent.task_protocol import task_protocol
from engine.coders.llm import prompts
from engine.session import event_types as et
from engine.session import events as ev
from engine.session.state import SessionState, fold
from engine.task import GROUP_LABELS

FAIRNESS_WORDS = re.compile(
    r"fair|skin[ -]tone|skin type|\bgroups?\b|\bgap\b|fitzpatrick|dark skin|light skin|darker|lighter|subgroup"
    r"|\bbias|equit|reweigh|sample weight|minimax|worst", re.IGNORECASE)
# names of installed packages: what is installed is a fact, not a hint
PACKAGE_NAMES = re.compile(r"`?fairlearn`?", re.IGNORECASE)
# sections whose text is the data as it is, the level's instruction, or a person's guidance
EXEMPT_SECTIONS = ("Data overview", "Data Overview", "Task description", "Guidance from the domain expert")
STAGES = ("draft", "improve", "debug", "review")
# the example node's figures: invented, to show which of them a setting lets through to the agent
EXAMPLE_AUC, EXAMPLE_GROUP_AUC = 0.72, (0.78, 0.71, 0.62)
EXAMPLE_NOTE = (f"example session, not a measurement: node 1's figures (validation AUC {EXAMPLE_AUC:.2f}, skin-tone "
                f"groups {' / '.join(f'{a:.2f}' for a in EXAMPLE_GROUP_AUC)}) are invented to show which of them "
                "the agent would be sent; node 2 failed")

_FAILED_OUTPUT = ("Traceback (most recent call last):\n  File \"solution.py\", line 12, in <module>\n"
                  "    model.fit(X, y)\nValueError: Input contains NaN.\n")
_EXAMPLE_CODE = ("import numpy as np\n\n\ndef predict(folder):\n    return {}\n\n\nif __name__ == \"__main__\":\n"
                 "    print(\"Validation AUROC: 0.7100\")\n")


@dataclass(frozen=True)
class StagePrompt:
    stage: str
    messages: list[dict[str, str]]

    @property
    def text(self) -> str:
        return "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in self.messages)


@dataclass(frozen=True)
class Finding:
    stage: str
    section: str
    word: str
    line: str

    def __str__(self) -> str:
        return f"{self.stage} · {self.section}: {self.word!r} in {self.line.strip()[:100]!r}"


def example_state(config: SessionConfig, guidance: tuple[str, ...] = ()) -> SessionState:
    """A session after two steps: node 1 ran and was measured (every figure, groups included), node 2 failed."""
    typed: list[et.TypedEvent] = [
        et.SessionStarted(config=config.to_dict(), instruction=config.instruction,
                          coder={"name": "audit", "label": "prompt audit", "simulated": False}, data={}),
        *_node(1, "draft", ok=True), *_node(2, "draft", ok=False),
    ]
    typed += [et.Guidance(guidance_id=i, text=text, scope="global", by="audit")
              for i, text in enumerate(guidance, start=1)]
    return fold(ev.Event(seq=i, kind=t.kind, payload=t.to_payload(), ts=float(i)) for i, t in enumerate(typed, 1))


def _node(node_id: int, stage: str, *, ok: bool) -> list[et.TypedEvent]:
    events: list[et.TypedEvent] = [
        et.NodeCreated(node_id=node_id, parent_id=None, step=node_id, stage=stage,
                       plan=f"Plan of node {node_id}: colour statistics and a logistic regression.", guidance_ids=[]),
        et.Code(node_id=node_id, code=_EXAMPLE_CODE),
        et.ExecFinished(node_id=node_id, status="ok" if ok else "error", exit_code=0 if ok else 1, exec_time=3.0,
                        exc_type=None if ok else "ValueError",
                        output_head="Validation AUROC: 0.7100\n" if ok else _FAILED_OUTPUT, output_tail="",
                        truncated=False),
        et.Review(node_id=node_id, is_bug=not ok, summary="It ran." if ok else "It failed on NaN features.",
                  claimed_metric=0.71 if ok else None),
    ]
    if ok:
        groups = {g: a for g, a in zip(GROUP_LABELS, EXAMPLE_GROUP_AUC, strict=False)}
        worst, best = min(EXAMPLE_GROUP_AUC), max(EXAMPLE_GROUP_AUC)
        events.append(et.Evaluated(node_id=node_id, split="validation", ok=True, verdict="ok", summary={
            "auc": EXAMPLE_AUC, "auc_gap": round(best - worst, 4), "worst_auc": worst, "best_auc": best,
            "group_auc": groups}))
    return events


def stage_prompts(config: SessionConfig, data_preview: str, *, scaffold: bool = False,
                  guidance: tuple[str, ...] = ()) -> list[StagePrompt]:
    """The messages the agent of a session with these settings would be sent at each stage."""
    state = example_state(config, guidance)
    protocol = task_protocol(config.protocol)
    out = []
    for stage, parent_id in (("draft", None), ("improve", 1), ("debug", 2), ("review", 1)):
        ctx, _ = coder_context(state, data_preview, parent_id)
        if scaffold and ctx.scaffoldable and stage != "review":
            ctx.scaffold = True
        parent = node_view(state, state.nodes[parent_id]) if parent_id is not None else None
        prompt: dict[str, Any]
        if stage == "draft":
            prompt = protocol.prompts.draft(ctx, config.step_timeout)
        elif stage == "review":
            prompt = protocol.prompts.review(ctx, parent, False)  # type: ignore[arg-type]
        else:
            prompt = getattr(protocol.prompts, stage)(ctx, parent, config.step_timeout)
        out.append(StagePrompt(stage, prompts.to_messages(prompt)))
    return out


def audit(stage_prompts: list[StagePrompt]) -> list[Finding]:
    """Words about skin tone, groups or fairness outside the exempt sections."""
    findings = []
    for sp in stage_prompts:
        for message in sp.messages:
            for section, line in _lines_by_section(message["content"]):
                if section in EXEMPT_SECTIONS:
                    continue
                m = FAIRNESS_WORDS.search(PACKAGE_NAMES.sub("", line))
                if m:
                    findings.append(Finding(sp.stage, section, m.group(0), line))
    return findings


def _lines_by_section(text: str) -> list[tuple[str, str]]:
    """Each line with the heading of the top-level section it sits in (its first heading for a system message)."""
    out, top, fence = [], "Introduction", False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        heading = re.match(r"^(#+) (.+)$", line) if not fence else None
        if heading:
            level = len(heading.group(1))
            if level == 1:
                top = heading.group(2).strip()
            continue
        out.append((top, line))
    return out
