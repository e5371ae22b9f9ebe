"""SynthDerm: a seeded generator of skin-lesion images in the Fitzpatrick17k and DDI formats.

Training set (Fitzpatrick17k format, web-atlas style):
    out/train/fitzpatrick17k.csv            the real 9-column header
    out/train/images/<md5hash>.jpg          varied lighting, white balance, zoom, JPEG quality
    out/train/synthderm_truth.csv           generator ground truth (not part of the format):
                                            rendered class, planted duplicates, flipped labels
    out/train/fitzpatrick17k_c_keep.csv     a Fitzpatrick17k-C style keep-list (md5hash column):
                                            one row per duplicate cluster, wrong labels removed
Test set (DDI format, clinical style):
    out/test/ddi_metadata.csv               `,DDI_ID,DDI_file,skin_tone,malignant,disease`
    out/test/images/NNNNNN.png              standardised acquisition, lossless

Visual model. Skin is a Fitzpatrick-type base colour with low-frequency texture. A lesion is an
optical-density map (Beer-Lambert: pixel = skin * exp(-contrast * density * absorption)):
benign lesions are small, round, regular and uniform; malignant ones larger, asymmetric, with an
irregular border and colour variegation (black, blue-grey, red zones); non-neoplastic ones are
diffuse, soft-edged erythematous or hyperpigmented patches with scale. A latent "atypia" drawn per
lesion makes benign and malignant overlap. The lesion's contrast falls with darker skin
(`CONTRAST`), and sensor noise is additive in absolute terms, so cues fade on dark skin: a plain
classifier trained on the (light-skin dominated) training set ranks dark-skin lesions worse, and a
pipeline that normalises colour to the surrounding skin and reweights groups narrows the gap.

Everything is seeded: the same parameters give byte-identical CSVs and identical images.
"""
from __future__ import annotations

import csv
import hashlib
import io
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
from PIL import Image

from engine.data.formats import (
    DDI_GROUP_COUNTS,
    DDI_MALIGNANT_COUNTS,
    FITZ_COLUMNS,
    FITZ_JOINT,
    FITZ_ROWS,
)

FULL = dict(n_train=16577, n_test=656)
DEFAULTS = dict(seed=0, n_train=2000, n_test=656, size=96)

TRAIN_CSV = "fitzpatrick17k.csv"
TEST_CSV = "ddi_metadata.csv"
TRUTH_CSV = "synthderm_truth.csv"
KEEP_LIST = "fitzpatrick17k_c_keep.csv"

# sRGB-ish skin base colours for Fitzpatrick types I..VI.
SKIN = np.array(
    [
        [0.95, 0.84, 0.77],
        [0.90, 0.74, 0.63],
        [0.79, 0.61, 0.47],
        [0.64, 0.45, 0.32],
        [0.45, 0.30, 0.21],
        [0.28, 0.185, 0.135],
    ]
)
# How strongly a lesion's optical density shows on each skin type (falls with melanin).
CONTRAST = np.array([1.0, 0.85, 0.62, 0.45, 0.30, 0.21])

# Per-channel absorption (R, G, B) of the pigments.
ABS_BROWN = np.array([0.55, 0.85, 1.15])
ABS_BLACK = np.array([1.0, 1.05, 1.1])
ABS_BLUEGREY = np.array([1.0, 0.8, 0.55])
ABS_RED = np.array([0.12, 0.85, 0.70])

# Planted imperfections of the training set.
P_EXACT_DUP = 0.03
P_NEAR_DUP = 0.04
P_FLIP = 0.04

