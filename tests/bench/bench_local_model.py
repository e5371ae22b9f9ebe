"""A real coding model, end to end: Qwen2.5-Coder-1.5B-Instruct (GGUF) behind llama.cpp's
llama-server (`make local-model`), driving the LLM coder on small SynthDerm.

For each seed (BEFAIR_BENCH_LOCAL_SEEDS, default 0,1,2), a BEFAIR_BENCH_LOCAL_STEPS-step session
(default 6) at the base level with the scaffold on (as the README directs for a model under 7B),
run as a user runs it (`befair run --headless --coder openai`, a real subprocess, its own
database), in three arms (as the search-quality bench, tests/bench/bench_search.py):

- **clean**: unsteered, the defaults every level gets (the agent is shown the measured AUC; the
  search follows validation AUC);
- **feedback**: unsteered, the tool's fairness feedback on (`--feedback groups --best robust`);
- **steered**: the clean settings, and a dermatologist's guidance in words about the clinical goal
  (bench_search.GUIDANCE), given with `befair steer SID guide TEXT` as soon as the first node has
  ended (a person reading the first result; the same text for every seed).

The arms are paired. Each session samples with `--llm-seed` (1000 x its seed), and the sessions
reach llama-server through a record-and-replay proxy (tests/bench/replay_proxy.py): a request it
has seen (same messages, seed and sampling) gets the reply the server gave the first time. So a
seed's steered session gets the unsteered one's replies until the guidance changes its prompts
(or a pipeline's own randomness changes a printed metric, and so a review prompt), and its own
from then on. Seeds alone do not do it: with several sessions on one server llama.cpp's batched
decoding is not batch-invariant, and a seed's two sessions got different replies to the same
first prompt.

Rows per arm: nodes measured / nodes, seconds per step, tokens/s (the calls' writing speed),
stored events per LLM call (llm_stream events, and all events), the step of the first measured
node; and per session the failed nodes' reasons and whether any reply was cut while tokens were
still arriving (a call ended by a time budget; a stall or the token cap are reported apart).
`cat /proc/loadavg` is recorded with every session: the model's speed depends on the machine's load.

Skipped (no rows) when the local model is not installed, and in `make bench` unless
BEFAIR_BENCH_LOCAL=1: it takes one to several hours on 2 cores, depending on their load.
Run alone: `.venv/bin/python -m tests.bench.bench_local_model [--seeds 0,1,2] [--arms clean,feedback,steered]`.
A run that was cut (its process killed, the machine stopped) goes on with `--resume WORK_FOLDER`:
each of its sessions that has not finished is continued with `befair resume` against a fresh
server (outside the proxy: a resumed session has no twin to share replies with), and the rows are
read from all of them. A session's seconds per step then include the cut.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from tests.bench import bench_search
from tests.bench.replay_proxy import ReplayProxy

STEPS = int(os.environ.get("BEFAIR_BENCH_LOCAL_STEPS", "6"))
SEEDS = [int(s) for s in os.environ.get("BEFAIR_BENCH_LOCAL_SEEDS", "0,1,2").split(",") if s.strip()]
# sessions at a time against one llama-server (one slot each, decoded in one batch): on 2 cores a
# slot's speed drops far less than the number of slots grows
PARALLEL = int(os.environ.get("BEFAIR_BENCH_LOCAL_PARALLEL", "6"))
LEVEL = "base"
SYNTH = ("--synth-n-train", "400", "--synth-n-test", "200", "--synth-size", "32")
STEP_TIMEOUT = "300"
# Sessions sharing one server wait for each other's prompts, and llama.cpp sends nothing to a
# request whose prompt waits its turn: the stall timeout covers that wait (befair llm check
# measures a lone request, which the default 120 s covers).
LLM_TIMEOUT = os.environ.get("BEFAIR_BENCH_LOCAL_LLM_TIMEOUT", "900")
ARMS = bench_search.ARMS
ARM_FLAGS = {"clean": [], "feedback": ["--feedback", "groups", "--best", "robust"], "steered": []}
GUIDANCE = bench_search.GUIDANCE   # a dermatologist's words, not code
LLM_SEED_STRIDE = 1000   # a session's samples are seeded 1000*seed + n: seeds' sessions do not overlap


def loadavg() -> str:
    try:
        return Path("/proc/loadavg").read_text().strip()
    except OSError:
        return "?"


def _steer_after_first_node(db: Path, sid: str, done: threading.Event, out: dict[str, Any]) -> None:
    from engine.session.store import SessionStore

    while not done.wait(2.0):
        try:
            store = SessionStore(db)
            try:
                state = store.state(sid)
            finally:
                store.close()
        except Exception:  # noqa: BLE001 - not created yet
            continue
        ended = [n for n in state.nodes.values() if n.finished]
        if ended:
            out["after_node"] = min(n.node_id for n in ended)
            out["at_step"] = state.agent_steps
            subprocess.run([sys.executable, "-m", "befair_tui.cli", "steer", sid, "guide", GUIDANCE, "--db", str(db)],
                           check=True, capture_output=True)
            return


def run_session(base_url: str, seed: int, arm: str, work: Path, steps: int = STEPS) -> dict[str, Any]:
    db = work / f"{arm}-s{seed}.db"
    sid = f"{arm}-s{seed}"
    log = work / f"{sid}.log"
    cmd = [sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--coder", "openai", "--base-url", base_url,
           "--model", "qwen2.5-coder-1.5b-instruct", "--scaffold", "on", "--level", LEVEL, "--steps", str(steps),
           "--seed", str(seed), "--llm-seed", str(LLM_SEED_STRIDE * seed),
           *SYNTH, "--step-timeout", STEP_TIMEOUT, "--llm-timeout", LLM_TIMEOUT, "--db", str(db),
           "--session-id", sid, *ARM_FLAGS[arm]]
    steer: dict[str, Any] = {}
    done = threading.Event()
    watcher = None
    if arm == "steered":
        watcher = threading.Thread(target=_steer_after_first_node, args=(db, sid, done, steer), daemon=True)
        watcher.start()
    load_before = loadavg()
    t0 = time.monotonic()
    with open(log, "w") as fh:
        code = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - t0
    done.set()
    if watcher is not None:
        watcher.join(5)
    return {**summarise(db, sid), "seed": seed, "arm": arm, "exit_code": code, "wall_s": round(wall, 1),
            "load_before": load_before, "load_after": loadavg(), "steered": steer or None, "db": str(db),
            "log": str(log)}


def resume_session(base_url: str, seed: int, arm: str, work: Path) -> dict[str, Any]:
    """Continue a cut session to its budget (`befair resume`), as a person resumes a killed one."""
    sid = f"{arm}-s{seed}"
    load_before, t0 = loadavg(), time.monotonic()
    with open(work / f"{sid}.resume.log", "w") as fh:
        code = subprocess.run([sys.executable, "-m", "befair_tui.cli", "resume", sid, "--db", str(work / f"{sid}.db"),
                               "--base-url", base_url, "--force"], stdout=fh, stderr=subprocess.STDOUT).returncode
    return {"exit_code": code, "wall_s": round(time.monotonic() - t0, 1), "load_before": load_before,
            "load_after": loadavg(), "resumed": True}


def resume(work: Path, seeds: list[int], arms: tuple[str, ...]) -> list[dict[str, Any]]:
    """The sessions of a cut run in `work`, each unfinished one continued first (all at once)."""
    from engine.coders.llm import local_model

    plan = [(arm, seed) for arm in arms for seed in seeds]
    todo = [(arm, seed) for arm, seed in plan if summarise(work / f"{arm}-s{seed}.db", f"{arm}-s{seed}")["status"]
            not in ("finished", "failed")]
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    if todo:
        with local_model.LocalServer(local_model.find(), log=work / "llama-server-resume.log", parallel=len(todo),
                                     threads=int(os.environ.get("BEFAIR_BENCH_LOCAL_THREADS", "0")) or None,
                                     context=local_model.CONTEXT if len(todo) == 1 else 12_288) as server:
            threads = [threading.Thread(target=lambda a, s: runs.__setitem__((a, s), resume_session(
                server.base_url, s, a, work)), args=job) for job in todo]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    return [{**summarise(work / f"{arm}-s{seed}.db", f"{arm}-s{seed}"), "seed": seed, "arm": arm,
             "exit_code": None, "wall_s": None, "load_before": "?", "load_after": "?", "steered": None,
             **runs.get((arm, seed), {})} for arm, seed in plan]


def summarise(db: Path, sid: str) -> dict[str, Any]:
    from engine.session.selection import is_failed as is_buggy
    from engine.session import events as ev
    from engine.session.store import SessionStore

    store = SessionStore(db)
    try:
        events = store.events(sid)
        state = store.state(sid)
    finally:
        store.close()
    nodes = sorted(state.nodes.values(), key=lambda n: n.node_id)
    measured = [n for n in nodes if n.val_auc is not None]
    calls = [e.payload for e in events if e.kind == ev.LLM_CALL]
    streams = [e for e in events if e.kind == ev.LLM_STREAM]
    speeds = [c["tokens_per_s"] for c in calls if c.get("tokens_per_s")]
    errors = [str(c.get("error") or "") for c in calls if not c.get("ok", True)]
    return {
        "nodes": len(nodes), "measured": len(measured),
        "first_measured_step": min((n.step for n in measured), default=None),
        "seconds_per_step": round((state.last_ts - state.started_ts) / max(len(nodes), 1), 1)
        if state.last_ts and state.started_ts else None,
        "tokens_per_s": round(statistics.median(speeds), 2) if speeds else None,
        "first_token_s": round(statistics.median([c["first_token_s"] for c in calls if c.get("first_token_s")]), 1)
        if any(c.get("first_token_s") for c in calls) else None,
        "llm_calls": len(calls), "llm_stream_events": len(streams),
        "stream_events_per_call": round(len(streams) / len(calls), 1) if calls else None,
        "stream_bytes_per_call": round(sum(len(json.dumps(e.payload)) for e in streams) / len(calls))
        if calls else None,
        "events_per_call": round(len(events) / len(calls), 1) if calls else None,
        "cut_by_budget": sum("time budget" in e for e in errors),
        "stalled": sum("stalled" in e for e in errors),
        "truncated_at_cap": sum("truncated" in e for e in errors),
        "rule_hits": rule_hits(calls),
        "nodes_detail": [{"node": n.node_id, "step": n.step, "stage": n.stage, "parent": n.parent_id,
                          "auc": None if n.val_auc is None else round(n.val_auc, 4),
                          "design": _design(n.code or "") if n.val_auc is not None else None,
                          "failure": n.failure_reason if is_buggy(n) else None,
                          "summary": (n.review_summary or "")[:200]} for n in nodes],
        "models": (state.coder.get("server") or {}),
        "own": _own_choice(state),
        "status": state.status,
    }


def _own_choice(state: Any) -> dict[str, Any] | None:
    """The session's final choice by its own criterion, with its test AUC and gap."""
    from engine.session.views import best_choice, session_criterion

    pick = best_choice(state, session_criterion(state))
    if pick.node_id is None:
        return None
    test = state.nodes[pick.node_id].test
    return {"node_id": pick.node_id, "criterion": session_criterion(state), "auc": test and test.auc,
            "gap": test and test.auc_gap}


