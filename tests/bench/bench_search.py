"""Search quality, the product's purpose: what does a person's steering change, measured against a
clean control, and does any arm beat an expert baseline?

On one SynthDerm workspace (default 1,000 training images, 656 test images, 96 px; env
BEFAIR_BENCH_SEARCH_TRAIN / _TEST / _SIZE), for each seed (BEFAIR_BENCH_SEARCH_SEEDS, default
0,1,2), three arms on the same seed, each a base-level session with the offline coder fitted to
the CPU:

- **clean**: unsteered, with the defaults every level gets (the agent is shown the measured AUC;
  ★ and the search follow validation AUC);
- **feedback**: unsteered, with the tool's fairness feedback on (the agent is shown each skin-tone
  group's AUC and the gap; ★ and the search follow the worst group's AUC at the low end of its
  interval, `robust`): the settings befair used by default before a level became its instruction
  alone;
- **steered**: the clean settings, and guidance a dermatologist would write, in words about the
  clinical goal, not code (GUIDANCE), given as a user gives it: a `guide` command queued before
  the first step.

The offline coder is deterministic for a seed, so the arms share every step until their settings
or the guidance make them differ (what the record-and-replay proxy does for an LLM coder). Its
response to guidance is programmed (engine.coders.offline.clinical): this bench measures the
protocol and the tool's control, not whether people's words make pipelines fairer.

Each arm's final choice (by its own session's criterion, on validation only) is scored on the
held-out test split. Reported per arm: test AUC and test gap, mean with a 95 % t-interval over
seeds; for steered against each unsteered arm: the per-seed paired bootstrap interval of the gap
difference on the same test images, the mean difference over seeds with its t-interval (told
apart when it excludes 0), and how many seeds a .05 difference in the gap would need at 80 % power
from the spread of the per-seed differences measured here.

Beside it, as before, the **MEDFAIR-dedup** baseline (baselines.pipeline.train_variant) on the
same workspace with the same seed, in a CPU-sized configuration (ResNet-18,
BEFAIR_BENCH_SEARCH_EPOCHS epochs, default 6, at 64 px; ImageNet weights only if cached), and the
verdict whether the steered arm beats it on at least 2 of 3 seeds and the clean arm does not
(point estimates, and told apart by a paired bootstrap on the same test images). The best test gap
any node reached is reported as an oracle, for information only: it is chosen on test figures.

Every session runs BEFAIR_BENCH_SEARCH_STEPS steps (default 20) in-process through the real
runner, sandbox and harness, with a BEFAIR_BENCH_STEP_TIMEOUT step limit (default 60 s).
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
GUIDANCE = ("It has to work as well on dark skin as on light skin: check each skin tone separately and don't "
            "accept a model that misses more melanomas on dark skin.")
ARMS = ("clean", "feedback", "steered")
ARM_SETTINGS: dict[str, dict[str, str]] = {"clean": {}, "feedback": {"feedback": "groups", "best": "robust"},
                                           "steered": {}}
UNSTEERED = ("clean", "feedback")
BASELINE = "MEDFAIR-dedup"
JUDGED = ("validation", "robust", "minimax")  # the session default first; claimed (an agent's claim) is not judged
EFFECT = 0.05          # the gap difference a study would want to detect
POWER = 0.8
REPLAY_TOLERANCE = 1e-6  # the baseline's replayed test AUC/gap vs its recorded ones

# --------------------------------------------------------------------------- judging (pure)


def beats(arm: dict[str, Any] | None, baseline: dict[str, Any]) -> bool:
    """The arm's figures {auc, gap} beat the baseline's: a lower test gap at a test AUC no lower.
    An arm that reached no measured node does not."""
    if not arm or arm.get("auc") is None or arm.get("gap") is None:
        return False
    return bool(arm["gap"] < baseline["gap"] and arm["auc"] >= baseline["auc"])


def direction(ci: list[float] | tuple[float, float] | None) -> str | None:
    """Where the 95 % interval of a difference (node − baseline) lies: "lower" (all below 0),
    "higher" (all above 0) or "tied" (it holds 0: cannot be told apart); None without one."""
    if not ci or len(ci) != 2 or ci[0] is None or ci[1] is None:
        return None
    if ci[1] < 0:
        return "lower"
    if ci[0] > 0:
        return "higher"
    return "tied"


def beats_told_apart(arm: dict[str, Any] | None) -> bool:
    """The arm's test gap is told apart lower than the baseline's (paired interval of the gap
    difference below 0) and its test AUC is not told apart lower (the AUC difference's interval
    does not lie below 0)."""
    if not arm:
        return False
    return direction(arm.get("gap_diff_ci")) == "lower" and direction(arm.get("auc_diff_ci")) in ("tied", "higher")


def overlap(a: list[float] | None, b: list[float] | None) -> bool | None:
    """Do two intervals overlap (the unpaired, conservative check)? None when one is missing."""
    if not a or not b or None in (*a, *b):
        return None
    return bool(a[0] <= b[1] and b[0] <= a[1])


def majority(n: int) -> int:
    """Seeds needed to call the finding reproduced: two thirds, rounded up (2 of 3)."""
    return math.ceil(2 * n / 3)


def judge(per_seed: list[dict[str, Any]], criterion: str) -> dict[str, Any]:
    """per_seed: [{"seed", "baseline": {auc, gap}, "steered_<criterion>": {auc, gap, auc_diff_ci,
    gap_diff_ci} | None, "clean_<criterion>": ..., "feedback_<criterion>": ...}]. Each arm's wins
    against the same seed's baseline when chosen by `criterion`: by point estimates and told apart;
    the verdicts (steered against the clean control)."""
    n = len(per_seed)
    chosen = {arm: [s.get(f"{arm}_{criterion}") for s in per_seed] for arm in ARMS}
    wins = {arm: sum(beats(c, s["baseline"]) for c, s in zip(chosen[arm], per_seed, strict=True)) for arm in ARMS}
    sure = {arm: sum(beats_told_apart(c) for c in chosen[arm]) for arm in ARMS}
    gap_vs = {arm: {d: sum(direction((c or {}).get("gap_diff_ci")) == d for c in chosen[arm])
                    for d in ("lower", "tied", "higher")} for arm in ARMS}
    need = majority(n)
    return {"criterion": criterion, "seeds": n, "steered_wins": wins["steered"], "clean_wins": wins["clean"],
            "feedback_wins": wins["feedback"],
            "needed": need, "reproduced": n > 0 and wins["steered"] >= need and wins["clean"] < need,
            "strict": n > 0 and wins["steered"] == n and wins["clean"] == 0,
            "steered_wins_told_apart": sure["steered"], "clean_wins_told_apart": sure["clean"],
            "reproduced_told_apart": n > 0 and sure["steered"] >= need and sure["clean"] < need,
            "gap_vs_baseline": gap_vs}


def runners_up(chosen_id: int | None, ties: list[int] | tuple[int, ...] | None,
               test_gaps: dict[int, float | None]) -> dict[str, Any]:
    """Could the chosen node be told apart from the other nodes on validation? `ties`: the nodes
    the final choice could not tell apart from it (None: nothing was compared). With the test
    gaps of the chosen node and those it could not be told apart from."""
    if chosen_id is None or ties is None:
        return {"ties": None, "told_apart": None, "tied_test_gaps": None}
    others = sorted(set(int(t) for t in ties) - {chosen_id})
    gaps = {n: test_gaps.get(n) for n in [chosen_id, *others]}
    return {"ties": others, "told_apart": not others, "tied_test_gaps": gaps}


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


def paired_difference(node_scores, baseline_scores, labels, groups) -> dict[str, list[float] | None]:
    """95 % intervals of node − baseline (test AUC and test gap), both scored on the same images
    under the same stratified bootstrap resamples (engine.measures.uncertainty)."""
    import numpy as np

    from engine.measures.uncertainty import Strata, difference, replicates, shared_counts
    from engine.task import GROUPS

    names = [g for g in GROUPS if g in set(map(str, groups))] + sorted(set(map(str, groups)) - set(GROUPS))
    strata = Strata.of(labels, groups, names)
    counts = shared_counts(strata)
    a = replicates(np.asarray(node_scores, dtype=float), strata, counts)
    b = replicates(np.asarray(baseline_scores, dtype=float), strata, counts)

    def rounded(ci):
        return None if ci is None else [round(ci[0], 6), round(ci[1], 6)]

    return {"auc_diff_ci": rounded(difference(a, b, "auc")), "gap_diff_ci": rounded(difference(a, b, "auc_gap"))}


def t_interval(values: list[float | None]) -> dict[str, Any]:
    """Mean over seeds with its 95 % t-interval (n - 1 degrees of freedom); no interval under 2 seeds."""
    from scipy import stats

    vals = [float(v) for v in values if v is not None]
    mean, std = mean_std(vals)
    if len(vals) < 2 or mean is None or std is None:   # one seed has no spread
        return {"mean": mean, "std": None, "n": len(vals), "ci95": None}
    half = float(stats.t.ppf(0.975, len(vals) - 1)) * std / math.sqrt(len(vals))
    return {"mean": mean, "std": std, "n": len(vals), "ci95": [mean - half, mean + half]}


def seeds_needed(std: float | None, effect: float = EFFECT, power: float = POWER) -> int | None:
    """Seeds (pairs) for a paired t-test at 5 % to detect a mean difference of `effect` with `power`,
    given the standard deviation of the per-seed differences: the smallest n whose noncentral t
    power reaches it (None without a spread)."""
    from scipy import stats

    if std is None or not math.isfinite(std):
        return None
    if std == 0:
        return 2
    for n in range(2, 100_000):
        df, shift = n - 1, effect / (std / math.sqrt(n))
        crit = float(stats.t.ppf(0.975, df))
        reached = float(stats.nct.sf(crit, df, shift) + stats.nct.cdf(-crit, df, shift))
        if reached >= power:
            return n
    return None


def arm_versus(a: list[float | None], b: list[float | None]) -> dict[str, Any]:
    """Arm a minus arm b over the seeds both measured: the per-seed differences, their mean with a
    95 % t-interval, whether the interval excludes 0 (told apart), and the seeds a difference of
    EFFECT would need at POWER from this spread."""
    diffs = [x - y for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    summary = t_interval(list(diffs))
    ci = summary["ci95"]
    return {"diffs": diffs, **summary, "told_apart": None if ci is None else bool(ci[0] > 0 or ci[1] < 0),
            "seeds_for_effect": seeds_needed(summary["std"])}


# --------------------------------------------------------------------------- measuring


def _workspace():
    from engine.data.agent_workspace import synth_workspace

    return synth_workspace(n_train=N_TRAIN, n_test=N_TEST, size=IMAGE_PX)


def _test_set(ws) -> tuple[list[str], Any, Any]:
    """The test split's (files, labels, groups), as the evaluator reads them."""
    from engine.evaluation.evaluator import heldout_splits
    from engine.evaluation.heldout import load_labels

    frame = load_labels(heldout_splits(ws)["test"][1])
    return frame["file"].astype(str).tolist(), frame["label"].to_numpy(), frame["group"].astype(str).to_numpy()


