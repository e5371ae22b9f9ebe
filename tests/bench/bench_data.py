"""Data benchmarks: SynthDerm generation speed (images/s) at the default size, dedup hashing rate,
and near-duplicate detection on 16.5k images (the study's Fitzpatrick17k size).

dedup 16.5k: 16,500 generated 256 px JPEGs (smooth random photographs; every 20th a resized,
recompressed copy of an earlier one), through `find_duplicates` (md5, perceptual hashes in a
process pool, candidate pairs, thumbnail confirmation, clusters). Reference: the previous method
(one process hashing, the full n x n distance matrix) timed on a quarter of the set in the same
run and extrapolated (hashing x 4, pairs x 16).
"""
from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numpy as np

DEDUP_N = int(os.environ.get("BEFAIR_BENCH_DEDUP_N", "16500"))


def _photographs(folder: Path, n: int) -> list[Path]:
    from PIL import Image

    rng = np.random.default_rng(0)
    folder.mkdir(parents=True)
    paths: list[Path] = []
    for i in range(n):
        p = folder / f"{i:05d}.jpg"
        if i % 20 == 19:
            with Image.open(paths[int(rng.integers(0, i - 1))]) as src:
                src.resize((240, 240)).save(p, quality=70)
        else:
            small = rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)
            Image.fromarray(small).resize((256, 256), Image.Resampling.BICUBIC).save(p, quality=85)
        paths.append(p)
    return paths


def _all_pairs_matrix(hashes: np.ndarray, threshold: int) -> int:
    """The previous candidate search: every row against every image (n x n)."""
    found = 0
    for s in range(0, len(hashes), 512):
        a = hashes[s:s + 512]
        d = (np.bitwise_count(a[:, None, 0] ^ hashes[None, :, 0]).astype(np.int16)
             + np.bitwise_count(a[:, None, 1] ^ hashes[None, :, 1]))
        found += int((d <= threshold).sum())
    return found


def dedup_rows(tmp: Path) -> list[dict]:
    from engine.data.cleaning import NEAR_THRESHOLD, find_duplicates, hash_images

    paths = _photographs(tmp / "dedup", DEDUP_N)
    quarter = paths[: DEDUP_N // 4]
    t0 = time.perf_counter()
    hashes, _ = hash_images(quarter, workers=1)
    t1 = time.perf_counter()
    _all_pairs_matrix(hashes, NEAR_THRESHOLD)
    t2 = time.perf_counter()
    before = (t1 - t0) * len(paths) / len(quarter) + (t2 - t1) * (len(paths) / len(quarter)) ** 2
    started = time.perf_counter()
    root, exact = find_duplicates(paths)
    took = time.perf_counter() - started
    near = int((root != np.arange(len(paths))).sum() - exact.sum())
    return [{"name": f"dedup near-duplicate detection, {len(paths):,} images", "value": took, "unit": "s",
             "reference": "previous method (serial hashing, n x n matrix), extrapolated from a quarter",
             "ratio": took / before,
             "note": f"{near} near duplicates found of {len(paths) // 20} planted; previous method est. "
                     f"{before:.1f} s; {os.cpu_count()} CPUs"}]


def run() -> list[dict]:
    from engine.data.cleaning import clean, hash_images
    from engine.data.fitzpatrick import load_fitzpatrick
    from engine.data.synth import DEFAULTS, generate

    rows = []
    size = DEFAULTS["size"]
    with tempfile.TemporaryDirectory() as tmp:
        n_train, n_test = 1000, 328
        t0 = time.perf_counter()
        paths = generate(Path(tmp) / "s", seed=0, n_train=n_train, n_test=n_test, size=size)
        total = time.perf_counter() - t0
        # time the two phases separately: regenerate the test set alone
        t1 = time.perf_counter()
        generate(Path(tmp) / "t", seed=0, n_train=21, n_test=n_test, size=size)
        test_s = time.perf_counter() - t1
        train_s = max(total - test_s, 1e-9)
        rows.append(dict(name=f"SynthDerm train images ({size}px JPEG, atlas style)", value=n_train / train_s,
                         unit="images/s"))
        rows.append(dict(name=f"SynthDerm test images ({size}px PNG, standardised)", value=n_test / test_s,
                         unit="images/s"))
        rows.append(dict(name="SynthDerm default set (2000 + 656) estimated time",
                         value=2000 / (n_train / train_s) + 656 / (n_test / test_s), unit="s"))
        imgs = [paths.train_images / f"{h}.jpg" for h in load_fitzpatrick(paths.train_csv, check_images=False).md5hash]
        t2 = time.perf_counter()
        hash_images(imgs)
        rows.append(dict(name="dedup perceptual hashing", value=len(imgs) / (time.perf_counter() - t2),
                         unit="images/s"))
        df = load_fitzpatrick(paths.train_csv, check_images=False)
        t3 = time.perf_counter()
        _, rep = clean(df, "dedup", images_dir=paths.train_images)
        rows.append(dict(name=f"dedup clean of {len(df)} rows (hash + pairs + clusters)",
                         value=len(df) / (time.perf_counter() - t3), unit="rows/s",
                         note=rep.summary()))
        rows += dedup_rows(Path(tmp))
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
