"""What the sandbox costs: per execution and per evaluation, bubblewrap against the same run
unsandboxed (`Sandbox("none")`, same allow-listed environment, limits and clean-up), in the same
process on the same machine. Also the output path: a pipeline that prints 300 MB, collected by the
executor, against reading the same bytes from a plain pipe.
"""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from engine.evaluation.harness import evaluate
from engine.execution import Job, LocalExecutor, Sandbox, prepare_node_dir, prepare_session_input
from engine.execution.sandbox import check

REPEATS = int(os.environ.get("BEFAIR_BENCH_SANDBOX_N", "7"))
FLOOD_MB = 300
PREDICT = ("import os\ndef predict(folder):\n    return {n: 0.5 for n in os.listdir(folder)}\n"
           "if __name__ == '__main__':\n    print('Validation AUROC: 0.5')\n")
IMPORTS = "import numpy, pandas, torch\nprint('ok')\n"
FLOOD = (f"import sys\nblock = ('x' * 1023 + '\\n') * 1024\nfor _ in range({FLOOD_MB}):\n"
         "    sys.stdout.write(block)\n")


def _node(root: Path, code: str, node_id: int) -> Path:
    agent_input = root / "agent_input"
    if not agent_input.exists():
        (agent_input / "images").mkdir(parents=True)
        (agent_input / "skin_lesions.csv").write_text("image_name,skin_tone,label\nimage_1,3,benign\n")
        prepare_session_input(root / "runs", "S", agent_input)
    return prepare_node_dir(root / "runs", "S", node_id, code)


def _median_exec(node: Path, sandbox: Sandbox, cap: int = 200_000) -> float:
    ex = LocalExecutor(sandbox=sandbox, heartbeat=0.02, flush_interval=0.02)
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        res = ex.result(ex.submit(Job(node_id=1, workdir=node, timeout=300, output_cap=cap)))
        times.append(time.perf_counter() - t)
        assert res.status == "ok", res.output[-500:]
    return statistics.median(times)


def _median_eval(node: Path, images: Path, labels: Path, sandbox: Sandbox) -> float:
    times = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        out = evaluate(node, "solution.py", images, labels, timeout=300, sandbox=sandbox, memory_limit_mb=4096)
        times.append(time.perf_counter() - t)
        assert out.verdict == "ok", out.reason
    return statistics.median(times)


def _heldout(root: Path, n: int = 656) -> tuple[Path, Path]:
    from PIL import Image

    images = root / "heldout" / "images"
    images.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for i in range(n):
        Image.fromarray(rng.integers(0, 255, (32, 32, 3), dtype=np.uint8)).save(images / f"{i:06d}.png")
    labels = root / "heldout" / "labels.csv"
    pd.DataFrame({"file": [f"{i:06d}.png" for i in range(n)], "label": [i % 2 for i in range(n)],
                  "group": [f"group_{i % 3}" for i in range(n)]}).to_csv(labels, index=False)
    return images, labels


def _plain_pipe_seconds() -> float:
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", FLOOD], stdout=subprocess.PIPE)
    while proc.stdout.read(65536):
        pass
    proc.wait()
    return time.perf_counter() - t


def run() -> list[dict]:
    if not check().available:
        return [{"name": "sandbox unavailable here", "value": 0, "unit": "", "note": check().explain()}]
    rows: list[dict] = []
    none, bwrap = Sandbox("none"), Sandbox.create("bwrap")
    with tempfile.TemporaryDirectory(prefix="befair-bench-sandbox-") as tmp:
        root = Path(tmp)
        for label, code, node_id in (("trivial script", "print('ok')\n", 1), ("numpy+pandas+torch import", IMPORTS, 2)):
            node = _node(root, code, node_id)
            base, boxed = _median_exec(node, none), _median_exec(node, bwrap)
            rows.append({"name": f"execution, {label}: unsandboxed", "value": base, "unit": "s"})
            rows.append({"name": f"execution, {label}: bubblewrap", "value": boxed, "unit": "s",
                         "reference": "unsandboxed", "ratio": boxed / base})
            rows.append({"name": f"execution, {label}: added by the sandbox", "value": boxed - base, "unit": "s",
                         "note": "target < 0.3 s"})
        node = _node(root, PREDICT, 3)
        images, labels = _heldout(root)
        base, boxed = _median_eval(node, images, labels, none), _median_eval(node, images, labels, bwrap)
        rows.append({"name": "evaluation, 656 images: unsandboxed", "value": base, "unit": "s"})
        rows.append({"name": "evaluation, 656 images: bubblewrap", "value": boxed, "unit": "s",
                     "reference": "unsandboxed", "ratio": boxed / base})
        rows.append({"name": "evaluation: added by the sandbox", "value": boxed - base, "unit": "s"})
        flood = _node(root, FLOOD, 4)
        plain = _plain_pipe_seconds()
        ex = LocalExecutor(sandbox=bwrap)
        t = time.perf_counter()
        res = ex.result(ex.submit(Job(node_id=4, workdir=flood, timeout=600, output_cap=200_000)))
        collected = time.perf_counter() - t
        rows.append({"name": f"output flood {FLOOD_MB} MB: plain pipe read", "value": plain, "unit": "s"})
        rows.append({"name": f"output flood {FLOOD_MB} MB: executor (sandboxed, capped)", "value": collected,
                     "unit": "s", "reference": "plain pipe read", "ratio": collected / plain,
                     "note": f"{res.output_chars / collected / 1e6:.0f} MB/s; status {res.status}"})
    return rows
