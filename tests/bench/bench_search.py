"""Search quality, the product's purpose: does steering find fairer pipelines than an expert baseline?

On one SynthDerm workspace (default 1,000 training images, 656 test images, 96 px; env
BEFAIR_BENCH_SEARCH_TRAIN / _TEST / _SIZE), for each seed (BEFAIR_BENCH_SEARCH_SEEDS, default
0,1,2):

- a **steered** session: the base instruction level, the offline coder fitted to the CPU, and
  global guidance asking for group reweighting and minimax (worst-group) selection, given as a
  user gives it: a `guide` command queued before the first step, consumed by the runner's
  command handler (engine.agent.commands.guide), in force from the first draft;
- an **unsteered base-level** session: the same settings without guidance;
- the **MEDFAIR-dedup** baseline (baselines.pipeline.train_variant) on the same workspace with
  the same seed, in a CPU-sized configuration (ResNet-18, BEFAIR_BENCH_SEARCH_EPOCHS epochs,
  default 6, at 64 px; ImageNet weights only if cached, never downloaded).

Every session runs BEFAIR_BENCH_SEARCH_STEPS steps (default 20) in-process through the real
runner, sandbox and harness, with a BEFAIR_BENCH_STEP_TIMEOUT step limit (default 60 s).

What a session *reaches* is its own final choice by its own criterion (the session default,
highest measured validation AUC; the runner's recorded final choice, made on validation only),
scored on the held-out test split by the product's evaluator. A session beats the baseline on a
seed when its chosen node's test gap is lower than the baseline's and its test AUC is no lower.
The finding reproduces when the steered sessions beat it on at least 2 of 3 seeds and the base
sessions do not. The best test gap any node reached (among nodes at least as accurate as the
baseline) is reported as an oracle, for information only: it is chosen on test figures. Also for
information: the same count had the sessions chosen by minimax (`--best minimax`, also a
validation-only rule, recorded by the runner as by_minimax).
"""
from __future__ import annotations

import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

STEPS = int(os.environ.get("BEFAIR_BENCH_SEARCH_STEPS", "20"))
STEP_TIMEOUT = float(os.environ.get("BEFAIR_BENCH_STEP_TIMEOUT", "60"))
SEEDS = [int(s) for s in os.environ.get("BEFAIR_BENCH_SEARCH_SEEDS", "0,1,2").split(",") if s.strip()]
N_TRAIN = int(os.environ.get("BEFAIR_BENCH_SEARCH_TRAIN", "1000"))
N_TEST = int(os.environ.get("BEFAIR_BENCH_SEARCH_TEST", "656"))
IMAGE_PX = int(os.environ.get("BEFAIR_BENCH_SEARCH_SIZE", "96"))
BASELINE_EPOCHS = int(os.environ.get("BEFAIR_BENCH_SEARCH_EPOCHS", "6"))
BASELINE_PX = 64
LEVEL = "base"
GUIDANCE = ("Reweight the training loss by skin-tone group (inverse group frequency), and select the model by "
            "minimax: the best worst-group validation AUC.")
ARMS = ("steered", "base")
BASELINE = "MEDFAIR-dedup"


# --------------------------------------------------------------------------- judging (pure)


def beats(arm: dict[str, Any] | None, baseline: dict[str, Any]) -> bool:
    """The arm's figures {auc, gap} beat the baseline's: a lower test gap at a test AUC no lower.
    An arm that reached no measured node does not."""
    if not arm or arm.get("auc") is None or arm.get("gap") is None:
        return False
    return bool(arm["gap"] < baseline["gap"] and arm["auc"] >= baseline["auc"])


def majority(n: int) -> int:
    """Seeds needed to call the finding reproduced: two thirds, rounded up (2 of 3)."""
    return math.ceil(2 * n / 3)


def judge(per_seed: list[dict[str, Any]], suffix: str = "") -> dict[str, Any]:
    """per_seed: [{"seed", "baseline": {auc, gap}, "steered": {auc, gap} | None, "base": ...}].
    The wins of each arm (its figures under key arm + suffix) against the same seed's
    baseline, and the verdict."""
    n = len(per_seed)
    wins = {arm: sum(beats(s.get(arm + suffix), s["baseline"]) for s in per_seed) for arm in ARMS}
    need = majority(n)
    reproduced = n > 0 and wins["steered"] >= need and wins["base"] < need
    return {"seeds": n, "steered_wins": wins["steered"], "base_wins": wins["base"], "needed": need,
            "reproduced": reproduced, "strict": n > 0 and wins["steered"] == n and wins["base"] == 0}


def mean_std(values: list[float | None]) -> tuple[float | None, float | None]:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None
    return statistics.fmean(vals), (statistics.stdev(vals) if len(vals) > 1 else 0.0)


def oracle(nodes: list[dict[str, Any]], baseline: dict[str, Any]) -> dict[str, Any] | None:
    """The node with the lowest test gap among those with a test AUC no lower than the
    baseline's: chosen on test figures, so information only, never what a session reaches."""
    fit = [n for n in nodes if n.get("auc") is not None and n.get("gap") is not None and n["auc"] >= baseline["auc"]]
    return min(fit, key=lambda n: (n["gap"], -n["auc"], n["node_id"])) if fit else None