def _figures(node) -> dict[str, Any]:
    from engine.session.figure_text import interval

    test, val = node.test, node.validation
    return {"node_id": node.node_id, "auc": test and test.auc, "auc_ci": interval(test, "auc"),
            "gap": test and test.auc_gap, "gap_ci": interval(test, "auc_gap"),
            "worst": test and test.worst_auc, "worst_ci": interval(test, "worst_auc"),
            "val_auc": val and val.auc, "val_auc_ci": interval(val, "auc"), "val_gap": val and val.auc_gap,
            "val_gap_ci": interval(val, "auc_gap"), "val_worst": val and val.worst_auc,
            "val_worst_ci": interval(val, "worst_auc"),
            "fairness": (node.components or {}).get("fairness"), "selection": (node.components or {}).get("selection"),
            "model": (node.components or {}).get("model")}


def _session(ws, seed: int, arm: str) -> dict[str, Any]:
    from engine.agent.runner import run
    from engine.agent.session_config import SessionConfig
    from engine.agent.session_setup import start_session
    from engine.coders.offline import OfflineCoder
    from engine.session.store import SessionStore
    from engine.session.views import best_choice, session_criterion

    guidance = GUIDANCE if arm == "steered" else None
    config = SessionConfig(level=LEVEL, steps=STEPS, seed=seed, data=str(ws.root), step_timeout=STEP_TIMEOUT,
                           extra={"device": "cpu"}, **ARM_SETTINGS[arm])  # type: ignore[arg-type]
    coder = OfflineCoder(failure_rate=config.failure_rate, seed=seed, device="cpu", step_timeout=STEP_TIMEOUT)
    with tempfile.TemporaryDirectory(prefix="befair-bench-search-") as tmp:
        store = SessionStore(Path(tmp) / "session.db")
        writer = start_session(store, config, workspace=ws, coder=coder)
        if guidance:  # as `befair steer SESSION guide TEXT` queues it; the runner consumes it before step 1
            store.issue_command(writer.session_id, "guide", {"text": guidance, "scope": "global"}, by="bench")
        started = time.perf_counter()
        state = run(store, writer.session_id, coder=coder, workspace=ws, writer=writer)
        elapsed = time.perf_counter() - started
        picks = {c: best_choice(state, c) for c in JUDGED}
        predictions = {p.node_id: store.predictions(writer.session_id, p.node_id, "test", unblind=True)
                       for p in picks.values() if p.node_id is not None}
        store.close()
    nodes = [_figures(n) for n in sorted(state.nodes.values(), key=lambda n: n.node_id) if n.status == "ok"]
    gaps = {n["node_id"]: n["gap"] for n in nodes}
    choices = {}
    for c, pick in picks.items():
        chosen = _figures(state.nodes[pick.node_id]) if pick.node_id is not None else None
        choices[c] = {"chosen": chosen, "reason": pick.reason, "recorded": pick.recorded,
                      "uncertainty": pick.uncertainty, **runners_up(pick.node_id, pick.ties, gaps)}
    return {"seed": seed, "arm": arm, "elapsed": elapsed, "criterion": session_criterion(state), "choices": choices,
            "own": choices[session_criterion(state)]["chosen"], "feedback": state.config.get("feedback"),
            "test_predictions": predictions, "nodes": nodes, "n_nodes": len(state.nodes),
            "timeouts": sum(n.status == "timeout" for n in state.nodes.values()),
            "guided_nodes": sum(bool(n.guidance_ids) for n in state.nodes.values()),
            "compared": bool(state.comparisons.get("validation"))}


