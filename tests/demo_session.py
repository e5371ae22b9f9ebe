"""A recorded session for tests, snapshots and demos: `write_demo_session(store)`.

Fully deterministic: the same arguments write the same events (ids, timestamps, payloads),
so snapshot tests of the console stay stable. The session exercises every event kind that a
live session produces: drafts, improvements, debugs, a buggy node, a timeout, global and
per-node guidance, pause/resume, prune, expand, budget change, llm_call tokens, evaluation on
validation and test with per-group AUCs, audit flags, an unsupported claim, the final choice
by each criterion and session_finished (unless `finished=False`: then the last node is still
running, as a live session looks mid-step).

Keep it stable: the console's snapshot tests depend on its output. Change it only together
with those snapshots.
"""
from __future__ import annotations

import copy
import functools
import random
from statistics import NormalDist
from typing import Any, Protocol

from engine.session import events as ev
from engine.session import selection
from engine.session.state import SessionState
from engine.session.event_types import TypedEvent, parse


class _Writer(Protocol):
    """What the fixtures write through: a SessionWriter, or _MemoryWriter below."""

    session_id: str
    state: SessionState

    def emit(self, event: TypedEvent, *, ts: float | None = None,
             predictions: dict[str, float] | None = None) -> ev.Event: ...


class _Emit(Protocol):
    """A writer's emit."""

    def __call__(self, event: TypedEvent, *, ts: float | None = None,
                 predictions: dict[str, float] | None = None) -> ev.Event: ...


class _Store(Protocol):
    """A SessionStore, or _MemoryStore below."""

    def create_session(self, config: dict[str, Any], *, instruction: str, coder: dict[str, Any],
                       data: dict[str, Any], session_id: str | None = None, ts: float | None = None) -> _Writer: ...

    def writer(self, session_id: str) -> _Writer: ...

DEMO_LEVEL = "fairness-metric"
DEMO_CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True, "model": None}

_MODELS = ["colour-texture + logistic regression", "colour-texture + gradient boosting", "small CNN", "ResNet-18"]
_INTERVENTIONS = [None, "reweighting", "upsampling", "filtering", "pareto_selection"]
_PREPROCESS = ["resize 64", "colour constancy", "per-image standardisation"]


def _demo_config(n_nodes: int, seed: int) -> dict[str, Any]:
    from engine.agent.session_config import SessionConfig

    return SessionConfig(level=DEMO_LEVEL, steps=n_nodes, seed=seed, best="validation").to_dict()


def _code_for(components: dict[str, Any], bug: str | None) -> str:
    model = components["model"]
    lines = [
        "import numpy as np",
        "import pandas as pd",
        "from pathlib import Path",
        "from sklearn.metrics import roc_auc_score",
        "",
        f"# model: {model}; preprocessing: {components['preprocess']}",
        "df = pd.read_csv('input/train.csv')",
    ]
    if bug == "KeyError":
        lines.append("y = df['malignant']  # wrong column")
    else:
        lines.append("y = (df['label'] == 'malignant').astype(int)")
    intervention = components.get("intervention")
    if intervention:
        lines.append("groups = df['skin_tone'].clip(1, 6).sub(1) // 2")
    if intervention == "reweighting":
        lines.append("weights = 1.0 / groups.map(groups.value_counts(normalize=True))")
    elif intervention == "upsampling":
        lines.append("df = pd.concat([df, df[groups == 2].sample(frac=1.0, replace=True, random_state=0)])")
    elif intervention == "filtering":
        lines.append("df = df[df['label'] != 'non-neoplastic']")
    if components.get("per_group"):
        lines += [
            "for g in range(3):",
            "    m = val_groups == g",
            "    print(f'group_{g} AUC', roc_auc_score(y_val[m], p_val[m]))",
        ]
    if intervention == "pareto_selection":
        lines.append("best = max(candidates, key=lambda c: min(c.group_aucs))  # minimax over groups")
    if bug == "timeout":
        lines.append("for epoch in range(10_000):  # far too many epochs")
        lines.append("    train_one_epoch(model)")
    lines += [
        "print(f'Validation AUROC: {val_auc:.4f}')",
        "",
        "def predict(folder):",
        "    paths = sorted(Path(folder).glob('*'))",
        "    return {p.name: float(model.predict_proba(features(p))[0, 1]) for p in paths}",
        "",
        "if __name__ == '__main__':",
        "    main()",
    ]
    return "\n".join(lines) + "\n"


