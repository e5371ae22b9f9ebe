"""SynthDerm's renderer: one skin-lesion image from a lesion's and a view's parameters.

The visual model is described in engine.data.synth: a Fitzpatrick-type skin colour with texture,
a lesion as an optical-density map (Beer-Lambert), then the acquisition (exposure, white balance,
lighting, noise, blur, JPEG or PNG). Seeded: the same parameters and generators give the same bytes.
"""
from __future__ import annotations

import io
from typing import Any

import numpy as np
from PIL import Image

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


def rng_for(seed: int, stream: int, index: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream, index])


def lesion_params(rng: np.random.Generator, cls: str, pigmented: bool) -> dict[str, Any]:
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


def view_params(rng: np.random.Generator | None, standard: bool) -> dict[str, Any]:
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


def near_view(view: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
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
    skin = (SKIN[ftype - 1] * np.exp(lesion["skin_jitter"])).astype(np.float32)
    base = _skin_texture(lesion, xs, ys)
    bright = None
    if lesion["cls"] == "non-neoplastic":
        od, bright = _patch_density(lesion, xs, ys, view, size, noise_rng)
    else:
        od = _lesion_density(lesion, xs, ys, view, size)
    np.maximum(od, 0, out=od)
    od *= np.float32(CONTRAST[ftype - 1])
    return _acquire(od, base, skin, bright, view, c, ftype, size, noise_rng)


def _skin_texture(lesion: dict[str, Any], xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The skin's brightness field: low-frequency waves times mottling."""
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
    texture: np.ndarray = base
    return texture


def _patch_density(lesion: dict[str, Any], xs: np.ndarray, ys: np.ndarray, view: dict[str, Any], size: int,
                   noise_rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray | None]:
    """A non-neoplastic lesion: (optical density of its patches, the scale's brightening or None)."""
    x, y = xs[None, :], ys[:, None]
    cover = np.zeros((size, size), np.float32)
    for pt in lesion["patches"]:
        cx, cy = pt["c"]
        rho, idx = _polar(x, y, cx, cy, view, size)
        r = _radius_table(pt["r"], pt["a"], pt["ph"])[idx]
        cover = np.maximum(cover, _sigmoid((r - rho) * np.float32(1 / pt["w"])) * np.float32(pt["d"]))
    od = cover[..., None] * lesion["absorb"].astype(np.float32)
    bright = None
    if lesion["scale"] > 0:
        speck = _window(_noise_bank(size)[1], size, noise_rng) ** 4
        bright = lesion["scale"] * speck * (cover > 0.15)
    return od, bright


def _lesion_density(lesion: dict[str, Any], xs: np.ndarray, ys: np.ndarray, view: dict[str, Any],
                    size: int) -> np.ndarray:
    """A benign or malignant lesion's optical density: its pigment inside its irregular border."""
    cx, cy = lesion["centre"]
    rho, idx = _polar(xs[None, :], ys[:, None], cx, cy, view, size)
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
    od: np.ndarray = np.stack([(Gy * A[:, ch:ch + 1]).T @ Gx for ch in range(3)], -1) * mask[..., None]
    return od


def _acquire(od: np.ndarray, base: np.ndarray, skin: np.ndarray, bright: np.ndarray | None, view: dict[str, Any],
             c: np.ndarray, ftype: int, size: int, noise_rng: np.random.Generator) -> np.ndarray:
    """The photograph of the density map: exposure, lighting gradient, white balance, noise, blur."""
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


def encode(arr: np.ndarray, quality: int | None) -> bytes:
    buf = io.BytesIO()
    im = Image.fromarray(arr, "RGB")
    if quality is None:
        im.save(buf, format="PNG", optimize=False, compress_level=1)
    else:
        im.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