def _baselines(ws, checkpoint_dir: str) -> tuple[list[dict[str, Any]], float, Any]:
    from baselines.pipeline import TrainConfig, train_variant

    config = TrainConfig(epochs=BASELINE_EPOCHS, size=BASELINE_PX, batch_size=64, device="cpu", threads=2)
    started = time.perf_counter()
    rows = train_variant("medfair-dedup", None, SEEDS, config, workspace=ws, checkpoint_dir=checkpoint_dir,
                         log=lambda s: print(s, flush=True))
    return rows, time.perf_counter() - started, config


def _baseline_predictions(ws, rows: list[dict[str, Any]], config) -> list[dict[str, Any]]:
    """Each baseline run's test predictions, replayed from its checkpoint (the epoch it kept), with
    how far the replay's AUC and gap are from the figures the run recorded."""
    import torch

    from baselines import core
    from baselines.pipeline import load_data
    from baselines.tensor_cache import load_store
    from engine.evaluation.metrics import compute_metrics

    data = load_data("medfair-dedup", None, ws, log=lambda s: None)
    assert data.test is not None
    images = load_store(data.test.paths, config.resize, cache=config.cache)
    out = []
    for row in rows:
        model, _ = core.build_model("random")
        model.load_state_dict(torch.load(row["checkpoint"], map_location="cpu", weights_only=True)["model"])
        scores = core.predict_scores(model, images, size=config.size, batch_size=config.eval_batch_size,
                                     device=torch.device("cpu"))
        replay = compute_metrics(data.test.labels, scores, data.test.groups)
        off = max(abs(replay.auc - row["test_auc"]), abs(replay.auc_gap - row["test_gap"]))
        out.append({"scores": dict(zip(data.test.names, scores.tolist(), strict=True)), "replay_off": off})
    return out