# --------------------------------------------------------------------------- measuring


def _workspace():
    from engine.data.workspace import synth_workspace

    return synth_workspace(n_train=N_TRAIN, n_test=N_TEST, size=IMAGE_PX)


def _figures(node) -> dict[str, Any]:
    test = node.test or {}
    return {"node_id": node.node_id, "auc": test.get("auc"), "gap": test.get("auc_gap"),
            "val_auc": node.val_auc, "val_gap": node.val_gap,
            "fairness": (node.components or {}).get("fairness"), "selection": (node.components or {}).get("selection"),
            "model": (node.components or {}).get("model")}


def _session(ws, seed: int, guidance: str | None) -> dict[str, Any]:
    from engine.agent.offline import OfflineCoder
    from engine.agent.runner import run, start_session
    from engine.config import SessionConfig
    from engine.session.store import SessionStore
    from engine.session.views import best_choice

    config = SessionConfig(level=LEVEL, steps=STEPS, seed=seed, data=str(ws.root), step_timeout=STEP_TIMEOUT,
                           extra={"device": "cpu"})
    coder = OfflineCoder(failure_rate=config.failure_rate, seed=seed, device="cpu", step_timeout=STEP_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="befair-bench-search-") as tmp:
        store = SessionStore(Path(tmp) / "session.db")
        writer = start_session(store, config, workspace=ws, coder=coder)
        if guidance:  # as `befair steer SESSION guide TEXT` queues it; the runner consumes it before step 1
            store.issue_command(writer.session_id, "guide", {"text": guidance, "scope": "global"}, by="bench")
        started = time.perf_counter()
        state = run(store, writer.session_id, coder=coder, workspace=ws, writer=writer)
        elapsed = time.perf_counter() - started
        store.close()
    choice = best_choice(state)
    nodes = [_figures(n) for n in sorted(state.nodes.values(), key=lambda n: n.node_id) if n.status == "ok"]
    minimax = (state.final_choice or {}).get("by_minimax")
    chosen = _figures(state.nodes[choice.node_id]) if choice.node_id is not None else None
    return {"seed": seed, "elapsed": elapsed, "criterion": choice.criterion, "chosen": chosen,
            "reason": choice.reason, "nodes": nodes, "n_nodes": len(state.nodes),
            "timeouts": sum(n.status == "timeout" for n in state.nodes.values()),
            "guided_nodes": sum(bool(n.guidance_ids) for n in state.nodes.values()),
            "minimax_choice": _figures(state.nodes[minimax]) if isinstance(minimax, int) else None}


def _baselines(ws) -> tuple[list[dict[str, Any]], float]:
    from baselines.pipeline import TrainConfig, train_variant

    config = TrainConfig(epochs=BASELINE_EPOCHS, size=BASELINE_PX, batch_size=64, device="cpu", threads=2)
    started = time.perf_counter()
    rows = train_variant("medfair-dedup", None, SEEDS, config, workspace=ws, log=lambda s: print(s, flush=True))
    return rows, time.perf_counter() - started


# --------------------------------------------------------------------------- rows


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def _arm_rows(label: str, name: str, figures: list[dict[str, Any] | None],
              baseline: tuple[float | None, float | None] | None, note: str) -> list[dict[str, Any]]:
    rows = []
    for key, unit in (("auc", "test AUC"), ("gap", "test AUC gap")):
        values = [f.get(key) if f else None for f in figures]
        mean, std = mean_std(values)
        row: dict[str, Any] = {"name": f"search quality: {label}, {unit}", "value": mean, "unit": unit, "std": std,
                               "per_seed": values, "arm": name, "note": f"mean ± std over seeds: {_fmt(mean)} ± "
                                                                       f"{_fmt(std)}; {note}"}
        ref = baseline[0 if key == "auc" else 1] if baseline else None
        if ref and mean is not None:
            row["reference"] = f"{BASELINE} (CPU config), mean over the same seeds"
            row["ratio"] = mean / ref
        rows.append(row)
    return rows