# The demo's held-out sets: (images, malignant) per skin-tone group (test: DDI's composition).
_DEMO_SPLITS = {480: ((200, 34), (170, 22), (110, 11)), 656: ((208, 49), (241, 74), (207, 48))}


def _metrics(rng: random.Random, base_auc: float, gap: float, n: int,
             intervals: bool = True) -> tuple[dict[str, Any], dict[str, float] | None]:
    """A demo node's summary and, with `intervals`, its predictions: measured for real on
    predictions drawn for the demo's held-out set (binormal scores per group, separated to hit the
    node's group AUCs), so the figures and intervals are what befair computes for such predictions."""
    g0 = round(min(0.99, base_auc + gap * 0.6), 4)
    g2 = round(max(0.5, g0 - gap), 4)
    g1 = round((g0 + g2) / 2 + rng.uniform(-0.01, 0.01), 4)
    aucs = {"group_0": g0, "group_1": g1, "group_2": g2}
    if intervals and n in _DEMO_SPLITS:
        return _measured(rng, aucs, n)
    worst, best = min(aucs.values()), max(aucs.values())
    return {
        "auc": round(base_auc, 4), "worst_auc": worst, "best_auc": best, "auc_gap": round(best - worst, 4),
        "group_auc": aucs, "group_auc_reason": {}, "n": n,
    }, None


def demo_labels(n: int) -> Any:
    """The demo's held-out labels (file, label, group) for a split of n images (480 or 656)."""
    import pandas as pd

    rows = [(g, int(i < positives)) for g, (size, positives) in zip(("group_0", "group_1", "group_2"),
                                                                     _DEMO_SPLITS[n], strict=True)
            for i in range(size)]
    return pd.DataFrame({"file": [f"img_{n}_{i:04d}.png" for i in range(len(rows))],
                         "label": [lab for _, lab in rows], "group": [g for g, _ in rows]})


def _measured(rng: random.Random, aucs: dict[str, float], n: int) -> tuple[dict[str, Any], dict[str, float]]:
    import numpy as np

    from engine.evaluation.metrics import compute_metrics

    labels = demo_labels(n)
    draw = np.random.default_rng(rng.randrange(2**32))
    scores = np.zeros(n)
    for group, target in aucs.items():
        idx = (labels["group"] == group).to_numpy()
        shift = 2 ** 0.5 * NormalDist().inv_cdf(min(max(target, 0.5), 0.995))  # AUC = Φ(shift / √2)
        raw = draw.normal(0.0, 1.0, int(idx.sum())) + shift * labels["label"].to_numpy()[idx]
        scores[idx] = 1 / (1 + np.exp(-(raw - shift / 2)))
    summary = compute_metrics(labels["label"].to_numpy(), scores, labels["group"].to_numpy(), intervals=True).summary()
    return summary, dict(zip(labels["file"], scores.tolist(), strict=True))


class _DemoComparer:
    """The runner's paired comparison (engine.evaluation.paired) on the demo's validation labels."""

    def __init__(self) -> None:
        from engine.evaluation.paired import Comparer

        self.kept: dict[int, dict[str, float]] = {}
        self.comparer = Comparer(demo_labels(480), self.kept.get)

    def record(self, emit: _Emit, state: SessionState, ts: float) -> None:
        from engine.evaluation.paired import changed

        payload = self.comparer.payload(state)
        if changed(state.comparisons.get("validation"), payload):
            emit(parse(ev.COMPARED, payload), ts=ts)


