"""Data benchmarks: SynthDerm generation speed (images/s) at the default size, dedup hashing rate."""
from __future__ import annotations

import tempfile
import time
from pathlib import Path


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
    return rows


if __name__ == "__main__":
    for r in run():
        print(r)