# Conditions per three-partition: (label, nine_partition_label, weight) from the real data.
CONDITIONS = {
    "non-neoplastic": [
        ("psoriasis", "inflammatory", 653),
        ("lichen planus", "inflammatory", 491),
        ("allergic contact dermatitis", "inflammatory", 430),
        ("lupus erythematosus", "inflammatory", 410),
        ("neutrophilic dermatoses", "inflammatory", 361),
        ("sarcoidosis", "inflammatory", 349),
        ("photodermatoses", "inflammatory", 348),
        ("folliculitis", "inflammatory", 342),
        ("eczema", "inflammatory", 300),
        ("acne vulgaris", "inflammatory", 280),
        ("drug induced pigmentary changes", "inflammatory", 240),
        ("vitiligo", "inflammatory", 230),
        ("neurofibromatosis", "genodermatoses", 189),
        ("hailey hailey disease", "genodermatoses", 174),
        ("dariers disease", "genodermatoses", 153),
        ("tuberous sclerosis", "genodermatoses", 141),
        ("ehlers danlos syndrome", "genodermatoses", 127),
        ("incontinentia pigmenti", "genodermatoses", 102),
    ],
    "benign": [
        ("syringoma", "benign dermal", 127),
        ("telangiectases", "benign dermal", 126),
        ("pyogenic granuloma", "benign dermal", 113),
        ("lymphangioma", "benign dermal", 100),
        ("pilar cyst", "benign dermal", 93),
        ("dermatofibroma", "benign dermal", 79),
        ("porokeratosis actinic", "benign epidermal", 183),
        ("prurigo nodularis", "benign epidermal", 170),
        ("milia", "benign epidermal", 112),
        ("epidermal nevus", "benign epidermal", 91),
        ("seborrheic keratosis", "benign epidermal", 69),
        ("nevocytic nevus", "benign melanocyte", 86),
        ("halo nevus", "benign melanocyte", 82),
        ("congenital nevus", "benign melanocyte", 68),
    ],
    "malignant": [
        ("squamous cell carcinoma", "malignant epidermal", 581),
        ("basal cell carcinoma", "malignant epidermal", 468),
        ("actinic keratosis", "malignant epidermal", 175),
        ("solid cystic basal cell carcinoma", "malignant epidermal", 66),
        ("basal cell carcinoma morpheiform", "malignant epidermal", 62),
        ("melanoma", "malignant melanoma", 261),
        ("superficial spreading melanoma ssm", "malignant melanoma", 118),
        ("malignant melanoma", "malignant melanoma", 111),
        ("lentigo maligna", "malignant melanoma", 83),
        ("mycosis fungoides", "malignant cutaneous lymphoma", 182),
        ("kaposi sarcoma", "malignant dermal", 156),
    ],
}
PIGMENTED_LABELS = {
    "nevocytic nevus", "halo nevus", "congenital nevus", "seborrheic keratosis", "dermatofibroma",
    "melanoma", "superficial spreading melanoma ssm", "malignant melanoma", "lentigo maligna",
    "solid cystic basal cell carcinoma", "kaposi sarcoma", "drug induced pigmentary changes",
    "incontinentia pigmenti",
}

# The real fitzpatrick_scale x fitzpatrick_centaur table (rows -1, 1..6; columns -1, 1..6).
CENTAUR = {
    -1: (291, 75, 87, 33, 34, 31, 14),
    1: (139, 2461, 291, 42, 9, 4, 1),
    2: (275, 2400, 1559, 491, 67, 12, 4),
    3: (207, 492, 880, 1288, 394, 43, 4),
    4: (110, 97, 302, 949, 968, 327, 28),
    5: (43, 18, 52, 122, 470, 667, 161),
    6: (8, 18, 9, 9, 32, 209, 350),
}
QC_WEIGHTS = {
    "1 Diagnostic": 348, "2 Characteristic": 32, "3 Wrongly labelled": 17, "4 Other": 10,
    "5 Potentially": 97,
}

DDI_DISEASES = {
    True: [
        ("basal-cell-carcinoma", 41), ("mycosis-fungoides", 32),
        ("squamous-cell-carcinoma-in-situ", 28), ("squamous-cell-carcinoma", 17),
        ("squamous-cell-carcinoma-keratoacanthoma", 8), ("melanoma-acral-lentiginous", 7),
        ("melanoma", 7), ("melanoma-in-situ", 6), ("basal-cell-carcinoma-nodular", 6),
        ("kaposi-sarcoma", 6), ("metastatic-carcinoma", 5),
    ],
    False: [
        ("melanocytic-nevi", 119), ("seborrheic-keratosis", 58), ("verruca-vulgaris", 50),
        ("epidermal-cyst", 35), ("dermatofibroma", 22), ("acrochordon", 19),
        ("dysplastic-nevus", 16), ("seborrheic-keratosis-irritated", 14),
        ("pyogenic-granuloma", 14), ("neurofibroma", 12), ("angioma", 11), ("eccrine-poroma", 10),
        ("prurigo-nodularis", 9), ("lichenoid-keratosis", 8),
    ],
}
DDI_PIGMENTED = {"melanocytic-nevi", "seborrheic-keratosis", "dysplastic-nevus", "dermatofibroma",
                 "seborrheic-keratosis-irritated", "melanoma", "melanoma-in-situ",
                 "melanoma-acral-lentiginous", "kaposi-sarcoma", "basal-cell-carcinoma-nodular"}