def rule_hits(calls: list[dict[str, Any]]) -> dict[str, int]:
    """Coding replies that hit a reply rule (and were asked again), by rule id
    (engine.coders.llm.reply_rules). A call recorded before the rules were recorded is checked again
    from its stored reply (a debug reply's repeats-failed-code cannot be told then)."""
    from engine.coders.llm.reply_rules import NO_CODE
    from engine.coders.llm.response_parsing import extract_all_code
    from engine.coders.llm.scaffold import load

    out: dict[str, int] = {}
    for c in calls:
        if c.get("role") == "review" or not c.get("ok"):
            continue
        if "check" in c:
            rule = (c["check"] or {}).get("rule")
        else:
            code = extract_all_code(c.get("reply") or "")      # as the coder reads a scaffolded reply
            hit = load().check(code) if code else None
            rule = hit.rule if hit else (NO_CODE.id if code is None else None)
        if rule:
            out[rule] = out.get(rule, 0) + 1
    return dict(sorted(out.items(), key=lambda kv: (-kv[1], kv[0])))


def _design(code: str) -> str:
    """The model's own part of a measured pipeline: the bodies of features() and train(), squeezed."""
    import ast

    try:
        tree = ast.parse(code)
    except SyntaxError:
        return "?"
    parts = [ast.unparse(n) for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in ("features", "train")]
    return " | ".join(" ".join(p.split()) for p in parts)[:400]