def _baseline_figures(row: dict[str, Any], replay_off: float) -> dict[str, Any]:
    from engine.measures.summary import EvaluationSummary
    from engine.session.figure_text import interval

    test = EvaluationSummary.from_payload(row.get("test_metrics") or {})
    val = EvaluationSummary.from_payload(row.get("val_metrics") or {})
    return {"auc": row["test_auc"], "auc_ci": interval(test, "auc"), "gap": row["test_gap"],
            "gap_ci": interval(test, "auc_gap"), "worst": row["test_worst"], "worst_ci": interval(test, "worst_auc"),
            "val_auc": row["val_auc"], "val_gap": row["val_gap"], "val_gap_ci": interval(val, "auc_gap"),
            "val_worst_ci": interval(val, "worst_auc"), "epoch": row["selected_epoch"],
            "replay_off": replay_off}


# --------------------------------------------------------------------------- rows


def _fmt(v: float | None) -> str:
    return "—" if v is None else f"{v:.3f}"


def _fmt_ci(v: float | None, ci: list[float] | None) -> str:
    return _fmt(v) + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " [no interval]")


def _arm_label(arm: str) -> str:
    return {"steered": "steered (base level, clean settings + a dermatologist's guidance)",
            "clean": "unsteered base level, clean settings (agent shown AUC, search follows validation AUC)",
            "feedback": "unsteered base level, fairness feedback on (agent shown group AUCs and gap, search "
                        "follows robust worst group)",
            "baseline": f"{BASELINE} baseline"}[arm]