DDI_NON_NEOPLASTIC = {"verruca-vulgaris", "prurigo-nodularis", "lichenoid-keratosis"}


@dataclass(frozen=True)
class SynthPaths:
    root: Path
    train_csv: Path
    train_images: Path
    test_csv: Path
    test_images: Path
    truth_csv: Path | None = None
    keep_list: Path | None = None

    @classmethod
    def at(cls, root: Path | str) -> "SynthPaths":
        root = Path(root)
        return cls(
            root=root,
            train_csv=root / "train" / TRAIN_CSV,
            train_images=root / "train" / "images",
            test_csv=root / "test" / TEST_CSV,
            test_images=root / "test" / "images",
            truth_csv=root / "train" / TRUTH_CSV,
            keep_list=root / "train" / KEEP_LIST,
        )


# ----------------------------------------------------------------------------- counts


def largest_remainder(weights: Sequence[float] | np.ndarray, total: int) -> np.ndarray:
    """Integer counts proportional to `weights` that sum exactly to `total` (Hamilton's method)."""
    w = np.asarray(weights, dtype=float)
    raw = w / w.sum() * total
    counts: np.ndarray = np.floor(raw).astype(int)
    short = total - counts.sum()
    if short > 0:
        order = np.argsort(-(raw - counts), kind="stable")
        counts[order[:short]] += 1
    return counts


def ddi_counts(n_test: int) -> dict[int, tuple[int, int]]:
    """(rows, malignant) per DDI skin tone, scaled from 208/241/207 and 49/74/48."""
    tones = list(DDI_GROUP_COUNTS)
    sizes = largest_remainder([DDI_GROUP_COUNTS[t] for t in tones], n_test)
    out = {}
    for tone, n in zip(tones, sizes, strict=True):
        share = DDI_MALIGNANT_COUNTS[tone] / DDI_GROUP_COUNTS[tone]
        k = int(round(n * share))
        lo = min(3, n // 2)
        k = max(lo, min(k, n - lo))
        out[tone] = (int(n), int(k))
    return out


# ----------------------------------------------------------------------------- rendering


def _rng(seed: int, stream: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream, index])