def _medfair(summary: dict[str, Any]) -> dict[str, Any]:
    return {
        "Overall AUC": summary["auc"], "worst_auc": summary["worst_auc"], "best_auc": summary["best_auc"],
        "auc_gap": summary["auc_gap"], **{f"auc_{g}": v for g, v in summary["group_auc"].items()},
    }


def _flags(components: dict[str, Any]) -> tuple[dict[str, bool], dict[str, str]]:
    iv = components.get("intervention")
    flags = {
        "reads_skin_tone": bool(iv),
        "per_group_metric": bool(components.get("per_group")),
        "reweighting": iv == "reweighting",
        "upsampling": iv == "upsampling",
        "filtering": iv == "filtering",
        "pareto_selection": iv == "pareto_selection",
    }
    evidence = {k: f"line {6 + i}: matched" for i, (k, v) in enumerate(flags.items()) if v}
    return flags, evidence


class _Clock:
    def __init__(self, t0: float):
        self.t = t0

    def __call__(self, dt: float = 0.25) -> float:
        self.t = round(self.t + dt, 3)
        return self.t


def write_demo_session(
    store: _Store,
    *,
    n_nodes: int = 12,
    seed: int = 0,
    ts0: float = 1_700_000_000.0,
    finished: bool = True,
    session_id: str | None = None,
    intervals: bool = True,
) -> str:
    """Write a realistic, deterministic recorded session into `store`; returns its id
    (default `demo-<seed>-<n_nodes>`, plus `-live` when not finished). `intervals`: measure
    each evaluation on drawn predictions, with its intervals and kept predictions (~0.1 s a node,
    composed once per process and arguments; benchmarks of very large sessions turn it off)."""
    if n_nodes < 1:
        raise ValueError("a demo session needs at least one node")
    session_id = session_id or f"demo-{seed}-{n_nodes}" + ("" if finished else "-live")
    recorded = _composed(n_nodes, seed, ts0, finished, intervals)
    start = recorded.events[0]
    writer = store.create_session(start.payload["config"], instruction=start.payload["instruction"],
                                  coder=start.payload["coder"], data=start.payload["data"], session_id=session_id,
                                  ts=start.ts)
    for event, predictions in zip(recorded.events[1:], recorded.predictions[1:], strict=True):
        writer.emit(parse(event.kind, copy.deepcopy(event.payload)), ts=event.ts, predictions=predictions)
    return session_id


@functools.lru_cache(maxsize=64)
def _composed(n_nodes: int, seed: int, ts0: float, finished: bool, intervals: bool) -> _MemoryWriter:
    """The demo's events, composed once (the session id is given when they are written)."""
    store = _MemoryStore()
    _compose(store, n_nodes=n_nodes, seed=seed, ts0=ts0, finished=finished, session_id="demo", intervals=intervals)
    return store.writers["demo"]