def _arm_rows(arm: str, criterion: str | None, figures: list[dict[str, Any] | None],
              baseline: tuple[float | None, float | None] | None, note: str) -> list[dict[str, Any]]:
    rows = []
    chosen_by = f", chosen by {criterion}" if criterion else ""
    for key, unit in (("auc", "test AUC"), ("gap", "test AUC gap")):
        values = [f.get(key) if f else None for f in figures]
        intervals = [f.get(f"{key}_ci") if f else None for f in figures]
        mean, std = mean_std(values)
        row: dict[str, Any] = {
            "name": f"search quality: {_arm_label(arm)}{chosen_by}, {unit}", "value": mean, "unit": unit,
            "std": std, "per_seed": values, "per_seed_ci95": intervals, "arm": arm, "criterion": criterion,
            "per_seed_node": [f.get("node_id") if f else None for f in figures],
            "note": f"mean ± std over seeds: {_fmt(mean)} ± {_fmt(std)}; per seed with its 95 % interval: "
                    + ", ".join(_fmt_ci(v, ci) for v, ci in zip(values, intervals, strict=True)) + f"; {note}"}
        ref = baseline[0 if key == "auc" else 1] if baseline else None
        if ref and mean is not None:
            row["reference"] = f"{BASELINE} (CPU config), mean over the same seeds"
            row["ratio"] = mean / ref
        rows.append(row)
    return rows


def _per_seed(sessions: dict[str, list[dict[str, Any]]], base_rows: list[dict[str, Any]],
              replays: list[dict[str, Any]], test_set) -> list[dict[str, Any]]:
    files, labels, groups = test_set
    out = []
    for i, seed in enumerate(SEEDS):
        baseline = _baseline_figures(base_rows[i], replays[i]["replay_off"])
        base_scores = [replays[i]["scores"][f] for f in files]
        entry: dict[str, Any] = {"seed": seed, "baseline": baseline}
        for arm in ARMS:
            s = sessions[arm][i]
            for c in JUDGED:
                pick = s["choices"][c]
                chosen = pick["chosen"]
                if chosen is not None:
                    preds = s["test_predictions"].get(chosen["node_id"]) or {}
                    paired = (paired_difference([preds[f] for f in files], base_scores, labels, groups)
                              if all(f in preds for f in files) else {"auc_diff_ci": None, "gap_diff_ci": None})
                    chosen = {**chosen, **paired, "gap_ci_overlap": overlap(chosen["gap_ci"], baseline["gap_ci"]),
                              **{k: pick[k] for k in ("ties", "told_apart", "tied_test_gaps")}}
                entry[f"{arm}_{c}"] = chosen
            entry[f"{arm}_oracle"] = oracle(s["nodes"], baseline)
        out.append(entry)
    return out


