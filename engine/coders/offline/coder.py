"""The offline coder: the embedded default agent. A SIMULATED agent, labelled as such everywhere.

It writes real, runnable pipelines from the component grammar (engine/offline_grammar.py, composed by composer.py):
draft samples a pipeline, improve changes one component of its parent, debug repairs a failing
parent. Its choices follow what the study observed agents do at each instruction level (base
never touches skin tone; fairness-hint rarely; fairness-metric monitors per-group AUC about half
the time; fairness-methods always applies an intervention, most often reweighting) and the
human's guidance: component keywords and a dermatologist's plain words (clinical.py) map to
components, and the plan answers each guidance text in plain words: what it took from it, or that
it could not turn it into a change. Realistic failures are injected at `failure_rate` (a KeyError on a wrong
column name, a shape bug, a missing import, a loop too slow to finish) so the debug path runs.

Deterministic: the same seed, step and parent give the same reply.
"""
from __future__ import annotations

import json
import os
import random
import re
from typing import Any

from engine.coders.offline.composer import render
from engine.coders.offline.guidance import (
    Directive,
    Outcome,
    answer,
    applicable,
    apply_directive,
    parse_guidance,
    satisfied,
)
from engine.coders.offline.sampling import level_profile, lighten, mutate_one, sample_draft
from engine.coders.protocol import CoderBase, CoderContext, CoderReply, NodeView, Review
from engine.evaluation.audit import parse_claimed_metric
from engine.offline_grammar import MODEL_NAMES, Compute, components_from_code, describe, normalise

LABEL = "offline coder (simulated agent)"

BUG_WEIGHTS = {"key_error": 0.35, "shape": 0.25, "missing_import": 0.25, "slow": 0.15}
BUG_FIXES = {
    "key_error": "Fix the KeyError: the label column is called 'label', not 'diagnosis'.",
    "shape": "Fix the shape bug: the labels were shifted by one row (y = y[1:]) so they no longer matched "
             "the images; keep them aligned.",
    "missing_import": "Fix the NameError: import roc_auc_score from sklearn.metrics.",
    "slow": "The run timed out: the loop recomputed the features of every image (or trained for far too "
            "many epochs); compute features once and keep the training short.",
}


