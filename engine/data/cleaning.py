"""MEDFAIR cleaning variants for Fitzpatrick17k: none, filtered (neoplastic only), dedup.

`dedup` follows Fitzpatrick17k-C (Abhishek et al.): with a keep-list file (the md5hashes of the
cleaned set, as a CSV with an md5hash column or one hash per line) it keeps exactly those rows;
without one it finds exact duplicates (byte-identical files) and near duplicates (perceptual hash
within a Hamming distance) and keeps one image per cluster.
"""
from __future__ import annotations

import hashlib
import multiprocessing
import os
import re
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from PIL import Image

from engine.data.common import UNREADABLE_IMAGE, image_error
from engine.errors import DataError

VARIANTS = ("none", "filtered", "dedup")
HASH_BITS = 128
NEAR_THRESHOLD = 20  # Hamming distance (of 128 bits) for a candidate pair
MIN_CORRELATION = 0.97  # thumbnail correlation that confirms a candidate as the same photograph
_HEX32 = re.compile(r"^[0-9a-fA-F]{32}$")


@dataclass
class CleanReport:
    variant: str
    rows_in: int
    rows_out: int
    removed: dict[str, int] = field(default_factory=dict)   # reason -> rows removed
    clusters: int = 0                                        # duplicate clusters found (dedup)
    conflicting_clusters: int = 0                            # clusters whose labels disagree
    method: str = ""

    def summary(self) -> str:
        why = ", ".join(f"{n} {k}" for k, n in self.removed.items() if n) or "nothing"
        return f"{self.variant}: {self.rows_in} -> {self.rows_out} rows (removed {why})"


def _partition(df: pd.DataFrame) -> pd.Series:
    if "three_partition_label" in df.columns:
        return df["three_partition_label"]
    if "label" in df.columns and df["label"].isin(["benign", "malignant", "non-neoplastic"]).all():
        return df["label"]
    raise DataError("cleaning needs a three_partition_label column (or the obfuscated label column)")


def _image_files(df: pd.DataFrame, images_dir: Path) -> list[Path]:
    if "md5hash" in df.columns:
        names = df["md5hash"].astype(str)
    elif "image_name" in df.columns:
        names = df["image_name"].astype(str)
    else:
        raise DataError("cleaning needs an md5hash (or image_name) column to find the images")
    return [images_dir / f"{n}.jpg" for n in names]


def read_keep_list(path: Path | str) -> set[str]:
    """md5hashes from a Fitzpatrick17k-C style file: a CSV with an md5hash column, or one per line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"keep-list not found: {path}")
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    if not text:
        raise DataError(f"keep-list is empty: {path}")
    head = [h.strip().strip('"') for h in text[0].split(",")]
    if "md5hash" in head:
        col = head.index("md5hash")
        hashes = {line.split(",")[col].strip().strip('"') for line in text[1:] if line.strip()}
    else:
        hashes = {line.split(",")[0].strip().strip('"') for line in text if line.strip()}
    bad = [h for h in hashes if not _HEX32.match(h)]
    if bad and len(bad) == len(hashes):
        raise DataError(f"keep-list {path} holds no md5hashes (first entry: {bad[0]!r})")
    return {h.lower() for h in hashes if _HEX32.match(h)}


# ----------------------------------------------------------------------------- perceptual hash


def dhash(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(128-bit difference hash as 2 uint64, normalised 16x16 greyscale thumbnail) of one image.

    The hash (horizontal + vertical gradient signs of an 8x8 greyscale) finds candidate pairs
    cheaply; the thumbnail's correlation confirms them (skin photographs with one central lesion
    share coarse structure, so the hash alone confuses distinct images).
    """
    with Image.open(path) as im:
        im.draft("L", (64, 64))          # fast JPEG decode at reduced scale
        g = im.convert("L")
        h = np.asarray(g.resize((9, 8), Image.Resampling.BOX), np.int16)
        v = np.asarray(g.resize((8, 9), Image.Resampling.BOX), np.int16)
        t = np.asarray(g.resize((16, 16), Image.Resampling.BOX), np.float32).ravel()
    bits = np.concatenate([(h[:, 1:] > h[:, :-1]).ravel(), (v[1:, :] > v[:-1, :]).ravel()])
    t = t - t.mean()
    return np.packbits(bits).view(">u8").astype(np.uint64), t / (np.linalg.norm(t) + 1e-6)


_PARALLEL_FROM = 2000  # images: below this a process pool costs more than it saves


