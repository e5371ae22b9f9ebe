"""Near-duplicate detection at scale: the process pool hashes exactly as one process does, in
order, and names an unreadable image; the half-matrix candidate search finds the same pairs as
the full matrix."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from engine.data.cleaning import NEAR_THRESHOLD, hash_images, near_pairs
from engine.errors import DataError


def _images(folder, n):
    rng = np.random.default_rng(1)
    folder.mkdir()
    paths = []
    for i in range(n):
        small = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
        p = folder / f"{i:03d}.jpg"
        Image.fromarray(small).resize((48, 48), Image.Resampling.BICUBIC).save(p, quality=80)
        paths.append(p)
    return paths


def test_pool_hashing_equals_serial_hashing(tmp_path):
    paths = _images(tmp_path / "i", 40)
    serial = hash_images(paths, workers=1)
    from engine.data.cleaning import _hash_in_pool

    pooled = _hash_in_pool(paths, 2)
    assert np.array_equal(serial[0], pooled[0]) and np.allclose(serial[1], pooled[1])


def test_pool_names_an_unreadable_image(tmp_path):
    paths = _images(tmp_path / "i", 10)
    paths[7].write_bytes(b"not a jpeg")
    from engine.data.cleaning import _hash_in_pool

    with pytest.raises(DataError, match="007.jpg"):
        _hash_in_pool(paths, 2)


def test_half_matrix_search_finds_the_full_matrix_pairs():
    rng = np.random.default_rng(3)
    base = rng.integers(0, 2**63, (300, 2), dtype=np.uint64)
    hashes = np.concatenate([base, base[:40] ^ np.uint64(0b1011)])  # 40 near copies (3 bits apart)
    found = {tuple(p) for p in near_pairs(hashes, NEAR_THRESHOLD, chunk=64).tolist()}
    d = (np.bitwise_count(hashes[:, None, 0] ^ hashes[None, :, 0]).astype(int)
         + np.bitwise_count(hashes[:, None, 1] ^ hashes[None, :, 1]))
    i, j = np.nonzero(np.triu(d <= NEAR_THRESHOLD, k=1))
    assert found == set(zip(i.tolist(), j.tolist(), strict=True))
    assert {(k, 300 + k) for k in range(40)} <= found