def _compose(store: _Store, *, n_nodes: int, seed: int, ts0: float, finished: bool, session_id: str,
             intervals: bool) -> str:
    rng = random.Random(seed)
    clock = _Clock(ts0)
    config = _demo_config(n_nodes, seed)
    writer = store.create_session(
        config,
        instruction=_instruction(),
        coder=dict(DEMO_CODER),
        data={"kind": "synth", "path": f"synthderm/seed-{seed}",
              "summary": {"train": 2400, "validation": 480, "test": 656}},
        session_id=session_id,
        ts=ts0,
    )
    emit = writer.emit
    state = writer.state
    comparer = _DemoComparer() if intervals else None
    command_id = 0
    guidance_id = 0

    def human(kind: str, payload: dict[str, Any]) -> None:
        nonlocal command_id
        command_id += 1
        emit(parse(kind, {**payload, "by": "demo-user", "command_id": command_id}), ts=clock(0.8))

    buggy_plan = {2: "KeyError", max(3, n_nodes - 3): "timeout"}
    num_drafts = min(5, n_nodes)
    for step in range(1, n_nodes + 1):
        last = step == n_nodes
        # -- human steering at fixed points ------------------------------------------------
        if step == 4:
            guidance_id += 1
            human(ev.GUIDANCE, {"guidance_id": guidance_id, "text": "reweight dark skin in the loss",
                                "scope": "global", "node_id": None})
        if step == 6:
            human(ev.PAUSED, {"reason": "looking at node 3's groups"})
            clock(42.0)
            human(ev.RESUMED, {})
        if step == 7 and 3 in state.nodes:
            guidance_id += 1
            human(ev.GUIDANCE, {"guidance_id": guidance_id, "text": "try colour normalisation",
                                "scope": "node", "node_id": 3})
            human(ev.EXPAND_REQUESTED, {"node_id": 3})
        if step == 9 and 2 in state.nodes:
            human(ev.PRUNED, {"node_id": 2})
        if step == 10:
            human(ev.BUDGET_SET, {"steps": n_nodes})

        # -- the policy's choice -------------------------------------------------------------
        forced, parent, stage, action, reason = _demo_policy(state, rng, step, num_drafts)
        emit(parse(ev.POLICY_DECISION, {"action": action, "node_id": parent, "reason": reason, "forced": forced}),
             ts=clock(0.05))
        components = _demo_components(state, rng, parent, stage)
        bug = buggy_plan.get(step) if stage != "debug" else None
        glob, node_g = state.guidance_in_force(parent)
        gids = [g.guidance_id for g in glob] + [g.guidance_id for g in node_g]

        tokens_in, tokens_out = 1800 + 37 * step, 600 + 11 * step
        emit(parse(ev.LLM_STREAM, {"role": stage if stage != "human" else "improve", "step": step,
                             "delta": f"(simulated) planning step {step}"}), ts=clock(0.2))
        emit(parse(ev.LLM_CALL, {"node_id": None, "role": stage if stage != "human" else "improve",
                           "model": "offline-grammar", "tokens_in": tokens_in, "tokens_out": tokens_out,
                           "latency_s": 0.4, "cost": 0.0, "ok": True, "error": None}), ts=clock(0.4))
        node_id = step
        plan = {
            "draft": f"Draft: {components['model']} with {components['preprocess']}.",
            "improve": f"Improve node {parent}: {components.get('intervention') or components['preprocess']}.",
            "debug": f"Debug node {parent}: fix the failing step.",
        }[stage]
        emit(parse(ev.NODE_CREATED, {"node_id": node_id, "parent_id": parent, "step": step, "stage": stage,
                               "plan": plan, "guidance_ids": gids, "components": components,
                               "origin": "agent"}), ts=clock(0.1))
        code = _code_for(components, bug)
        emit(parse(ev.CODE, {"node_id": node_id, "code": code}), ts=clock(0.05))
        emit(parse(ev.LLM_CALL, {"node_id": node_id, "role": "review", "model": "offline-grammar",
                           "tokens_in": 900, "tokens_out": 120, "latency_s": 0.2, "cost": 0.0,
                           "ok": True, "error": None}), ts=clock(0.2))
        emit(parse(ev.EXEC_STARTED, {"node_id": node_id, "workdir": f"runs/{session_id}/node-{node_id:03d}"}),
             ts=clock(0.1))
        lines = [f"epoch {e}: loss {0.7 - 0.05 * e + rng.uniform(-0.01, 0.01):.4f}\n" for e in range(1, 4)]
        for line in lines:
            emit(parse(ev.OUTPUT, {"node_id": node_id, "text": line, "stream": "stdout"}), ts=clock(rng.uniform(1, 4)))
        if last and not finished:
            return session_id

        _demo_outcome(emit, clock, rng, state, node_id=node_id, n_nodes=n_nodes, bug=bug,
                      components=components, lines=lines, intervals=intervals, comparer=comparer)

    choice = {}
    reasons = {}
    for criterion in selection.CRITERIA:
        best = selection.best(state, criterion)
        choice[f"by_{criterion}"] = best.node_id if best else None
        reasons[criterion] = f"highest {criterion} metric among ok nodes" if best else "no ok node"
    emit(parse(ev.POLICY_DECISION, {"action": "finish", "node_id": None, "reason": "step budget used",
                                    "forced": False}),
         ts=clock(0.1))
    emit(parse(ev.FINAL_CHOICE, {**choice, "reasons": reasons}), ts=clock(0.1))
    emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}), ts=clock(0.1))
    return session_id


