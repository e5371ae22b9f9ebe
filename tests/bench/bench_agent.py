"""The offline search on a CPU: a 20-step SynthDerm session (default set: 2,000 training images,
656 test images, 96 px) with the offline coder fitted to the device and the step limit, run
in-process through the real runner, sandbox and harness.

- session cpu: wall time of the whole session, its timeouts in a field of their own.
- reference, same run: the first BEFAIR_BENCH_SESSION_REF_STEPS steps (default 4; 0 skips it) of
  the same session with the unfitted coder (the whole grammar, ResNet-18 included, as before),
  compared per step.
"""
from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

STEPS = int(os.environ.get("BEFAIR_BENCH_SESSION_STEPS", "20"))
REF_STEPS = int(os.environ.get("BEFAIR_BENCH_SESSION_REF_STEPS", "4"))
STEP_TIMEOUT = float(os.environ.get("BEFAIR_BENCH_STEP_TIMEOUT", "60"))  # a CPU demo's step limit
SEED = 0


def _session(ws, steps: int, fitted: bool) -> dict:
    from engine.agent.runner import run
    from engine.agent.session_config import SessionConfig
    from engine.agent.session_setup import start_session
    from engine.coders.offline import OfflineCoder
    from engine.session.store import SessionStore

    config = SessionConfig(steps=steps, seed=SEED, data=str(ws.root), step_timeout=STEP_TIMEOUT,
                           extra={"device": "cpu"})
    coder = OfflineCoder(failure_rate=config.failure_rate, seed=SEED, device="cpu", step_timeout=STEP_TIMEOUT,
                         fit_compute=fitted)
    with tempfile.TemporaryDirectory(prefix="befair-bench-") as tmp:
        store = SessionStore(Path(tmp) / "session.db")
        writer = start_session(store, config, workspace=ws, coder=coder)
        started = time.perf_counter()
        state = run(store, writer.session_id, coder=coder, workspace=ws, writer=writer)
        elapsed = time.perf_counter() - started
        store.close()
    nodes = list(state.nodes.values())
    models: dict[str, int] = {}
    for n in nodes:
        model = (n.components or {}).get("model", "?")
        models[model] = models.get(model, 0) + 1
    return {"elapsed": elapsed, "nodes": len(nodes), "timeouts": sum(n.status == "timeout" for n in nodes),
            "ok": sum(n.status == "ok" for n in nodes), "models": models,
            "exec": [n.exec_time for n in nodes if n.exec_time is not None]}


def run() -> list[dict]:
    from engine.data.agent_workspace import synth_workspace

    ws = synth_workspace()  # the default SynthDerm set, cached by its parameters
    fitted = _session(ws, STEPS, fitted=True)
    per_step = fitted["elapsed"] / max(fitted["nodes"], 1)
    row = {"name": f"session cpu: {STEPS}-step SynthDerm session, offline coder fitted to CPU",
           "value": fitted["elapsed"], "unit": "s", "timeouts": fitted["timeouts"],
           "note": f"{fitted['nodes']} nodes, {fitted['ok']} ok, {fitted['timeouts']} timeout(s); models "
                   f"{fitted['models']}; step limit {STEP_TIMEOUT:g} s; median run "
                   f"{statistics.median(fitted['exec'] or [0]):.1f} s"}
    rows = [row]
    if REF_STEPS > 0:
        ref = _session(ws, REF_STEPS, fitted=False)
        ref_step = ref["elapsed"] / max(ref["nodes"], 1)
        row["reference"] = f"unfitted coder (whole grammar), first {REF_STEPS} steps, per step"
        row["ratio"] = per_step / ref_step
        rows.append({"name": f"session cpu reference: unfitted coder, {REF_STEPS} steps", "value": ref["elapsed"],
                     "unit": "s", "timeouts": ref["timeouts"],
                     "note": f"{ref_step:.1f} s per step vs {per_step:.1f} s fitted; models {ref['models']}"})
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
