"""Engine benchmarks: overhead per search step excluding the pipeline's own run, and steering
command latency across processes.

- Overhead per step: an in-process session whose coder writes a trivial pipeline (prints its
  metric, predict returns constants). Step time minus the pipeline's subprocess time (exec) and
  minus the evaluation harness's subprocesses (predict on validation and test) is what the engine
  itself costs: coder call, events and the materialised nodes table, node workspace, review,
  audit, policy. Reference: a bare `python -c pass` start on this machine, measured in the same run.
- Command latency: a headless session in a subprocess (`python -m befair_tui.cli run --headless`,
  offline coder, small SynthDerm); guide commands issued from this process at random moments;
  latency = consumed_at - issued_at (the guidance event is written in the same transaction).
"""
from __future__ import annotations

import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from engine.coders.protocol import CoderBase

ROOT = Path(__file__).resolve().parents[2]
SYNTH = dict(seed=0, n_train=480, n_test=164, size=32)

TRIVIAL = '''
import os
def predict(folder):
    return {n: 0.5 + (i % 7) / 100.0 for i, n in enumerate(sorted(os.listdir(folder)))}
if __name__ == "__main__":
    print("Validation AUROC: 0.5")
'''


class TrivialCoder(CoderBase):
    name, label, simulated = "bench", "benchmark coder (trivial pipeline)", True

    def _reply(self, ctx, stage):
        from engine.coders.protocol import CoderReply

        return CoderReply(plan=f"{stage} {ctx.step}", code=TRIVIAL, components={"stage": stage})

    def draft(self, ctx):
        return self._reply(ctx, "draft")

    def improve(self, ctx, parent):
        return self._reply(ctx, "improve")

    def debug(self, ctx, parent):
        return self._reply(ctx, "debug")

    def review(self, ctx, node):
        from engine.coders.protocol import Review

        return Review(is_bug=node.status != "ok", summary="", claimed_metric=0.5)


def _python_start_ms(n: int = 5) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def _workspace():
    from engine.data.agent_workspace import synth_workspace

    return synth_workspace(**SYNTH)


def overhead_rows(steps: int = 8) -> list[dict]:
    from engine.agent.runner import Runner
    from engine.agent.session_setup import start_session
    from engine.agent.session_config import SessionConfig
    from engine.session.store import SessionStore

    ws = _workspace()
    with tempfile.TemporaryDirectory(prefix="befair-bench-") as tmp:
        store = SessionStore(Path(tmp) / "bench.db")
        writer = start_session(store, SessionConfig(steps=steps, num_drafts=2, data=str(ws.root)), workspace=ws,
                               coder=TrivialCoder())
        runner = Runner(store, writer.session_id, coder=TrivialCoder(), workspace=ws, writer=writer)
        runner.run()
        n_events = store.last_seq(writer.session_id)
        store.close()
    t = runner.timings
    total = [x["total"] * 1000 for x in t]
    bookkeeping = [(x["total"] - x["exec"] - x["eval"]) * 1000 for x in t]
    with_eval = [(x["total"] - x["exec"]) * 1000 for x in t]
    execs = [x["exec"] * 1000 for x in t]
    start = _python_start_ms()
    return [
        {"name": "engine overhead per step, excl. pipeline run and evaluation (median)",
         "value": statistics.median(bookkeeping), "unit": "ms", "reference": "python -c pass start",
         "ratio": statistics.median(bookkeeping) / start,
         "note": f"{len(t)} steps, {n_events} events; coder, events, workspace, review, audit, policy"},
        {"name": "engine overhead per step, excl. pipeline run (incl. evaluation harness)",
         "value": statistics.median(with_eval), "unit": "ms", "reference": "python -c pass start",
         "ratio": statistics.median(with_eval) / start,
         "note": "the harness imports the solution and predicts validation + test in subprocesses"},
        {"name": "pipeline subprocess time per step (trivial pipeline)", "value": statistics.median(execs),
         "unit": "ms", "note": "python solution.py start to exit, streamed"},
        {"name": "total step time (trivial pipeline)", "value": statistics.median(total), "unit": "ms"},
        {"name": "reference: python -c pass start", "value": start, "unit": "ms"},
    ]


def latency_rows(n_commands: int = 12) -> list[dict]:
    from engine.session.store import SessionStore

    ws = _workspace()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with tempfile.TemporaryDirectory(prefix="befair-bench-") as tmp:
        db, sid = Path(tmp) / "latency.db", "bench-latency"
        argv = [sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--quiet", "--steps", "40",
                "--coder", "offline", "--data", str(ws.root), "--db", str(db), "--session-id", sid,
                "--guidance", "use logistic regression on 32 px images", "--failure-rate", "0"]
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        latencies: list[float] = []
        try:
            deadline = time.monotonic() + 120
            store = None
            while time.monotonic() < deadline:
                if db.exists():
                    store = SessionStore(db)
                    try:
                        if store.last_seq(sid) > 1:
                            break
                    except Exception:
                        pass
                time.sleep(0.1)
            rng = random.Random(0)
            for i in range(n_commands):
                time.sleep(rng.uniform(0.2, 1.5))
                cid = store.issue_command(sid, "guide", {"text": f"note {i}", "scope": "global"}, by="bench")
                row = store.wait_command(cid, timeout=120)
                if row is not None:
                    latencies.append((row["consumed_at"] - row["issued_at"]) * 1000)
            store.issue_command(sid, "stop", {"interrupt": True}, by="bench")
            proc.wait(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    latencies.sort()
    p95 = latencies[min(len(latencies) - 1, int(round(0.95 * (len(latencies) - 1))))]
    return [
        {"name": "steering command latency across processes (median)", "value": statistics.median(latencies),
         "unit": "ms", "note": f"{len(latencies)} guide commands during a live offline-coder session; poll 0.2 s"},
        {"name": "steering command latency across processes (p95)", "value": p95, "unit": "ms"},
    ]


def run() -> list[dict]:
    return overhead_rows() + latency_rows()


if __name__ == "__main__":
    for row in run():
        print(row)