def _demo_policy(state: SessionState, rng: random.Random, step: int,
                 num_drafts: int) -> tuple[bool, int | None, str, str, str]:
    """The demo policy's choice for a step: (forced, parent, stage, action, reason)."""
    forced = bool(state.pending_expand)
    buggy_leaves = [n for n in state.nodes.values() if n.status == "buggy" and not n.children
                    and not state.is_pruned(n.node_id) and state.debug_depth(n.node_id) < 3]
    parent: int | None
    if forced:
        parent = state.pending_expand[0]
        stage = "improve"
        action, reason = "expand", f"human asked to expand node {parent}"
    elif step <= num_drafts:
        parent, stage = None, "draft"
        action, reason = "draft", f"{step - 1} of {num_drafts} drafts so far"
    elif buggy_leaves and rng.random() < 0.5:
        parent, stage = buggy_leaves[0].node_id, "debug"
        action, reason = "debug", f"node {parent} is a buggy leaf (debug_prob 0.5)"
    else:
        best = selection.best(state, "validation")
        parent = best.node_id if best else None
        stage = "improve" if parent is not None else "draft"
        action = stage
        reason = f"greedy: node {parent} has the best validation AUC" if parent else "no good node yet"
    return forced, parent, stage, action, reason


def _demo_components(state: SessionState, rng: random.Random, parent: int | None, stage: str) -> dict[str, Any]:
    """Components: drafts sample, improve changes one, debug repairs."""
    if parent is None:
        return {"model": _MODELS[rng.randrange(len(_MODELS))],
                "preprocess": _PREPROCESS[rng.randrange(len(_PREPROCESS))],
                "intervention": None, "per_group": rng.random() < 0.5}
    components = dict(state.nodes[parent].components or {})
    if stage == "improve":
        guidance_text = " ".join(g.text for g in state.guidance.values())
        if "reweight" in guidance_text and components.get("intervention") != "reweighting":
            components["intervention"] = "reweighting"
        elif "colour" in guidance_text and components.get("preprocess") != "colour constancy":
            components["preprocess"] = "colour constancy"
        else:
            components["intervention"] = _INTERVENTIONS[rng.randrange(1, len(_INTERVENTIONS))]
        components["per_group"] = True
    return components


