"""Training throughput of the baselines' loop against a MEDFAIR-style reference loop.

Both loops train the same model (torchvision ResNet-18, single logit, Adam lr 1e-4 / wd 1e-4,
BCE with logits) on the same SynthDerm images with the same batch size, on the same machine, in
separate processes (so each gets its own peak RSS):

* reference ("MEDFAIR-style"): a Dataset that opens and decodes each image with PIL and applies
  torchvision's Resize / RandomHorizontalFlip / RandomRotation(15) / RandomCrop / ToTensor /
  Normalize per sample, every epoch, through a DataLoader (num_workers = min(8, cpus - 1),
  pin_memory on CUDA), as MEDFAIR's datasets/utils.py builds it;
* ours (baselines.core): the images decoded once into a cached uint8 store (decode time reported
  separately), batches augmented on the device (one affine grid_sample per batch), channels_last
  and bf16 autocast on CUDA, the store kept on the GPU.

CPU: a few hundred images at 56 px (stored 64), one epoch each, after a short warm-up.
CUDA: additionally ResNet-18 at 224 (stored 256) for both loops, and the pure-compute ceiling:
the same training step on random tensors already on the GPU.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import resource
import time

N_CPU_IMAGES = int(os.environ.get("BEFAIR_BENCH_TRAIN_N", "256"))
CPU_SIZE = 56
GPU_SIZE = 224
N_GPU_IMAGES = 2048
BATCH = 64
WARMUP_BATCHES = 2


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def _data(n: int, image_px: int) -> tuple[list[str], list[int]]:
    import pandas as pd

    from engine.data.synth import generate, is_complete
    from engine.paths import cache_dir

    root = cache_dir() / "bench" / f"synth-train-{n}-{image_px}"
    n_test = 18
    if not is_complete(root, n_train=n, n_test=n_test):
        generate(root, seed=3, n_train=n, n_test=n_test, size=image_px)
    df = pd.read_csv(root / "train" / "fitzpatrick17k.csv")
    paths = [str(root / "train" / "images" / f"{h}.jpg") for h in df["md5hash"]]
    labels = (df["three_partition_label"] == "malignant").astype(int).tolist()
    return paths, labels


def _model(device):
    import torch

    from baselines import core

    torch.manual_seed(0)
    model, _ = core.build_model("random")
    model = core.prepare_model(model, device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4, weight_decay=1e-4)
    return model, opt


def _sync(device):
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


class _PILDataset:
    """MEDFAIR-style: open + decode + transform one image per __getitem__ (map-style dataset)."""

    def __init__(self, paths, labels, transform):
        self.paths, self.labels, self.transform = paths, labels, transform

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        import torch
        from PIL import Image

        with Image.open(self.paths[i]) as im:
            img = im.convert("RGB")
        return self.transform(img), torch.tensor(float(self.labels[i]))


def _reference(paths, labels, size, device_name, threads, out):
    """MEDFAIR's way: PIL decode + torchvision transforms per sample, every epoch."""
    import torch
    import torch.nn.functional as F
    from torchvision import transforms

    from baselines import core

    if threads:
        torch.set_num_threads(threads)
    device = torch.device(device_name)
    resize = core.resize_for(size)
    tf = transforms.Compose([
        transforms.Resize(resize), transforms.RandomHorizontalFlip(), transforms.RandomRotation((-15, 15)),
        transforms.RandomCrop((size, size)), transforms.ToTensor(),
        transforms.Normalize(core.IMAGENET_MEAN, core.IMAGENET_STD),
    ])

    workers = min(8, max(0, (os.cpu_count() or 1) - 1))
    loader = torch.utils.data.DataLoader(_PILDataset(paths, labels, tf), batch_size=BATCH, shuffle=True,
                                         num_workers=workers, pin_memory=device.type == "cuda", drop_last=False,
                                         persistent_workers=False)
    model, opt = _model(device)
    model.train()

    def step(x, y):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        if device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with core._autocast(device):
            logits = model(x).float().squeeze(1)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    # warm-up (cudnn autotune, allocator) on a couple of batches, not timed
    for i, (x, y) in enumerate(loader):
        step(x, y)
        if i + 1 >= WARMUP_BATCHES:
            break
    _sync(device)
    t0 = time.perf_counter()
    n = 0
    for x, y in loader:
        step(x, y)
        n += x.shape[0]
    _sync(device)
    dt = time.perf_counter() - t0
    out.put({"epoch_s": dt, "images_per_s": n / dt, "peak_rss_mb": _rss_mb(),
             "peak_gpu_mb": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None,
             "workers": workers})