def _lesion_params(rng: np.random.Generator, cls: str, pigmented: bool) -> dict[str, Any]:
    """Shape, pigment and texture of one lesion; shared by a lesion's near duplicates."""
    p: dict[str, Any] = {"cls": cls, "skin_jitter": rng.normal(0, 0.035, 3)}
    # skin texture: a few low-frequency waves
    p["tex"] = (rng.uniform(0.8, 4.0, (5, 2)) * rng.choice([-1, 1], (5, 2)),
                rng.uniform(0, 2 * np.pi, 5), rng.uniform(0.006, 0.016, 5))
    nm = int(rng.integers(3, 9))
    p["mottle"] = (rng.uniform(-0.9, 0.9, (nm, 2)), rng.uniform(0.03, 0.09, nm),
                   rng.uniform(0.04, 0.12, nm) * rng.choice([-1, 1], nm))
    if cls == "non-neoplastic":
        n = int(rng.integers(2, 7))
        p["patches"] = [
            dict(
                c=rng.uniform(-0.75, 0.75, 2), r=rng.uniform(0.12, 0.38), w=rng.uniform(0.05, 0.14),
                d=rng.uniform(0.25, 0.7), a=rng.uniform(0, 0.12, 4), ph=rng.uniform(0, 2 * np.pi, 4),
            )
            for _ in range(n)
        ]
        p["absorb"] = ABS_BROWN if pigmented else ABS_RED
        p["scale"] = rng.uniform(0.0, 0.18) if rng.random() < 0.6 else 0.0
        return p
    atypia = rng.beta(6, 2) if cls == "malignant" else rng.beta(2, 6)
    t = float(atypia)
    p["t"] = t
    p["centre"] = rng.normal(0, 0.07, 2)
    p["R"] = float(np.clip(0.16 + 0.09 * t + rng.normal(0, 0.035), 0.07, 0.5))
    k = np.arange(1, 10)
    amp = np.where(k <= 2, (0.02 + 0.22 * t) * rng.uniform(0.4, 1.0, 9),
                   (0.004 + 0.07 * t) * rng.uniform(0.2, 1.0, 9) / np.sqrt(k / 3))
    p["amp"], p["phase"] = amp, rng.uniform(0, 2 * np.pi, 9)
    p["edge"] = 0.012 + 0.045 * t * rng.random()
    # malignant lesions are not darker overall: their cues are structure, not visibility
    p["d0"] = rng.uniform(0.45, 0.95) if cls == "malignant" else rng.uniform(0.75, 1.3)
    p["absorb"] = ABS_BROWN if pigmented else ABS_RED
    nblobs = int(np.round(7 * t * t * rng.uniform(0.5, 1.5)))
    blobs = []
    for _ in range(nblobs):
        ang, rad = rng.uniform(0, 2 * np.pi), rng.uniform(0, 0.7)
        kind = int(rng.choice(4, p=[0.35, 0.25, 0.2, 0.2]))
        d = rng.uniform(0.4, 1.0) * (0.3 + t)
        blobs.append(dict(
            c=np.array([np.cos(ang), np.sin(ang)]) * rad,  # in units of R
            s=rng.uniform(0.15, 0.45),
            d=-min(d, 0.6 * p["d0"]) if kind == 3 else d,  # 3: regression, a lighter zone
            absorb=(ABS_BLACK, ABS_BLUEGREY, ABS_RED, p["absorb"])[kind],
        ))
    p["blobs"] = blobs
    return p


def _view_params(rng: np.random.Generator | None, standard: bool) -> dict[str, Any]:
    """Acquisition: exposure, white balance, lighting gradient, zoom, noise, blur, JPEG quality."""
    if standard:
        return dict(exposure=1.0, wb=np.ones(3), grad=0.0, grad_dir=0.0, zoom=1.0, noise=0.018,
                    blur=False, shift=np.zeros(2), quality=None)
    assert rng is not None  # only the standard view is drawn without randomness
    return dict(
        exposure=float(np.exp(rng.normal(0, 0.12))),
        wb=np.exp(rng.normal(0, 0.04, 3)),
        grad=float(rng.uniform(0, 0.25)),
        grad_dir=float(rng.uniform(0, 2 * np.pi)),
        zoom=float(rng.uniform(0.75, 1.3)),
        noise=float(rng.uniform(0.01, 0.03)),
        blur=bool(rng.random() < 0.3),
        shift=rng.normal(0, 0.05, 2),
        quality=int(rng.integers(50, 96)),
    )