def _demo_outcome(emit: _Emit, clock: _Clock, rng: random.Random, state: SessionState, *, node_id: int,
                  n_nodes: int, bug: str | None, components: dict[str, Any], lines: list[str],
                  intervals: bool = True, comparer: _DemoComparer | None = None) -> None:
    """A demo node's end: how its run finished, its review, evaluation and audit."""
    step = node_id
    quality = 0.62 + 0.01 * step + rng.uniform(-0.02, 0.02)
    gap = max(0.03, 0.16 - (0.05 if components.get("intervention") else 0.0) - 0.004 * step
              + rng.uniform(-0.02, 0.02))
    if bug == "KeyError":
        err = ("Traceback (most recent call last):\n  File \"solution.py\", line 8, in <module>\n"
               "KeyError: 'malignant'\n")
        emit(parse(ev.OUTPUT, {"node_id": node_id, "text": err, "stream": "stderr"}), ts=clock(0.3))
        emit(parse(ev.EXEC_FINISHED, {"node_id": node_id, "status": "buggy", "exit_code": 1, "exec_time": 3.2,
                                "exc_type": "KeyError", "output_head": "".join(lines) + err,
                                "output_tail": "", "truncated": False}), ts=clock(0.1))
        emit(parse(ev.REVIEW, {"node_id": node_id, "is_bug": True, "summary": "KeyError: 'malignant'",
                         "claimed_metric": 0.81}), ts=clock(0.2))
        claimed, status = 0.81, "buggy"
    elif bug == "timeout":
        emit(parse(ev.EXEC_FINISHED, {"node_id": node_id, "status": "timeout", "exit_code": None,
                                "exec_time": 600.0, "exc_type": "TimeoutError",
                                "output_head": "".join(lines), "output_tail": "", "truncated": False}),
             ts=clock(5.0))
        emit(parse(ev.REVIEW, {"node_id": node_id, "is_bug": True, "summary": "timed out", "claimed_metric": None}),
             ts=clock(0.2))
        claimed, status = None, "timeout"
    else:
        claimed = round(quality + 0.05 + rng.uniform(0, 0.04), 4)
        if step == 3:  # the agent reports a number its code did not earn (AUC on training data)
            claimed = 0.9731
        if step == n_nodes and n_nodes >= 6:
            # a fair pipeline: slightly lower AUC, nearly no gap -> minimax picks it, validation does not
            top = max((n.val_auc for n in state.nodes.values() if n.val_auc is not None), default=quality)
            quality, gap = top - 0.006, 0.005
        final_line = f"Validation AUROC: {claimed:.4f}\n"
        emit(parse(ev.OUTPUT, {"node_id": node_id, "text": final_line, "stream": "stdout"}), ts=clock(0.5))
        exec_time = round(rng.uniform(8, 40), 2)
        emit(parse(ev.EXEC_FINISHED, {"node_id": node_id, "status": "ok", "exit_code": 0, "exec_time": exec_time,
                                "exc_type": None, "output_head": "".join(lines) + final_line,
                                "output_tail": "", "truncated": False}), ts=clock(0.1))
        emit(parse(ev.REVIEW, {"node_id": node_id, "is_bug": False, "summary": "trained and printed its AUROC",
                         "claimed_metric": claimed}), ts=clock(0.2))
        status = "ok"
    if status == "ok":
        val, val_preds = _metrics(rng, quality, gap, 480, intervals)
        test, test_preds = _metrics(rng, quality - 0.04, gap + 0.02, 656, intervals)
        emit(parse(ev.EVALUATED, {"node_id": node_id, "split": "validation", "ok": True, "verdict": "ok",
                            "reason": None, "summary": val, "medfair": _medfair(val), "blinded": False}),
             ts=clock(1.5), predictions=val_preds)
        emit(parse(ev.EVALUATED, {"node_id": node_id, "split": "test", "ok": True, "verdict": "ok",
                            "reason": None, "summary": test, "medfair": _medfair(test), "blinded": False}),
             ts=clock(1.5), predictions=test_preds)
        if val_preds is not None and comparer is not None:
            comparer.kept[node_id] = val_preds
        measured = val["auc"]
    else:
        measured = None
    flags, evidence = _flags(components)
    claim = {"claimed": claimed, "measured": measured,
             "difference": None if claimed is None or measured is None else round(claimed - measured, 4),
             "unsupported": claimed is not None and status != "ok",
             "reason": ("the run crashed before printing a metric"
                        if claimed is not None and status != "ok" else None)}
    emit(parse(ev.AUDITED, {"node_id": node_id, "flags": flags, "evidence": evidence, "claim": claim}), ts=clock(0.1))
    if comparer is not None and status == "ok":
        comparer.record(emit, state, clock(0.05))
    if bug == "KeyError":
        emit(parse(ev.ERROR, {"message": f"node {node_id} failed: KeyError", "node_id": node_id, "where": "execution"}),
             ts=clock(0.05))


def _instruction() -> str:
    from engine.task import LEVELS

    return LEVELS[DEMO_LEVEL]