def _ours(paths, labels, size, device_name, threads, out):
    import torch

    from baselines import core
    from baselines.tensor_cache import load_store

    if threads:
        torch.set_num_threads(threads)
    device = torch.device(device_name)
    if device.type == "cuda":
        torch.backends.cudnn.benchmark = True
    resize = core.resize_for(size)
    t0 = time.perf_counter()
    info: dict = {}
    store = load_store(paths, resize, info=info)
    decode_s = time.perf_counter() - t0
    if device.type == "cuda":
        store = store.to(device)
    y = torch.tensor(labels, dtype=torch.float32, device=store.device)
    model, opt = _model(device)
    gen = torch.Generator().manual_seed(0)
    core.train_epoch(model, opt, store[: BATCH * WARMUP_BATCHES], y[: BATCH * WARMUP_BATCHES], size=size,
                     batch_size=BATCH, device=device, generator=gen)
    _sync(device)
    t0 = time.perf_counter()
    core.train_epoch(model, opt, store, y, size=size, batch_size=BATCH, device=device, generator=gen)
    _sync(device)
    dt = time.perf_counter() - t0
    out.put({"epoch_s": dt, "images_per_s": len(paths) / dt, "decode_s": decode_s, "cache_hit": info.get("hit"),
             "peak_rss_mb": _rss_mb(),
             "peak_gpu_mb": torch.cuda.max_memory_allocated(device) / 2**20 if device.type == "cuda" else None})


def _ceiling(size, device_name, steps, out):
    """Pure compute: the same training step on random tensors already on the GPU."""
    import torch
    import torch.nn.functional as F

    from baselines import core

    device = torch.device(device_name)
    torch.backends.cudnn.benchmark = True
    model, opt = _model(device)
    x = torch.randn(BATCH, 3, size, size, device=device).contiguous(memory_format=torch.channels_last)
    y = (torch.rand(BATCH, device=device) > 0.8).float()

    def step():
        with core._autocast(device):
            logits = model(x).float().squeeze(1)
        loss = F.binary_cross_entropy_with_logits(logits, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(5):
        step()
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(steps):
        step()
    _sync(device)
    dt = time.perf_counter() - t0
    out.put({"images_per_s": steps * BATCH / dt})


def _in_process(fn, *args) -> dict:
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=fn, args=(*args, q))
    p.start()
    try:
        result = q.get(timeout=900)
    finally:
        p.join(timeout=60)
    if p.exitcode not in (0, None):
        raise RuntimeError(f"{fn.__name__} exited with {p.exitcode}")
    return result


def _compare(label: str, paths, labels, size, device_name, threads) -> list[dict]:
    ref = _in_process(_reference, paths, labels, size, device_name, threads)
    ours = _in_process(_ours, paths, labels, size, device_name, threads)
    ref_name = f"MEDFAIR-style loop ({label})"
    rows = [
        {"name": f"train images/s, ours ({label})", "value": ours["images_per_s"], "unit": "img/s",
         "reference": ref_name, "ratio": ours["images_per_s"] / ref["images_per_s"],
         "note": f"{len(paths)} images, batch {BATCH}"},
        {"name": f"train images/s, MEDFAIR-style ({label})", "value": ref["images_per_s"], "unit": "img/s",
         "note": f"DataLoader num_workers={ref['workers']}"},
        {"name": f"time per epoch, ours ({label})", "value": ours["epoch_s"], "unit": "s",
         "reference": ref_name, "ratio": ref["epoch_s"] / ours["epoch_s"], "note": "ratio = reference / ours"},
        {"name": f"time per epoch, MEDFAIR-style ({label})", "value": ref["epoch_s"], "unit": "s"},
        {"name": f"one-off decode into the tensor store ({label})", "value": ours["decode_s"], "unit": "s",
         "note": "cache hit" if ours.get("cache_hit") else "first decode, now cached"},
        {"name": f"peak RSS, ours ({label})", "value": ours["peak_rss_mb"], "unit": "MiB",
         "reference": ref_name, "ratio": ours["peak_rss_mb"] / ref["peak_rss_mb"],
         "note": "training process only (reference: main process, excluding workers)"},
        {"name": f"peak RSS, MEDFAIR-style ({label})", "value": ref["peak_rss_mb"], "unit": "MiB"},
    ]
    if ours.get("peak_gpu_mb"):
        rows.append({"name": f"peak GPU memory, ours ({label})", "value": ours["peak_gpu_mb"], "unit": "MiB",
                     "reference": ref_name, "ratio": ours["peak_gpu_mb"] / ref["peak_gpu_mb"],
                     "note": "includes the uint8 image store on the GPU"})
    return rows


def run() -> list[dict]:
    import torch

    threads = int(os.environ.get("BEFAIR_BENCH_THREADS", "0")) or None
    paths, labels = _data(N_CPU_IMAGES, 64)
    rows = _compare(f"cpu, {CPU_SIZE}px", paths, labels, CPU_SIZE, "cpu", threads)
    if torch.cuda.is_available():
        gpaths, glabels = _data(N_GPU_IMAGES, 256)
        rows += _compare(f"cuda, {GPU_SIZE}px", gpaths, glabels, GPU_SIZE, "cuda", None)
        ceil = _in_process(_ceiling, GPU_SIZE, "cuda", 60)
        ours = next(r for r in rows if r["name"] == f"train images/s, ours (cuda, {GPU_SIZE}px)")
        rows.append({"name": f"pure-compute ceiling (cuda, {GPU_SIZE}px, random tensors)",
                     "value": ceil["images_per_s"], "unit": "img/s"})
        rows.append({"name": f"ours as a share of the ceiling (cuda, {GPU_SIZE}px)",
                     "value": ours["value"] / ceil["images_per_s"], "unit": "x",
                     "reference": "pure-compute ceiling", "ratio": ours["value"] / ceil["images_per_s"]})
    return rows


if __name__ == "__main__":  # pragma: no cover
    for r in run():
        print(r)
