"""Decode each image once: a cached uint8 tensor store at the working resolution.

`load_store(paths, resize)` returns an N x 3 x resize x resize uint8 tensor in the order of
`paths`. The store is saved as a ``.pt`` file keyed by the images' *content* (a BLAKE2 digest of
every file's bytes, in order) and the resolution, so renamed copies of the same images share a
store and an edited image never reuses a stale one. It lives in the befair cache
(``engine.paths.cache_dir()/tensors``), never in the user's data folder.

Decoding uses a pool of processes for large sets (PIL releases little of the GIL on JPEG).
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from baselines.core import decode_image, decode_images
from engine.paths import cache_dir

STORE_VERSION = 1  # bump when decode_image changes
_PARALLEL_MIN = 512


def content_key(paths: Sequence[str | os.PathLike[str]], resize: int) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"v{STORE_VERSION}:{resize}:{len(paths)}".encode())
    for p in paths:
        with open(p, "rb") as fh:
            h.update(hashlib.blake2b(fh.read(), digest_size=16).digest())
    return h.hexdigest()


def _store_dirs(paths: Sequence[str | os.PathLike[str]]) -> list[Path]:
    return [cache_dir() / "tensors"]  # never the user's data folder


def _decode_chunk(args: tuple[list[str], int]) -> np.ndarray:
    paths, resize = args
    return decode_images(paths, resize).numpy()


def decode_all(paths: Sequence[str | os.PathLike[str]], resize: int, workers: int | None = None) -> torch.Tensor:
    paths = [str(p) for p in paths]
    workers = workers if workers is not None else min(8, os.cpu_count() or 1)
    if workers <= 1 or len(paths) < _PARALLEL_MIN:
        return decode_images(paths, resize)
    chunk = max(64, len(paths) // (workers * 4))
    parts = [(paths[i:i + chunk], resize) for i in range(0, len(paths), chunk)]
    with ProcessPoolExecutor(workers) as pool:
        arrays = list(pool.map(_decode_chunk, parts))
    return torch.from_numpy(np.concatenate(arrays)) if arrays else decode_images([], resize)


def store_path(paths: Sequence[str | os.PathLike[str]], resize: int) -> Path | None:
    """Where the store for these images is (None if it has not been built)."""
    key = content_key(paths, resize)
    for d in _store_dirs(paths):
        f = d / f"{key}.pt"
        if f.is_file():
            return f
    return None


def load_store(paths: Sequence[str | os.PathLike[str]], resize: int, *, cache: bool = True,
               info: dict[str, Any] | None = None) -> torch.Tensor:
    """The uint8 store for `paths` at `resize`; decoded and saved on first use.
    `info`, when given, receives {"path", "hit", "key"}."""
    paths = [str(p) for p in paths]
    key = content_key(paths, resize)
    if cache:
        for d in _store_dirs(paths):
            f = d / f"{key}.pt"
            if f.is_file():
                try:
                    t: torch.Tensor = torch.load(f, map_location="cpu", weights_only=True)
                except Exception:
                    continue
                if tuple(t.shape) == (len(paths), 3, resize, resize) and t.dtype == torch.uint8:
                    if info is not None:
                        info.update(path=str(f), hit=True, key=key)
                    return t
    t = decode_all(paths, resize)
    saved = None
    if cache:
        for d in _store_dirs(paths):
            try:
                d.mkdir(parents=True, exist_ok=True)
                fd, tmp = tempfile.mkstemp(dir=d, suffix=".part")
                os.close(fd)
                torch.save(t, tmp)
                os.replace(tmp, d / f"{key}.pt")
                saved = d / f"{key}.pt"
                break
            except OSError:
                continue
    if info is not None:
        info.update(path=str(saved) if saved else None, hit=False, key=key)
    return t


__all__ = ["content_key", "decode_all", "decode_image", "load_store", "store_path"]