def _near_view(view: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """A near duplicate: the same photograph re-encoded, re-exposed, slightly re-cropped."""
    v = dict(view)
    v["exposure"] = view["exposure"] * float(rng.uniform(0.93, 1.07))
    v["wb"] = view["wb"] * np.exp(rng.normal(0, 0.015, 3))
    v["zoom"] = view["zoom"] * float(rng.uniform(0.985, 1.015))
    v["shift"] = view["shift"] + rng.normal(0, 0.005, 2)
    v["quality"] = int(np.clip(view["quality"] + rng.integers(-8, 9), 50, 95))
    return v


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return (0.5 * (1 + np.tanh(0.5 * z))).astype(np.float32)


_NTHETA = 256
_THETA = np.linspace(-np.pi, np.pi, _NTHETA + 1)[:-1]
_K = np.arange(1, 10)


_ANGLES: dict[int, np.ndarray] = {}
_BANKS: dict[int, tuple[np.ndarray, np.ndarray]] = {}


def _angle_grid(size: int) -> np.ndarray:
    """Angle indices (into _THETA) of a (3 size, 3 size) pixel grid around its centre pixel."""
    if size not in _ANGLES:
        c = np.arange(3 * size) - 1.5 * size + 0.5
        ang = np.arctan2(c[:, None], c[None, :])
        _ANGLES[size] = ((ang + np.pi) * (_NTHETA / (2 * np.pi))).astype(np.intp) % _NTHETA
    return _ANGLES[size]


def _noise_bank(size: int) -> tuple[np.ndarray, np.ndarray]:
    """Fixed banks of Gaussian and uniform noise; each image reads a randomly offset window."""
    if size not in _BANKS:
        rng = np.random.default_rng(20260101 + size)
        _BANKS[size] = (rng.standard_normal((2 * size, 2 * size, 3), np.float32),
                        rng.random((2 * size, 2 * size), np.float32))
    return _BANKS[size]


def _window(bank: np.ndarray, size: int, rng: np.random.Generator) -> np.ndarray:
    oy, ox = rng.integers(0, size, 2)
    w = bank[oy:oy + size, ox:ox + size]
    return w if rng.random() < 0.5 else w[::-1]


def _polar(x: np.ndarray, y: np.ndarray, cx: float, cy: float, view: dict[str, Any],
           size: int) -> tuple[np.ndarray, np.ndarray]:
    """Distance to (cx, cy) in lesion coordinates, and the angle as an index into _THETA."""
    dx, dy = x - np.float32(cx), y - np.float32(cy)
    rho = np.sqrt(dx * dx + dy * dy)
    # the angle does not depend on the zoom: look it up around the centre's nearest pixel
    half = size / 2
    px = int(np.clip(np.round((cx * view["zoom"] + view["shift"][0]) * half), -size, size))
    py = int(np.clip(np.round((cy * view["zoom"] + view["shift"][1]) * half), -size, size))
    g = _angle_grid(size)
    o = size
    idx = g[o - py: o - py + size, o - px: o - px + size]
    return rho, idx


def _radius_table(base: float, amp: np.ndarray, phase: np.ndarray) -> np.ndarray:
    """base * (1 + sum_k amp_k cos(k theta + phase_k)) sampled on _THETA."""
    k = _K[: len(amp), None]
    waves = (amp[:, None] * np.cos(k * _THETA[None, :] + phase[:, None])).sum(0)
    table: np.ndarray = (base * (1 + waves)).astype(np.float32)
    return table


def render(lesion: dict[str, Any], view: dict[str, Any], ftype: int, size: int,
           noise_rng: np.random.Generator) -> np.ndarray:
    """One image, (size, size, 3) uint8. Separable fields are built as outer products."""
    c = ((np.arange(size) + 0.5) / size * 2 - 1).astype(np.float32)
    xs = (c - view["shift"][0]) / view["zoom"]          # depends on the column only
    ys = (c - view["shift"][1]) / view["zoom"]          # depends on the row only
    x, y = xs[None, :], ys[:, None]
    skin = (SKIN[ftype - 1] * np.exp(lesion["skin_jitter"])).astype(np.float32)
    # skin texture: sum_j a_j cos(pi (fx x + fy y) + p_j) as one matrix product
    freq, ph, amp = lesion["tex"]
    ax = np.pi * freq[:, 0:1] * xs[None, :]                 # (5, size)
    ay = np.pi * freq[:, 1:2] * ys[None, :] + ph[:, None]
    U = np.concatenate([np.cos(ay) * amp[:, None], -np.sin(ay) * amp[:, None]]).T
    V = np.concatenate([np.cos(ax), np.sin(ax)]).T
    base = 1 + (U @ V.T).astype(np.float32)
    # mottling: small darker / lighter spots of the skin itself (the same on every skin type)
    mc, ms, ma = lesion["mottle"]
    My = np.exp(-((ys[None, :] - mc[:, 1:2]) ** 2) / (2 * ms[:, None] ** 2)) * ma[:, None]
    Mx = np.exp(-((xs[None, :] - mc[:, 0:1]) ** 2) / (2 * ms[:, None] ** 2))
    base *= np.exp(My.T @ Mx).astype(np.float32)
    bright = None
    if lesion["cls"] == "non-neoplastic":
        cover = np.zeros((size, size), np.float32)
        for pt in lesion["patches"]:
            cx, cy = pt["c"]
            rho, idx = _polar(x, y, cx, cy, view, size)
            r = _radius_table(pt["r"], pt["a"], pt["ph"])[idx]
            cover = np.maximum(cover, _sigmoid((r - rho) * np.float32(1 / pt["w"])) * np.float32(pt["d"]))
        od = cover[..., None] * lesion["absorb"].astype(np.float32)
        if lesion["scale"] > 0:
            speck = _window(_noise_bank(size)[1], size, noise_rng) ** 4
            bright = lesion["scale"] * speck * (cover > 0.15)
    else:
        cx, cy = lesion["centre"]
        rho, idx = _polar(x, y, cx, cy, view, size)
        r = _radius_table(lesion["R"], lesion["amp"], lesion["phase"])[idx]
        mask = _sigmoid((r - rho) * np.float32(1 / lesion["edge"]))
        R = lesion["R"]
        # pigment = d0 * base absorption + sum of separable Gaussian blobs * their absorption
        absorb = [lesion["absorb"]]
        gys, gxs = [np.full(size, lesion["d0"])], [np.ones(size)]
        for b in lesion["blobs"]:
            bx, by = lesion["centre"] + b["c"] * R
            s2 = 2 * (b["s"] * R) ** 2
            gys.append(np.exp(-((ys - by) ** 2) / s2) * b["d"])
            gxs.append(np.exp(-((xs - bx) ** 2) / s2))
            absorb.append(b["absorb"])
        A = np.asarray(absorb, np.float32)                       # (m, 3)
        Gy, Gx = np.asarray(gys, np.float32), np.asarray(gxs, np.float32)  # (m, size)
        od = np.stack([(Gy * A[:, ch:ch + 1]).T @ Gx for ch in range(3)], -1) * mask[..., None]
    np.maximum(od, 0, out=od)
    od *= np.float32(CONTRAST[ftype - 1])
    # acquisition: exposure, lighting gradient, white balance
    light = view["exposure"] * (1 + view["grad"] * (np.cos(view["grad_dir"]) * c[None, :]
                                                   + np.sin(view["grad_dir"]) * c[:, None]))
    img = np.exp(-od)
    img *= (base * light.astype(np.float32))[..., None]
    img *= (skin * view["wb"]).astype(np.float32)
    if bright is not None:  # scale: whitish flakes, more visible where contrast is high
        img += (0.92 - img) * (bright * CONTRAST[ftype - 1]).astype(np.float32)[..., None]
    img += _window(_noise_bank(size)[0], size, noise_rng) * np.float32(view["noise"])
    if view["blur"]:
        img = 0.5 * img + 0.125 * (np.roll(img, 1, 0) + np.roll(img, -1, 0) + np.roll(img, 1, 1) + np.roll(img, -1, 1))
    # soft highlight roll-off (no flat white patches from over-exposed atlas photos)
    hi = img > 0.85
    if hi.any():
        img[hi] = 0.85 + 0.15 * np.tanh((img[hi] - 0.85) / 0.15)
    img *= 255
    img += 0.5
    out: np.ndarray = np.clip(img, 0, 255).astype(np.uint8)
    return out


def _encode(arr: np.ndarray, quality: int | None) -> bytes:
    buf = io.BytesIO()
    im = Image.fromarray(arr, "RGB")
    if quality is None:
        im.save(buf, format="PNG", optimize=False, compress_level=1)
    else:
        im.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()


# ----------------------------------------------------------------------------- metadata


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


def _train_rows(seed: int, n_train: int) -> list[dict[str, Any]]:
    rng = _rng(seed, 0, 0)
    scales = list(FITZ_JOINT)
    parts = ("non-neoplastic", "benign", "malignant")
    cells = [(s, p) for s in scales for p in parts]
    weights = [FITZ_JOINT[s][i] for s in scales for i in range(3)]
    counts = largest_remainder(weights, n_train)
    order = np.concatenate([np.full(c, i) for i, c in enumerate(counts)]).astype(int)
    order = rng.permutation(order)

    cond_tab = {
        p: (CONDITIONS[p], np.array([w for *_, w in CONDITIONS[p]], float)) for p in parts
    }
    qc_names = list(QC_WEIGHTS)
    qc_p = np.array(list(QC_WEIGHTS.values()), float) / FITZ_ROWS
    centaur_vals = np.array([-1, 1, 2, 3, 4, 5, 6])
    type_p = np.array([FITZ_JOINT[s][0] + FITZ_JOINT[s][1] + FITZ_JOINT[s][2] for s in range(1, 7)], float)

    rows: list[dict[str, Any]] = []
    originals: dict[int, list[int]] = {}
    url_counter: dict[str, int] = {}
    for i, cell in enumerate(order):
        scale, part = cells[cell]
        md5 = hashlib.md5(f"synthderm:{seed}:{i}".encode()).hexdigest()
        u = rng.random()
        pool = originals.setdefault(int(cell), [])
        kind = ""
        if pool and u < P_EXACT_DUP:
            kind = "exact"
        elif pool and u < P_EXACT_DUP + P_NEAR_DUP:
            kind = "near"
        if kind:
            src = rows[pool[int(rng.integers(len(pool)))]]
            row = dict(src)
            row.update(md5hash=md5, duplicate_of=src["md5hash"], duplicate_kind=kind,
                       source_index=src["index"], index=i)
        else:
            conds, w = cond_tab[part]
            label, nine, _ = conds[int(rng.choice(len(conds), p=w / w.sum()))]
            cent = CENTAUR[scale]
            centaur = int(rng.choice(centaur_vals, p=np.array(cent) / sum(cent)))
            visual = part
            flipped = bool(rng.random() < P_FLIP)
            if flipped:
                visual = [q for q in parts if q != part][int(rng.integers(2))]
            render_type = scale if scale > 0 else int(rng.choice(6, p=type_p / type_p.sum())) + 1
            pig_p = 0.75 if label in PIGMENTED_LABELS else (0.25 if visual != "non-neoplastic" else 0.2)
            row = dict(
                index=i, source_index=i, md5hash=md5, fitzpatrick_scale=scale,
                fitzpatrick_centaur=centaur, label=label, nine_partition_label=nine,
                three_partition_label=part, visual_class=visual, label_flipped=flipped,
                render_type=render_type, pigmented=bool(rng.random() < pig_p),
                duplicate_of="", duplicate_kind="",
            )
            pool.append(i)
        # per-row metadata that differs between duplicates
        qc = ""
        if row["label_flipped"] and rng.random() < 0.2:
            qc = "3 Wrongly labelled"
        elif rng.random() < qc_p.sum():
            qc = qc_names[int(rng.choice(len(qc_names), p=qc_p / qc_p.sum()))]
        slug = _slug(row["label"])
        url_counter[slug] = url_counter.get(slug, 0) + 1
        url = f"https://atlas.synthderm.invalid/clinical-pic/{slug}/{slug}{url_counter[slug]}.jpg"
        row.update(qc=qc, url=url, url_alphanum=re.sub(r"[^A-Za-z0-9]", "", url) + ".jpg")
        rows.append(row)
    return rows


def _test_rows(seed: int, n_test: int) -> list[dict[str, Any]]:
    rng = _rng(seed, 0, 1)
    slots = []
    for tone, (n, k) in ddi_counts(n_test).items():
        slots += [(tone, True)] * k + [(tone, False)] * (n - k)
    perm = rng.permutation(len(slots))
    rows = []
    for idx, j in enumerate(perm):
        tone, malignant = slots[j]
        names, weights = zip(*DDI_DISEASES[malignant], strict=True)
        w = np.array(weights, float)
        disease = names[int(rng.choice(len(names), p=w / w.sum()))]
        ftype = (tone // 10) if rng.random() < 0.5 else (tone % 10)
        if malignant:
            visual = "malignant"
        else:
            visual = "non-neoplastic" if disease in DDI_NON_NEOPLASTIC else "benign"
        rows.append(dict(
            index=idx, DDI_ID=idx + 1, DDI_file=f"{idx + 1:06d}.png", skin_tone=tone,
            malignant=malignant, disease=disease, render_type=ftype, visual_class=visual,
            pigmented=bool(rng.random() < (0.75 if disease in DDI_PIGMENTED else 0.25)),
        ))
    return rows


def _write_csv(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)


# ----------------------------------------------------------------------------- generate


def generate(
    out_dir: Path | str,
    *,
    seed: int = 0,
    n_train: int = 2000,
    n_test: int = 656,
    size: int = 96,
    progress: Callable[[str, int, int], None] | None = None,
) -> SynthPaths:
    """Write a SynthDerm data set under out_dir (train/ Fitzpatrick17k format, test/ DDI format)."""
    if n_train < 21:
        raise ValueError("n_train must be at least 21 (one row per skin type and partition)")
    if n_test < 18:
        raise ValueError("n_test must be at least 18 (both classes in every skin-tone group)")
    if size < 16:
        raise ValueError("size must be at least 16 pixels")
    paths = SynthPaths.at(out_dir)
    for d in (paths.train_images, paths.test_images):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)

    # training set
    rows = _train_rows(seed, n_train)
    views: dict[int, dict[str, Any]] = {}
    lesions: dict[int, dict[str, Any]] = {}
    blobs: dict[int, bytes] = {}
    for n, row in enumerate(rows):
        i, src = row["index"], row["source_index"]
        if row["duplicate_kind"] == "exact":
            data = blobs[src]
        else:
            if src not in lesions:
                lesions[src] = _lesion_params(_rng(seed, 1, src), row["visual_class"], row["pigmented"])
                views[src] = _view_params(_rng(seed, 2, src), standard=False)
            view = views[src] if row["duplicate_kind"] == "" else _near_view(views[src], _rng(seed, 2, i))
            arr = render(lesions[src], view, row["render_type"], size, _rng(seed, 3, src))
            data = _encode(arr, view["quality"])
            if row["duplicate_kind"] == "":
                blobs[i] = data
        (paths.train_images / f"{row['md5hash']}.jpg").write_bytes(data)
        if progress and ((n + 1) % 50 == 0 or n + 1 == len(rows)):
            progress("train", n + 1, len(rows))
    assert paths.truth_csv is not None and paths.keep_list is not None  # SynthPaths.at sets both
    _write_csv(paths.train_csv, FITZ_COLUMNS, ([r[c] for c in FITZ_COLUMNS] for r in rows))
    _write_csv(
        paths.truth_csv,
        ("md5hash", "visual_class", "render_type", "label_flipped", "duplicate_kind", "duplicate_of"),
        ([r["md5hash"], r["visual_class"], r["render_type"], r["label_flipped"], r["duplicate_kind"],
          r["duplicate_of"]] for r in rows),
    )
    _write_csv(paths.keep_list, ("md5hash",),
               ([r["md5hash"]] for r in rows if not r["duplicate_kind"] and not r["label_flipped"]))

    # test set
    trows = _test_rows(seed, n_test)
    for n, row in enumerate(trows):
        lesion = _lesion_params(_rng(seed, 4, row["index"]), row["visual_class"], row["pigmented"])
        view = _view_params(None, standard=True)
        arr = render(lesion, view, row["render_type"], size, _rng(seed, 5, row["index"]))
        (paths.test_images / row["DDI_file"]).write_bytes(_encode(arr, None))
        if progress and ((n + 1) % 50 == 0 or n + 1 == len(trows)):
            progress("test", n + 1, len(trows))
    _write_csv(
        paths.test_csv,
        ("", "DDI_ID", "DDI_file", "skin_tone", "malignant", "disease"),
        ([r["index"], r["DDI_ID"], r["DDI_file"], r["skin_tone"], r["malignant"], r["disease"]] for r in trows),
    )
    return paths


def is_complete(root: Path | str, n_train: int | None = None, n_test: int | None = None) -> bool:
    """Whether root holds a whole generated data set (CSV files and every image they name)."""
    p = SynthPaths.at(root)
    if not (p.train_csv.is_file() and p.test_csv.is_file() and p.train_images.is_dir() and p.test_images.is_dir()):
        return False
    with open(p.train_csv, encoding="utf-8") as fh:
        n_tr = sum(1 for _ in fh) - 1
    with open(p.test_csv, encoding="utf-8") as fh:
        n_te = sum(1 for _ in fh) - 1
    if (n_train is not None and n_tr != n_train) or (n_test is not None and n_te != n_test):
        return False
    return (sum(1 for _ in p.train_images.iterdir()) == n_tr
            and sum(1 for _ in p.test_images.iterdir()) == n_te)