def all_event_kinds_session(store: _Store, *, session_id: str = "all-kinds", ts0: float = 1_700_000_000.0) -> str:
    """The demo session plus the event kinds a normal run rarely shows (stop_requested,
    node_interrupted, session_resumed): every kind in events.KINDS appears at least once."""
    sid = write_demo_session(store, n_nodes=12, seed=1, ts0=ts0, finished=False, session_id=session_id)
    writer = store.writer(sid)
    t = writer.state.last_ts or ts0
    writer.emit(parse(ev.STOP_REQUESTED, {"by": "demo-user", "command_id": None, "interrupt": True}), ts=t + 1)
    writer.emit(parse(ev.NODE_INTERRUPTED, {"node_id": 12, "reason": "stopped by the user"}), ts=t + 2)
    writer.emit(parse(ev.SESSION_FINISHED, {"status": "stopped", "reason": "stopped by the user"}), ts=t + 3)
    writer.emit(parse(ev.SESSION_RESUMED, {"by": "demo-user", "interrupted": [12]}), ts=t + 10)
    writer.emit(parse(ev.POLICY_DECISION, {"action": "debug", "node_id": 2, "reason": "resumed", "forced": False}),
                ts=t + 11)
    writer.emit(parse(ev.NODE_CREATED, {"node_id": 13, "parent_id": 12, "step": 13, "stage": "human",
                                  "plan": "human-written fix", "guidance_ids": [], "components": None,
                                  "origin": "human"}), ts=t + 12)
    writer.emit(parse(ev.CODE, {"node_id": 13, "code": "print('Validation AUROC: 0.7')\n"}), ts=t + 13)
    writer.emit(parse(ev.CRITERION_SET, {"criterion": "minimax", "by": "demo-user", "command_id": None}), ts=t + 13.5)
    writer.emit(parse(ev.FEEDBACK_SET, {"feedback": "groups", "by": "demo-user", "command_id": None}), ts=t + 13.6)
    writer.emit(parse(ev.COMPARED, {"split": "validation", "method": "paired bootstrap", "by": {
        "minimax": {"leader": None, "statistic": "worst_auc", "ties": [], "differences": []}}}), ts=t + 13.7)
    writer.emit(parse(ev.FINAL_CHOICE, {"by_claimed": None, "by_validation": None, "by_minimax": None,
                                  "reasons": {}}), ts=t + 14)
    writer.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "done"}), ts=t + 15)
    return sid


class _MemoryWriter:
    """A SessionWriter look-alike that only folds and collects events (no database)."""

    def __init__(self, session_id: str):
        from engine.session.state import new_state

        self.session_id = session_id
        self.state = new_state(session_id)
        self.events: list[ev.Event] = []
        self.predictions: list[dict[str, float] | None] = []   # kept with each event (evaluated only)

    def emit(self, typed: TypedEvent, *, ts: float | None = None,
             predictions: dict[str, float] | None = None, **_: Any) -> ev.Event:
        from engine.session.state import apply

        event = ev.Event(seq=self.state.last_seq + 1, kind=typed.kind, payload=typed.to_payload(),
                         ts=float(ts if ts is not None else (self.state.last_ts or 0.0)), session_id=self.session_id)
        apply(self.state, event)
        self.events.append(event)
        self.predictions.append(predictions)
        return event


class _MemoryStore:
    def __init__(self) -> None:
        self.writers: dict[str, _MemoryWriter] = {}

    def create_session(self, config: dict[str, Any], *, instruction: str, coder: dict[str, Any],
                       data: dict[str, Any], session_id: str | None = None, ts: float | None = None,
                       **_: Any) -> _MemoryWriter:
        w = _MemoryWriter(session_id or "demo")
        self.writers[w.session_id] = w
        w.emit(parse(ev.SESSION_STARTED, {"config": config, "instruction": instruction, "coder": coder,
                                          "data": data}), ts=ts)
        return w

    def writer(self, session_id: str) -> _MemoryWriter:
        return self.writers[session_id]


def demo_events(**kwargs: Any) -> list[ev.Event]:
    """The events `write_demo_session(store, **kwargs)` would write, without a database
    (for benchmarks and reducer tests of large sessions)."""
    mem = _MemoryStore()
    sid = write_demo_session(mem, **kwargs)
    return mem.writers[sid].events