def arm_rows(sessions: list[dict[str, Any]], arm: str) -> list[dict[str, Any]]:
    mine = [s for s in sessions if s["arm"] == arm]
    if not mine:
        return []
    nodes = sum(s["nodes"] for s in mine)
    measured = sum(s["measured"] for s in mine)
    firsts = [s["first_measured_step"] for s in mine if s["first_measured_step"] is not None]
    speeds = [s["tokens_per_s"] for s in mine if s["tokens_per_s"]]
    loads = "; ".join(f"s{s['seed']}: {s['load_before'].split()[0]}→{s['load_after'].split()[0]}" for s in mine)
    note = f"{len(mine)} sessions × {STEPS} steps, seeds {','.join(str(s['seed']) for s in mine)}; load {loads}"
    return [
        {"name": f"local model {arm}: nodes measured / nodes", "value": f"{measured}/{nodes}", "unit": "nodes",
         "note": note},
        {"name": f"local model {arm}: seconds per step", "value": round(statistics.mean(
            s["seconds_per_step"] for s in mine if s["seconds_per_step"]), 1), "unit": "s", "note": note},
        {"name": f"local model {arm}: tokens/s (median of sessions' median call)",
         "value": round(statistics.median(speeds), 2) if speeds else None, "unit": "tokens/s", "note": note},
        {"name": f"local model {arm}: stored llm_stream events per LLM call", "value": round(
            sum(s["llm_stream_events"] for s in mine) / max(sum(s["llm_calls"] for s in mine), 1), 1),
         "unit": "events", "note": note + f"; {round(statistics.mean(s['stream_bytes_per_call'] or 0 for s in mine))} "
                                          "bytes of stream events per call (offsets and times only)"},
        {"name": f"local model {arm}: coding replies that hit a reply rule", "value": sum(
            sum(s["rule_hits"].values()) for s in mine), "unit": "replies", "note": note,
         "by_rule": _sum_hits(s["rule_hits"] for s in mine)},
        {"name": f"local model {arm}: step of the first measured node (mean over sessions that measured one)",
         "value": round(statistics.mean(firsts), 2) if firsts else None, "unit": "step",
         "note": note + f"; per seed {[s['first_measured_step'] for s in mine]}"},
    ]