def _summary_line(entry: dict[str, Any], criterion: str) -> str:
    b = entry["baseline"]
    parts = [f"seed {entry['seed']}: {BASELINE} {_fmt_ci(b['auc'], b['auc_ci'])} / "
             f"gap {_fmt_ci(b['gap'], b['gap_ci'])}"]
    for arm in ARMS:
        f = entry[f"{arm}_{criterion}"]
        if not f:
            parts.append(f"{arm}: no node")
            continue
        mark = "beats" if beats(f, b) else "not"
        sure = direction(f.get("gap_diff_ci")) or "no paired interval"
        ties = ("not compared" if f["ties"] is None else "told apart on validation" if not f["ties"]
                else f"ties on validation with nodes {f['ties']}")
        parts.append(f"{arm} node {f['node_id']} {_fmt_ci(f['auc'], f['auc_ci'])} / "
                     f"gap {_fmt_ci(f['gap'], f['gap_ci'])} ({mark}; gap vs baseline, paired: {sure} "
                     f"{f.get('gap_diff_ci')}; {ties})")
    return "; ".join(parts)


def run() -> list[dict[str, Any]]:
    started, load_start = time.perf_counter(), os.getloadavg()
    ws = _workspace()
    test_set = _test_set(ws)
    with tempfile.TemporaryDirectory(prefix="befair-bench-search-ckpt-") as ckpt:
        base_rows, base_wall, config = _baselines(ws, ckpt)
        replays = _baseline_predictions(ws, base_rows, config)
    print(f"  baseline replayed from checkpoints: largest |AUC or gap - recorded| = "
          f"{max(r['replay_off'] for r in replays):.2g}", flush=True)
    sessions: dict[str, list[dict[str, Any]]] = {arm: [] for arm in ARMS}
    for seed in SEEDS:
        for arm in ARMS:
            s = _session(ws, seed, arm)
            picks = {c: (s["choices"][c]["chosen"] or {}).get("node_id") for c in JUDGED}
            print(f"  {arm} seed {seed}: {s['n_nodes']} nodes in {s['elapsed']:.0f} s, chose {picks} "
                  f"(session criterion {s['criterion']})", flush=True)
            sessions[arm].append(s)
    per_seed = _per_seed(sessions, base_rows, replays, test_set)
    verdicts = {c: judge(per_seed, c) for c in JUDGED}
    load = {"start": [round(x, 2) for x in load_start], "end": [round(x, 2) for x in os.getloadavg()]}
    return (three_arm_rows(sessions, test_set)
            + _rows(per_seed, verdicts, sessions, base_rows, base_wall, time.perf_counter() - started, load))


def _own_paired(sessions: dict[str, list[dict[str, Any]]], arm: str, other: str, i: int,
                test_set) -> list[float] | None:
    """Seed i: the paired bootstrap interval of the test gap, arm's own choice minus other's, on the same images."""
    files, labels, groups = test_set
    a, b = sessions[arm][i], sessions[other][i]
    if not a["own"] or not b["own"]:
        return None
    pa, pb = (s["test_predictions"].get(s["own"]["node_id"]) or {} for s in (a, b))
    if not all(f in pa and f in pb for f in files):
        return None
    return paired_difference([pa[f] for f in files], [pb[f] for f in files], labels, groups)["gap_diff_ci"]


