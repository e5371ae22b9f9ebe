"""Harness scoring throughput (images/s) against a naive per-image loop on the same model.

A small torch CNN is saved in a node's working/ folder; its solution.py's predict reads the images
in batches. We time `engine.evaluation.harness.evaluate` end to end on 656 images (DDI's test
set): with the warm worker (a fork of a pre-imported worker inside bubblewrap: what a session's
second and later evaluations cost), with a fresh process per evaluation, and the same model applied
the naive way: in this process, one PIL open and one single-image forward per image. On a CUDA
machine we also time the warm harness on the GPU.
"""
from __future__ import annotations

import os
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pandas as pd

N_IMAGES = int(os.environ.get("BEFAIR_BENCH_HARNESS_N", "656"))  # DDI's test set
SIZE = 64
NAIVE_N = 256  # the naive loop's rate is per image: time it on the first 256 to stay brief

MODEL_SRC = '''
import torch
from torch import nn

class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, 1)

    def forward(self, x):
        return self.head(self.features(x).flatten(1)).squeeze(1)
'''

SOLUTION = MODEL_SRC + '''
import os
import numpy as np
from PIL import Image

def _device():
    want = os.environ.get("BEFAIR_DEVICE")
    if want:
        return torch.device(want)
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")

def predict(folder, batch_size=128):
    device = _device()
    model = Net()
    model.load_state_dict(torch.load(os.path.join("working", "model.pt"), map_location="cpu"))
    model.to(device).eval()
    names = sorted(f for f in os.listdir(folder) if f.endswith(".png"))
    out = {}
    with torch.inference_mode():
        for i in range(0, len(names), batch_size):
            chunk = names[i:i + batch_size]
            arr = np.stack([np.asarray(Image.open(os.path.join(folder, n)).convert("RGB")) for n in chunk])
            x = torch.from_numpy(arr).to(device).permute(0, 3, 1, 2).float().div_(255.0)
            p = torch.sigmoid(model(x)).cpu().numpy()
            out.update(zip(chunk, p.tolist()))
    return out

if __name__ == "__main__":
    torch.manual_seed(0)
    os.makedirs("working", exist_ok=True)
    torch.save(Net().state_dict(), os.path.join("working", "model.pt"))
'''


def _make_images(folder: Path, n: int) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    rows = []
    for i in range(n):
        arr = rng.integers(0, 256, (SIZE, SIZE, 3), dtype=np.uint8)
        name = f"{i:06d}.png"
        Image.fromarray(arr).save(folder / name)
        rows.append({"file": name, "label": i % 2, "group": f"group_{i % 3}"})
    labels = folder.parent / "labels.csv"
    pd.DataFrame(rows).to_csv(labels, index=False)
    return labels


def _naive(node: Path, images: Path, n: int) -> float:
    """The same model, one PIL open and one single-image forward per image, in-process."""
    import torch
    from PIL import Image

    ns: dict = {}
    exec(MODEL_SRC, ns)
    model = ns["Net"]()
    model.load_state_dict(torch.load(node / "working" / "model.pt", map_location="cpu"))
    model.eval()
    started = time.perf_counter()
    out = {}
    with torch.no_grad():
        for name in sorted(os.listdir(images))[:n]:
            img = np.asarray(Image.open(images / name).convert("RGB"), dtype=np.float32) / 255.0
            x = torch.from_numpy(img).permute(2, 0, 1).unsqueeze(0)
            out[name] = float(torch.sigmoid(model(x))[0])
    return time.perf_counter() - started


def _timed_evals(node: Path, images: Path, labels: Path, n: int, **kw) -> list[float]:
    from engine.evaluation.harness import evaluate

    times = []
    for _ in range(n):
        out = evaluate(node, "solution.py", images, labels, timeout=300, **kw)
        assert out.ok, out.reason
        times.append(out.elapsed)
    return times


def run() -> list[dict]:
    import statistics

    import torch

    from engine.evaluation.warm_worker import close_warm_workers

    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="befair-bench-") as tmp:
        tmp = Path(tmp)
        node = tmp / "node"
        (node / "working").mkdir(parents=True)
        (node / "solution.py").write_text(textwrap.dedent(SOLUTION))
        ns: dict = {}
        exec(MODEL_SRC, ns)  # what `python solution.py` would save, without a second torch start
        torch.manual_seed(0)
        torch.save(ns["Net"]().state_dict(), node / "working" / "model.pt")
        images = tmp / "heldout" / "images"
        labels = _make_images(images, N_IMAGES)

        naive_n = min(N_IMAGES, NAIVE_N)
        naive_rate = naive_n / _naive(node, images, naive_n)
        fresh = statistics.median(_timed_evals(node, images, labels, 3, device="cpu", warm=False))
        close_warm_workers()
        start = _timed_evals(node, images, labels, 1, device="cpu", warm=True)[0]
        warm = statistics.median(_timed_evals(node, images, labels, 3, device="cpu", warm=True))
        rows.append({
            "name": f"harness end-to-end, warm sandboxed worker ({N_IMAGES} {SIZE}px images, CPU)",
            "value": N_IMAGES / warm, "unit": "images/s", "reference": "naive per-image PIL + forward loop",
            "ratio": N_IMAGES / warm / naive_rate,
            "note": f"{warm:.2f} s per evaluation, median of 3: fork of a pre-imported worker in bubblewrap, "
                    "staging, solution import, model load, predict, scoring",
        })
        rows.append({
            "name": f"harness end-to-end, fresh process per evaluation ({N_IMAGES} images, CPU)",
            "value": N_IMAGES / fresh, "unit": "images/s", "reference": "naive per-image PIL + forward loop",
            "ratio": N_IMAGES / fresh / naive_rate,
            "note": f"{fresh:.2f} s per evaluation, median of 3 (sandbox start, Python start, torch import)",
        })
        rows.append({"name": "harness first evaluation of a session (starts the warm worker)", "value": start,
                     "unit": "s", "reference": "fresh process per evaluation", "ratio": start / fresh})
        rows.append({"name": "naive per-image loop, CPU, in-process", "value": naive_rate, "unit": "images/s",
                     "note": f"{naive_n} images, one PIL open + one single-image forward each"})

        if torch.cuda.is_available():
            sub = tmp / "ddi656" / "images"
            labels656 = _make_images(sub, 656)
            _timed_evals(node, sub, labels656, 1, device="cuda")  # starts the worker, warms caches
            gpu = statistics.median(_timed_evals(node, sub, labels656, 3, device="cuda"))
            rows.append({"name": "harness end-to-end, GPU, 656 images, warm", "value": gpu, "unit": "s",
                         "note": torch.cuda.get_device_name(0) + ", median of 3"})
        else:
            print("  CUDA unavailable: no GPU figure for the 656-image set")
        close_warm_workers()
    return rows


if __name__ == "__main__":
    for row in run():
        print(row)