def _sum_hits(per_session: Any) -> dict[str, int]:
    total: dict[str, int] = {}
    for hits in per_session:
        for rule, n in hits.items():
            total[rule] = total.get(rule, 0) + n
    return dict(sorted(total.items(), key=lambda kv: (-kv[1], kv[0])))


def three_arm_rows(sessions: list[dict[str, Any]], seeds: list[int]) -> list[dict[str, Any]]:
    """Each arm's own final choice on test over seeds, and steered against each unsteered arm."""
    by = {(s["arm"], s["seed"]): s.get("own") for s in sessions}
    rows = []
    figures = {arm: {k: [(by.get((arm, seed)) or {}).get(k) for seed in seeds] for k in ("auc", "gap")}
               for arm in ARMS}
    for arm in ARMS:
        for key, unit in (("auc", "test AUC"), ("gap", "test AUC gap")):
            summary = bench_search.t_interval(figures[arm][key])
            rows.append({"name": f"local model, three arms: {arm}, {unit} of its own final choice",
                         "value": summary["mean"], "unit": unit, **summary, "per_seed": figures[arm][key]})
    for other in bench_search.UNSTEERED:
        gap_vs = bench_search.arm_versus(figures["steered"]["gap"], figures[other]["gap"])
        rows.append({"name": f"local model, three arms: steered minus {other}, test AUC gap", "value": gap_vs["mean"],
                     "unit": "test AUC gap difference", "gap": gap_vs,
                     "auc": bench_search.arm_versus(figures["steered"]["auc"], figures[other]["auc"]),
                     "note": f"told apart: {gap_vs['told_apart']}; seeds a {bench_search.EFFECT} gap difference "
                             f"would need at {bench_search.POWER:.0%} power: {gap_vs['seeds_for_effect']}"})
    return rows