class OfflineCoder(CoderBase):
    name = "offline"
    label = LABEL
    simulated = True

    def __init__(self, *, failure_rate: float = 0.15, seed: int = 0, device: str | None = None,
                 step_timeout: float | None = None, fit_compute: bool = True):
        """`device` (default: cuda where this machine has a GPU, else cpu) and `step_timeout`
        (default 600 s, SessionConfig's) decide which pipelines it writes: only those whose run
        fits the step limit on that device (light models on a CPU). `fit_compute=False` samples
        from the whole grammar, as the study's agents did."""
        self.failure_rate = float(failure_rate)
        self.seed = int(seed)
        self.compute = Compute(device or detect_device(), float(step_timeout or 600.0)) if fit_compute else None

    def info(self) -> dict[str, Any]:
        fits = {"device": self.compute.device, "step_timeout": self.compute.step_timeout} if self.compute else None
        return {"name": self.name, "label": self.label, "simulated": True, "model": None, "fits": fits}

    # -- helpers ------------------------------------------------------------------------
    def _rng(self, ctx: CoderContext, stage: str, parent: int | None) -> random.Random:
        return random.Random(f"befair-offline|{ctx.seed}|{stage}|{ctx.step}|{parent}")

    def _maybe_bug(self, rng: random.Random, c: dict[str, Any], rate: float, exclude: str | None = None) -> None:
        roll = rng.random()
        kinds = {k: w for k, w in BUG_WEIGHTS.items() if k != exclude}
        kind = rng.choices(list(kinds), weights=list(kinds.values()), k=1)[0]
        c["bug"] = kind if roll < rate else None

    @staticmethod
    def _directives(ctx: CoderContext) -> list[Directive]:
        return parse_guidance(list(ctx.guidance_global) + list(ctx.guidance_node))

    @staticmethod
    def _guidance_note(ctx: CoderContext, directives: list[Directive], outcome: Outcome, model: str) -> str:
        texts = list(ctx.guidance_global) + list(ctx.guidance_node)
        return answer(texts, directives, outcome, model) if texts else ""

    def _own_change(self, rng: random.Random, c: dict[str, Any], profile: str,
                    kept: list[Directive]) -> tuple[dict[str, Any], str]:
        """A change of the agent's own choosing that does not undo guidance already in place."""
        for _ in range(12):
            child, change = mutate_one(rng, c, profile, self.compute)
            if all(satisfied(child, d) for d in kept):
                break
        return child, change

    def _reply(self, plan: str, c: dict[str, Any]) -> CoderReply:
        return CoderReply(plan=plan, code=render(c, plan), components=c)

    def _fresh(self, ctx: CoderContext, why: str) -> CoderReply:
        """A new draft for a parent the grammar cannot read (foreign code), saying why."""
        reply = self.draft(ctx)
        reply.plan = why + "\n" + reply.plan
        return reply

    # -- the Coder interface ------------------------------------------------------------
    def draft(self, ctx: CoderContext) -> CoderReply:
        rng = self._rng(ctx, "draft", None)
        profile = level_profile(ctx.level, ctx.instruction)
        c = sample_draft(rng, profile, self.compute)
        directives = self._directives(ctx)
        outcome = Outcome([], [], [], [])
        for d in directives:
            if not applicable(c, d):
                outcome.inapplicable.append(d)
            elif apply_directive(c, d, rng):
                outcome.applied.append(d)
            else:
                outcome.already.append(d)
        c = normalise(c)
        self._maybe_bug(rng, c, self.failure_rate)
        lines = [f"Draft a pipeline: {MODEL_NAMES[c['model']]}."]
        note = self._guidance_note(ctx, directives, outcome, c["model"])
        if note:
            lines.append(note)
        lines += [f"- {line}" for line in describe(c)]
        lines.append("- a stratified 80/20 train/validation split of the training data; report the validation AUROC")
        return self._reply("\n".join(lines), c)

    def improve(self, ctx: CoderContext, parent: NodeView) -> CoderReply:
        rng = self._rng(ctx, "improve", parent.node_id)
        profile = level_profile(ctx.level, ctx.instruction)
        base = _parent_components(parent)
        if base is None:
            return self._fresh(ctx, f"Node {parent.node_id} was not written from my component grammar; "
                                    "I start a fresh pipeline instead.")
        c = json.loads(json.dumps(base))
        c["bug"] = None
        directives = self._directives(ctx)
        change, outcome = None, Outcome([], [], [], [])
        for d in directives:  # guidance first: one component per improvement
            if not applicable(c, d):
                outcome.inapplicable.append(d)
            elif satisfied(c, d):
                outcome.already.append(d)
            elif change is None and apply_directive(c, d, rng):
                change = f"{d.plain()} (asked for in guidance: \"{d.text.strip()}\")"
                outcome.applied.append(d)
            else:
                outcome.pending.append(d)
        if change is None:
            c, change = self._own_change(rng, c, profile, outcome.already)
        c = normalise(c)
        tried = [_without_bug(t) for t in parent.tried or []]
        for _ in range(12):  # an improvement a sibling already made teaches nothing new
            if _without_bug(c) not in tried:
                break
            repeated = change
            c, change = self._own_change(rng, json.loads(json.dumps(base)), profile, outcome.already)
            c = normalise(c)
            outcome.pending = [d for d in directives if d in outcome.applied + outcome.pending]
            outcome.applied = []
            change += f" (\"{repeated}\" was already tried on node {parent.node_id})"
        self._maybe_bug(rng, c, self.failure_rate)
        measured = ""
        if parent.measured is not None and parent.measured.auc is not None:
            gap = parent.measured.auc_gap
            measured = f" (validation AUROC {parent.measured.auc:.3f}" + (
                f", gap {gap:.3f})" if gap is not None else ")")
        lines = [f"Improve node {parent.node_id}{measured}: change one thing: {change}."]
        note = self._guidance_note(ctx, directives, outcome, c["model"])
        if note:
            lines.append(note)
        lines += [f"- {line}" for line in describe(c)]
        return self._reply("\n".join(lines), c)

    def debug(self, ctx: CoderContext, parent: NodeView) -> CoderReply:
        rng = self._rng(ctx, "debug", parent.node_id)
        base = _parent_components(parent)
        if base is None:
            return self._fresh(ctx, f"Node {parent.node_id} failed ({parent.exc_type or parent.status}) and was "
                                    "not written from my component grammar; I rewrite it from scratch.")
        c = json.loads(json.dumps(base))
        bug = c.get("bug")
        if bug:
            c["bug"] = None
            fix = BUG_FIXES[bug]
        elif parent.status == "timeout" or (parent.exc_type or "") in ("MemoryError", "OutOfMemoryError") or \
                "killed by" in (parent.exc_type or ""):
            c, what = lighten(c)
            fix = f"The run {'timed out' if parent.status == 'timeout' else 'ran out of memory'}: {what}."
        else:
            c, what = lighten(c)
            fix = f"The run failed with {parent.exc_type or 'an error'}; simplify it: {what}."
        # guidance still applies to a repair ("use logistic regression"), but not a step such as
        # "train longer", which would undo the lightening of a run that timed out
        directives = [d for d in self._directives(ctx) if not d.relative]
        applied = [d for d in directives if apply_directive(c, d, rng)]
        c = normalise(c)
        self._maybe_bug(rng, c, self.failure_rate / 2, exclude=bug)
        lines = [f"Debug node {parent.node_id} ({parent.exc_type or parent.status}). {fix}"]
        if applied:
            texts = list(dict.fromkeys(d.text for d in applied))
            lines.append(answer(texts, applied, Outcome(applied, [], [], []), c["model"]))
        lines += [f"- {line}" for line in describe(c)]
        return self._reply("\n".join(lines), c)

    def review(self, ctx: CoderContext, node: NodeView) -> Review:

        output = node.output or ""
        claimed = parse_claimed_metric(output)
        if node.status != "ok":
            last = _last_error_line(output)
            what = {"timeout": "timed out", "interrupted": "was interrupted"}.get(node.status, "failed")
            detail = f": {last}" if last else (f" ({node.exc_type})" if node.exc_type else "")
            summary = f"The run {what}{detail}."
            return Review(is_bug=True, summary=summary, claimed_metric=claimed)
        if claimed is None:
            return Review(is_bug=True, summary="The run finished but printed no validation AUROC.",
                          claimed_metric=None)
        extra = ""
        gaps = re.findall(r"Skin-tone AUROC gap: ([0-9.]+)", output)
        if gaps:
            extra = f"; the skin-tone AUROC gap on its own split was {float(gaps[-1]):.3f}"
        return Review(is_bug=False,
                      summary=f"The pipeline ran and reported a validation AUROC of {claimed:.4f}{extra}.",
                      claimed_metric=claimed)


def detect_device() -> str:
    """"cuda" where a job would see a GPU (as the executor decides), else "cpu"."""
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES") == ""
    return "cuda" if os.path.exists("/dev/nvidiactl") and not hidden else "cpu"


def _last_error_line(output: str) -> str | None:
    for line in reversed(output.strip().splitlines()[-60:]):
        s = line.strip()
        if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b", s):
            return s[:200]
    return None


def _without_bug(components: dict[str, Any]) -> dict[str, Any]:
    return {**normalise(components), "bug": None}


def _parent_components(parent: NodeView) -> dict[str, Any] | None:
    """The parent's grammar choice: recorded on the node, else read from its code's header."""
    return normalise(parent.components) if parent.components else components_from_code(parent.code)