def hash_images(paths: list[Path], workers: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """((n, 2) uint64 hashes, (n, 256) thumbnails); raises DataError naming an unreadable image.
    Large sets are hashed by a pool of processes, one per CPU (`workers`), in order."""
    workers = workers if workers is not None else (os.cpu_count() or 1)
    if workers > 1 and len(paths) >= _PARALLEL_FROM:
        return _hash_in_pool(paths, workers)
    return _hash_serial(paths)


def _hash_in_pool(paths: list[Path], workers: int) -> tuple[np.ndarray, np.ndarray]:

    step = -(-len(paths) // (workers * 4))
    chunks = [paths[i:i + step] for i in range(0, len(paths), step)]
    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        parts = list(pool.map(_hash_serial, chunks))
    return np.concatenate([h for h, _ in parts]), np.concatenate([t for _, t in parts])


def _hash_serial(paths: list[Path]) -> tuple[np.ndarray, np.ndarray]:
    hashes = np.zeros((len(paths), 2), np.uint64)
    thumbs = np.zeros((len(paths), 256), np.float32)
    for i, p in enumerate(paths):
        try:
            hashes[i], thumbs[i] = dhash(p)
        except UNREADABLE_IMAGE as exc:
            raise image_error(p, exc) from None
        except OSError as exc:
            raise DataError(f"cannot read image {p}: {exc}") from None
    return hashes, thumbs


def near_pairs(hashes: np.ndarray, threshold: int = NEAR_THRESHOLD, chunk: int = 512,
               thumbs: np.ndarray | None = None, min_corr: float = MIN_CORRELATION) -> np.ndarray:
    """(m, 2) index pairs i < j whose hashes differ in at most `threshold` bits (and, given
    thumbnails, whose thumbnails correlate at least `min_corr`)."""
    n = len(hashes)
    pairs = []
    for s in range(0, n, chunk):
        a, rest = hashes[s:s + chunk], hashes[s:]  # only j >= s: half the comparisons
        d = (np.bitwise_count(a[:, None, 0] ^ rest[None, :, 0]).astype(np.int16)
             + np.bitwise_count(a[:, None, 1] ^ rest[None, :, 1]))
        i, j = np.nonzero(d <= threshold)
        i, j = i + s, j + s
        keep = i < j
        i, j = i[keep], j[keep]
        if thumbs is not None and len(i):
            ok = np.einsum("ij,ij->i", thumbs[i], thumbs[j]) >= min_corr
            i, j = i[ok], j[ok]
        pairs.append(np.stack([i, j], 1))
    return np.concatenate(pairs) if pairs else np.zeros((0, 2), int)


def _clusters(n: int, pairs: np.ndarray) -> np.ndarray:
    """Union-find: the root (smallest index) of each item's cluster."""
    parent = np.arange(n)

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    for a, b in pairs:
        ra, rb = find(int(a)), find(int(b))
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.array([find(i) for i in range(n)])


def find_duplicates(paths: list[Path], threshold: int = NEAR_THRESHOLD) -> tuple[np.ndarray, np.ndarray]:
    """(cluster root per image, exact flag per image: byte-identical to an earlier image)."""
    digests = []
    for p in paths:
        try:
            digests.append(hashlib.md5(Path(p).read_bytes()).hexdigest())
        except OSError as exc:
            raise DataError(f"cannot read image {p}: {exc.strerror or exc}") from None
    first: dict[str, int] = {}
    exact = np.zeros(len(paths), bool)
    root = np.arange(len(paths))
    for i, d in enumerate(digests):
        if d in first:
            exact[i] = True
            root[i] = first[d]
        else:
            first[d] = i
    uniq = np.array(sorted(first.values()))
    hashes, thumbs = hash_images([paths[i] for i in uniq])
    pairs = near_pairs(hashes, threshold, thumbs=thumbs)
    sub_root = _clusters(len(uniq), pairs)
    uroot = {int(u): int(uniq[r]) for u, r in zip(uniq, sub_root, strict=True)}
    final = np.array([uroot[int(root[i])] for i in range(len(paths))])
    return final, exact


# ----------------------------------------------------------------------------- clean


def clean(
    df: pd.DataFrame,
    variant: str,
    images_dir: Path | str | None = None,
    keep_list: Path | str | None = None,
    threshold: int = NEAR_THRESHOLD,
) -> tuple[pd.DataFrame, CleanReport]:
    """Apply a cleaning variant: (cleaned frame, report of what was removed and why)."""
    if variant not in VARIANTS:
        raise DataError(f"unknown cleaning variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    report = CleanReport(variant=variant, rows_in=len(df), rows_out=len(df))
    if variant == "none":
        report.method = "no cleaning"
        return df.copy(), report
    if variant == "filtered":
        part = _partition(df)
        out = df[part != "non-neoplastic"].copy()
        report.removed = {"non-neoplastic": len(df) - len(out)}
        report.method = "drop non-neoplastic rows"
        report.rows_out = len(out)
        return out, report
    # dedup
    if keep_list is not None:
        if "md5hash" not in df.columns:
            raise DataError("a keep-list needs the md5hash column")
        keep = read_keep_list(keep_list)
        mask = df["md5hash"].astype(str).str.lower().isin(keep)
        out = df[mask].copy()
        report.removed = {"not in keep-list": int((~mask).sum())}
        report.method = f"Fitzpatrick17k-C keep-list {Path(keep_list).name}"
        report.rows_out = len(out)
        return out, report
    folder = images_dir if images_dir is not None else df.attrs.get("images_dir")
    if folder is None:
        raise DataError("dedup without a keep-list needs the image folder (images_dir)")
    paths = _image_files(df, Path(folder))
    root, exact = find_duplicates(paths, threshold)
    first_of_cluster = root == np.arange(len(df))
    drop_exact = exact
    drop_near = ~first_of_cluster & ~exact
    part = _partition(df).to_numpy()
    sizes = pd.Series(root).value_counts()
    multi = sizes[sizes > 1].index.to_numpy()
    report.clusters = int(len(multi))
    report.conflicting_clusters = int(sum(len(set(part[root == r])) > 1 for r in multi))
    out = df[first_of_cluster].copy()
    report.removed = {"exact duplicates": int(drop_exact.sum()), "near duplicates": int(drop_near.sum())}
    report.method = (f"byte-identical files + {HASH_BITS}-bit dHash within {threshold} bits, "
                     f"confirmed by thumbnail correlation >= {MIN_CORRELATION}")
    report.rows_out = len(out)
    return out, report