def _per_seed(sessions: dict[str, list[dict[str, Any]]], base_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, seed in enumerate(SEEDS):
        baseline = {"auc": base_rows[i]["test_auc"], "gap": base_rows[i]["test_gap"]}
        entry: dict[str, Any] = {"seed": seed, "baseline": baseline}
        for arm in ARMS:
            s = sessions[arm][i]
            entry[arm] = s["chosen"]
            entry[f"{arm}_oracle"] = oracle(s["nodes"], baseline)
            entry[f"{arm}_minimax_choice"] = s["minimax_choice"]
        out.append(entry)
    return out


def _summary_line(entry: dict[str, Any]) -> str:
    parts = [f"seed {entry['seed']}: {BASELINE} {_fmt(entry['baseline']['auc'])}/{_fmt(entry['baseline']['gap'])}"]
    for arm in ARMS:
        f = entry[arm] or {}
        mark = "beats" if beats(entry[arm], entry["baseline"]) else "not"
        parts.append(f"{arm} node {f.get('node_id')} {_fmt(f.get('auc'))}/{_fmt(f.get('gap'))} ({mark})")
    return "; ".join(parts)


def run() -> list[dict[str, Any]]:
    started = time.perf_counter()
    ws = _workspace()
    base_rows, base_wall = _baselines(ws)
    sessions: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for seed in SEEDS:
        for arm in ARMS:
            s = _session(ws, seed, GUIDANCE if arm == "steered" else None)
            print(f"  {arm} seed {seed}: {s['n_nodes']} nodes in {s['elapsed']:.0f} s, chose "
                  f"{s['chosen']} ({s['reason']})", flush=True)
            sessions[arm].append(s)
    per_seed = _per_seed(sessions, base_rows)
    verdict = judge(per_seed)
    verdict["by_minimax"] = judge(per_seed, "_minimax_choice")
    return _rows(per_seed, verdict, sessions, base_rows, base_wall, time.perf_counter() - started)


def _rows(per_seed, verdict, sessions, base_rows, base_wall: float, total: float) -> list[dict[str, Any]]:
    data = f"SynthDerm {N_TRAIN} training / {N_TEST} test images at {IMAGE_PX} px"
    b_auc, _ = mean_std([r["test_auc"] for r in base_rows])
    b_gap, _ = mean_std([r["test_gap"] for r in base_rows])
    session_note = (f"{STEPS}-step sessions, base level, offline coder fitted to CPU, step limit {STEP_TIMEOUT:g} s; "
                    f"the session's own final choice (validation AUC); {data}")
    rows = _arm_rows("steered (base level + reweighting/minimax guidance)", "steered",
                     [s["steered"] for s in per_seed], (b_auc, b_gap),
                     f"guidance \"{GUIDANCE}\" queued as a guide command before step 1; {session_note}")
    rows += _arm_rows("unsteered base level", "base", [s["base"] for s in per_seed], (b_auc, b_gap), session_note)
    weights = "random init" if str(base_rows[0]["weights"]).startswith("random") else "ImageNet weights"
    rows += _arm_rows(f"{BASELINE} baseline", "baseline",
                      [{"auc": r["test_auc"], "gap": r["test_gap"]} for r in base_rows], None,
                      f"ResNet-18 ({weights}), at most {BASELINE_EPOCHS} epochs at "
                      f"{BASELINE_PX} px on CPU (the study's: 30 at 224 on a GPU), patience 5, epoch kept by "
                      f"minimax Pareto on validation; {base_wall:.0f} s for {len(base_rows)} seeds; {data}")
    rows.append(_headline(per_seed, verdict, sessions, total))
    rows.append(_oracle_row(per_seed))
    return rows


def _headline(per_seed, verdict, sessions, total: float) -> dict[str, Any]:
    n = verdict["seeds"]
    said = "reproduced" if verdict["reproduced"] else "NOT reproduced"
    elapsed = {arm: [round(s["elapsed"]) for s in sessions[arm]] for arm in ARMS}
    return {"name": f"search quality: seeds where the steered session beats {BASELINE} (lower test gap, AUC no worse)",
            "value": verdict["steered_wins"], "unit": f"seeds of {n}", "base_wins": verdict["base_wins"],
            "reproduced": verdict["reproduced"], "strict": verdict["strict"], "per_seed": per_seed,
            "if_chosen_by_minimax": {k: verdict["by_minimax"][k] for k in ("steered_wins", "base_wins", "reproduced")},
            "timeouts": {arm: [s["timeouts"] for s in sessions[arm]] for arm in ARMS},
            "session_s": elapsed, "total_s": round(total),
            "note": f"finding {said}: steered {verdict['steered_wins']}/{n}, unsteered base {verdict['base_wins']}/{n} "
                    f"(needs steered >= {verdict['needed']} and base < {verdict['needed']}); "
                    + " | ".join(_summary_line(e) for e in per_seed)
                    + f" | for information, had both chosen by minimax (--best minimax): steered "
                      f"{verdict['by_minimax']['steered_wins']}/{n}, base {verdict['by_minimax']['base_wins']}/{n}"}


def _oracle_row(per_seed) -> dict[str, Any]:
    gaps = {arm: [(e[f"{arm}_oracle"] or {}).get("gap") for e in per_seed] for arm in ARMS}
    wins = {arm: sum(e[f"{arm}_oracle"] is not None and e[f"{arm}_oracle"]["gap"] < e["baseline"]["gap"]
                     for e in per_seed) for arm in ARMS}
    mean, _ = mean_std(gaps["steered"])
    return {"name": "search quality oracle (chosen on TEST, information only): lowest test gap of a steered node "
                    f"at AUC >= {BASELINE}",
            "value": mean, "unit": "test AUC gap", "per_seed": gaps, "oracle_wins": wins,
            "note": f"not what a session reaches; any node at test AUC >= the seed's baseline beating its gap: "
                    f"steered {wins['steered']}/{len(per_seed)}, base {wins['base']}/{len(per_seed)}; base oracle "
                    f"gaps {[_fmt(g) for g in gaps['base']]}"}


if __name__ == "__main__":
    for r in run():
        print(r)