def three_arm_rows(sessions: dict[str, list[dict[str, Any]]], test_set) -> list[dict[str, Any]]:
    """Each arm's own final choice on test (mean and 95 % t-interval over seeds), and steered against
    each unsteered arm: told apart or not, and the seeds a .05 gap difference would need."""
    rows: list[dict[str, Any]] = []
    for arm in ARMS:
        own = [s["own"] for s in sessions[arm]]
        for key, unit in (("auc", "test AUC"), ("gap", "test AUC gap")):
            summary = t_interval([o.get(key) if o else None for o in own])
            ci = summary["ci95"]
            rows.append({"name": f"steering, three arms: {_arm_label(arm)}, {unit} of its own final choice",
                         "value": summary["mean"], "unit": unit, **summary, "arm": arm,
                         "per_seed": [o.get(key) if o else None for o in own],
                         "criterion": sessions[arm][0]["criterion"] if sessions[arm] else None,
                         "note": f"mean over {summary['n']} seeds {_fmt(summary['mean'])}"
                                 + (f", 95 % t-interval [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ", no interval")})
    for other in UNSTEERED:
        gaps = {arm: [(s["own"] or {}).get("gap") for s in sessions[arm]] for arm in ("steered", other)}
        aucs = {arm: [(s["own"] or {}).get("auc") for s in sessions[arm]] for arm in ("steered", other)}
        gap_vs, auc_vs = arm_versus(gaps["steered"], gaps[other]), arm_versus(aucs["steered"], aucs[other])
        paired = [_own_paired(sessions, "steered", other, i, test_set) for i in range(len(SEEDS))]
        said = {None: "cannot say (under 2 seeds)", True: "told apart", False: "cannot be told apart"}
        ci = gap_vs["ci95"]
        rows.append({"name": f"steering, three arms: steered minus {other}, test AUC gap (mean over seeds)",
                     "value": gap_vs["mean"], "unit": "test AUC gap difference", "gap": gap_vs, "auc": auc_vs,
                     "per_seed_paired_gap_ci95": paired,
                     "note": f"steered - {other}: gap {_fmt(gap_vs['mean'])}"
                             + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "") + f" over {gap_vs['n']} seeds, "
                             f"{said[gap_vs['told_apart']]}; AUC {_fmt(auc_vs['mean'])}, "
                             f"{said[auc_vs['told_apart']]}; per seed, paired bootstrap on the same test images: "
                             + ", ".join(str(p) for p in paired)
                             + f"; seeds a {EFFECT} gap difference would need at {POWER:.0%} power (paired t, from "
                               f"this spread, sd {_fmt(gap_vs['std'])}): {gap_vs['seeds_for_effect']}"})
    return rows


def _rows(per_seed, verdicts, sessions, base_rows, base_wall: float, total: float,
          load: dict[str, list[float]]) -> list[dict[str, Any]]:
    data = f"SynthDerm {N_TRAIN} training / {N_TEST} test images at {IMAGE_PX} px"
    b_auc, _ = mean_std([r["test_auc"] for r in base_rows])
    b_gap, _ = mean_std([r["test_gap"] for r in base_rows])
    criterion = sessions[ARMS[0]][0]["criterion"] if SEEDS else None
    session_note = (f"{STEPS}-step sessions, base level, offline coder fitted to CPU, step limit {STEP_TIMEOUT:g} s, "
                    f"session criterion {criterion}; the runner's final choice on validation; {data}")
    rows: list[dict[str, Any]] = []
    for c in JUDGED:
        rows += _arm_rows("steered", c, [s[f"steered_{c}"] for s in per_seed], (b_auc, b_gap),
                          f"guidance \"{GUIDANCE}\" queued as a guide command before step 1; {session_note}")
        for arm in UNSTEERED:
            rows += _arm_rows(arm, c, [s[f"{arm}_{c}"] for s in per_seed], (b_auc, b_gap), session_note)
    weights = "random init" if str(base_rows[0]["weights"]).startswith("random") else "ImageNet weights"
    rows += _arm_rows("baseline", None, [s["baseline"] for s in per_seed], None,
                      f"ResNet-18 ({weights}), at most {BASELINE_EPOCHS} epochs at "
                      f"{BASELINE_PX} px on CPU (the study's: 30 at 224 on a GPU), patience 5, epoch kept by "
                      f"minimax Pareto on validation; {base_wall:.0f} s for {len(base_rows)} seeds; {data}")
    for c in JUDGED:
        rows.append(_verdict_row(per_seed, verdicts[c], sessions, total, load, default=c == criterion))
    rows.append(_oracle_row(per_seed))
    return rows


def _verdict_row(per_seed, verdict, sessions, total: float, load, *, default: bool) -> dict[str, Any]:
    n, c = verdict["seeds"], verdict["criterion"]
    said = "reproduced" if verdict["reproduced"] else "NOT reproduced"
    said_sure = "reproduced" if verdict["reproduced_told_apart"] else "NOT reproduced"
    whose = " (the session default)" if default else ""
    row = {"name": f"search quality: seeds where the steered session beats {BASELINE} (lower test gap, AUC no worse), "
                   f"chosen by {c}{whose}",
           "value": verdict["steered_wins"], "unit": f"seeds of {n}", **{k: v for k, v in verdict.items()
                                                                        if k not in ("steered_wins",)},
           "per_seed": [{"seed": e["seed"], "baseline": e["baseline"], "steered": e[f"steered_{c}"],
                         "clean": e[f"clean_{c}"], "feedback": e[f"feedback_{c}"]} for e in per_seed],
           "told_apart_rule": "paired bootstrap on the same test images (stratified by skin-tone group x label, "
                              "2000 resamples): a win told apart when the 95 % interval of the gap difference "
                              "(node - baseline) lies below 0 and the AUC difference's does not",
           "note": f"point estimates: finding {said}: steered {verdict['steered_wins']}/{n}, unsteered clean "
                   f"{verdict['clean_wins']}/{n}, unsteered with fairness feedback {verdict['feedback_wins']}/{n} "
                   f"(needs steered >= {verdict['needed']} and clean < {verdict['needed']}); "
                   f"told apart (paired 95 %): finding {said_sure}: steered {verdict['steered_wins_told_apart']}/{n}, "
                   f"clean {verdict['clean_wins_told_apart']}/{n}; gap vs baseline (lower/tied/higher, paired): "
                   + ", ".join(f"{arm} {g['lower']}/{g['tied']}/{g['higher']}"
                               for arm, g in verdict["gap_vs_baseline"].items())
                   + " | " + " | ".join(_summary_line(e, c) for e in per_seed)}
    if default:
        row.update({"timeouts": {arm: [s["timeouts"] for s in sessions[arm]] for arm in ARMS},
                    "nodes": {arm: [s["n_nodes"] for s in sessions[arm]] for arm in ARMS},
                    "session_s": {arm: [round(s["elapsed"]) for s in sessions[arm]] for arm in ARMS},
                    "total_s": round(total), "loadavg": load})
    return row


def _oracle_row(per_seed) -> dict[str, Any]:
    gaps = {arm: [(e[f"{arm}_oracle"] or {}).get("gap") for e in per_seed] for arm in ARMS}
    wins = {arm: sum(e[f"{arm}_oracle"] is not None and e[f"{arm}_oracle"]["gap"] < e["baseline"]["gap"]
                     for e in per_seed) for arm in ARMS}
    mean, _ = mean_std(gaps["steered"])
    return {"name": "search quality oracle (chosen on TEST, information only): lowest test gap of a steered node "
                    f"at AUC >= {BASELINE}",
            "value": mean, "unit": "test AUC gap", "per_seed": gaps, "oracle_wins": wins,
            "oracle_nodes": {arm: [(e[f"{arm}_oracle"] or {}).get("node_id") for e in per_seed] for arm in ARMS},
            "note": "not what a session reaches; any node at test AUC >= the seed's baseline beating its gap: "
                    + ", ".join(f"{arm} {wins[arm]}/{len(per_seed)}" for arm in ARMS)
                    + f"; clean oracle gaps {[_fmt(g) for g in gaps['clean']]}"}


if __name__ == "__main__":
    for r in run():
        print(r)