def run(seeds: list[int] | None = None, arms: tuple[str, ...] = ARMS,
        out: Path | None = None, parallel: int = PARALLEL, force: bool = False) -> list[dict[str, Any]]:
    from engine.coders.llm import local_model
    from engine.coders.llm.config import LlmConfig
    from engine.coders.llm.server_check import check_server
    from engine.data.agent_workspace import synth_workspace

    if not force and os.environ.get("BEFAIR_BENCH_LOCAL") != "1":
        print("bench_local_model: set BEFAIR_BENCH_LOCAL=1 to run it (an hour or more); no rows")
        return []
    model = local_model.find()
    if not model.present:
        print(f"local model not installed ({model.root}): {local_model.INSTALL_HINT}; no rows")
        return []
    root = os.environ.get("BEFAIR_BENCH_LOCAL_WORK")   # default: a fresh folder under the temp dir
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="befair-bench-local-", dir=root))
    sessions: list[dict[str, Any]] = []
    plan = [(arm, seed) for arm in arms for seed in (seeds if seeds is not None else SEEDS)]
    lanes = max(1, min(parallel, len(plan)))
    # the sessions share one SynthDerm workspace: built once here, not by six sessions at once
    synth_workspace(seed=0, n_train=int(SYNTH[1]), n_test=int(SYNTH[3]), size=int(SYNTH[5]))
    lock = threading.Lock()
    threads = int(os.environ.get("BEFAIR_BENCH_LOCAL_THREADS", "0")) or None   # default: half the CPUs
    with local_model.LocalServer(model, log=work / "llama-server.log", parallel=lanes, threads=threads,
                                 context=local_model.CONTEXT if lanes == 1 else 12_288) as server, \
            ReplayProxy(server.base_url) as proxy:
        check = check_server(LlmConfig(model=local_model.MODEL_ALIAS, base_url=server.base_url))
        print("\n".join(check.lines()), f"\nwork folder {work}; {lanes} session(s) at a time", flush=True)

        def one(arm: str, seed: int) -> None:
            s = run_session(proxy.base_url, seed, arm, work)
            with lock:
                sessions.append(s)
                print(json.dumps({k: v for k, v in s.items() if k != "nodes_detail"}), flush=True)
                for n in s["nodes_detail"]:
                    print(f"   {arm} s{seed} node {n['node']} step {n['step']} {n['stage']}: "
                          f"{'AUC ' + str(n['auc']) if n['auc'] is not None else 'FAILED ' + str(n['failure'])}",
                          flush=True)
                if out is not None:
                    out.write_text(json.dumps({"check": check.to_dict(), "sessions": sessions}, indent=2))

        pending = list(plan)
        running: list[threading.Thread] = []
        while pending or running:
            running = [t for t in running if t.is_alive()]
            while pending and len(running) < lanes:
                t = threading.Thread(target=one, args=pending.pop(0), daemon=True)
                t.start()
                running.append(t)
            time.sleep(1.0)
        print(f"replay proxy: {proxy.forwarded} chat requests sent to the server, {proxy.replayed} "
              "answered with a twin's reply", flush=True)
    rows = [row for arm in arms for row in arm_rows(sessions, arm)]
    if set(arms) == set(ARMS):
        rows += three_arm_rows(sessions, seeds if seeds is not None else SEEDS)
    for row in rows:
        row["sessions"] = [{k: s[k] for k in ("seed", "arm", "nodes", "measured", "first_measured_step",
                                              "load_before", "load_after")} for s in sessions]
    return rows


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", default=",".join(map(str, SEEDS)))
    ap.add_argument("--arms", default=",".join(ARMS))
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--parallel", type=int, default=PARALLEL)
    ap.add_argument("--resume", type=Path, default=None, help="the work folder of a cut run: continue it")
    a = ap.parse_args()
    seeds, arms = [int(x) for x in a.seeds.split(",")], tuple(a.arms.split(","))
    if a.resume is not None:
        sessions = resume(a.resume, seeds, arms)
        result = [row for arm in arms for row in arm_rows(sessions, arm)]
        result += three_arm_rows(sessions, seeds) if set(arms) == set(ARMS) else []
    else:
        result = run(seeds, arms, a.out, a.parallel, force=True)
    print(json.dumps(result, indent=2))
