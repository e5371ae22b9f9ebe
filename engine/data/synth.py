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
(`synth_render.CONTRAST`), and sensor noise is additive in absolute terms, so cues fade on dark skin: a plain
classifier trained on the (light-skin dominated) training set ranks dark-skin lesions worse, and a
pipeline that normalises colour to the surrounding skin and reweights groups narrows the gap.

Everything is seeded: the same parameters give byte-identical CSVs and identical images.
"""
from __future__ import annotations

import csv
import hashlib
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from engine.data.formats import (
    DDI_GROUP_COUNTS,
    DDI_MALIGNANT_COUNTS,
    FITZ_COLUMNS,
    FITZ_JOINT,
    FITZ_ROWS,
)
from engine.data.synth_render import encode, lesion_params, near_view, render, rng_for, view_params


FULL = dict(n_train=16577, n_test=656)
DEFAULTS = dict(seed=0, n_train=2000, n_test=656, size=96)

TRAIN_CSV = "fitzpatrick17k.csv"
TEST_CSV = "ddi_metadata.csv"
TRUTH_CSV = "synthderm_truth.csv"
KEEP_LIST = "fitzpatrick17k_c_keep.csv"

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



# ----------------------------------------------------------------------------- metadata


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


_PARTS = ("non-neoplastic", "benign", "malignant")
_CENTAUR_VALUES = np.array([-1, 1, 2, 3, 4, 5, 6])
_TYPE_P = np.array([FITZ_JOINT[s][0] + FITZ_JOINT[s][1] + FITZ_JOINT[s][2] for s in range(1, 7)], float)
_QC_NAMES = list(QC_WEIGHTS)
_QC_P = np.array(list(QC_WEIGHTS.values()), float) / FITZ_ROWS


def _train_rows(seed: int, n_train: int) -> list[dict[str, Any]]:
    rng = rng_for(seed, 0, 0)
    scales = list(FITZ_JOINT)
    cells = [(s, p) for s in scales for p in _PARTS]
    weights = [FITZ_JOINT[s][i] for s in scales for i in range(3)]
    counts = largest_remainder(weights, n_train)
    order = np.concatenate([np.full(c, i) for i, c in enumerate(counts)]).astype(int)
    order = rng.permutation(order)

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
            row = _original_row(rng, i, md5, scale, part)
            pool.append(i)
        row.update(_listing(rng, row, url_counter))  # per-row metadata that differs between duplicates
        rows.append(row)
    return rows


def _original_row(rng: np.random.Generator, i: int, md5: str, scale: int, part: str) -> dict[str, Any]:
    """A training row that is no duplicate: its condition, skin type, what is rendered and any flipped label."""
    conds = CONDITIONS[part]
    w = np.array([w for *_, w in conds], float)
    label, nine, _ = conds[int(rng.choice(len(conds), p=w / w.sum()))]
    cent = CENTAUR[scale]
    centaur = int(rng.choice(_CENTAUR_VALUES, p=np.array(cent) / sum(cent)))
    visual = part
    flipped = bool(rng.random() < P_FLIP)
    if flipped:
        visual = [q for q in _PARTS if q != part][int(rng.integers(2))]
    render_type = scale if scale > 0 else int(rng.choice(6, p=_TYPE_P / _TYPE_P.sum())) + 1
    pig_p = 0.75 if label in PIGMENTED_LABELS else (0.25 if visual != "non-neoplastic" else 0.2)
    return dict(
        index=i, source_index=i, md5hash=md5, fitzpatrick_scale=scale,
        fitzpatrick_centaur=centaur, label=label, nine_partition_label=nine,
        three_partition_label=part, visual_class=visual, label_flipped=flipped,
        render_type=render_type, pigmented=bool(rng.random() < pig_p),
        duplicate_of="", duplicate_kind="",
    )


def _listing(rng: np.random.Generator, row: dict[str, Any], url_counter: dict[str, int]) -> dict[str, str]:
    """The row's quality-control note and its atlas URL (numbered per condition in `url_counter`)."""
    qc = ""
    if row["label_flipped"] and rng.random() < 0.2:
        qc = "3 Wrongly labelled"
    elif rng.random() < _QC_P.sum():
        qc = _QC_NAMES[int(rng.choice(len(_QC_NAMES), p=_QC_P / _QC_P.sum()))]
    slug = _slug(row["label"])
    url_counter[slug] = url_counter.get(slug, 0) + 1
    url = f"https://atlas.synthderm.invalid/clinical-pic/{slug}/{slug}{url_counter[slug]}.jpg"
    return dict(qc=qc, url=url, url_alphanum=re.sub(r"[^A-Za-z0-9]", "", url) + ".jpg")


def _test_rows(seed: int, n_test: int) -> list[dict[str, Any]]:
    rng = rng_for(seed, 0, 1)
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

    _write_train(paths, seed, n_train, size, progress)
    _write_test(paths, seed, n_test, size, progress)
    return paths


def _write_train(paths: SynthPaths, seed: int, n_train: int, size: int,
                 progress: Callable[[str, int, int], None] | None) -> None:
    """The training images (duplicates re-use their original's lesion and view), its CSV, truth and keep-list."""
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
                lesions[src] = lesion_params(rng_for(seed, 1, src), row["visual_class"], row["pigmented"])
                views[src] = view_params(rng_for(seed, 2, src), standard=False)
            view = views[src] if row["duplicate_kind"] == "" else near_view(views[src], rng_for(seed, 2, i))
            arr = render(lesions[src], view, row["render_type"], size, rng_for(seed, 3, src))
            data = encode(arr, view["quality"])
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


def _write_test(paths: SynthPaths, seed: int, n_test: int, size: int,
                progress: Callable[[str, int, int], None] | None) -> None:
    """The test images (standardised acquisition, PNG) and the DDI metadata."""
    trows = _test_rows(seed, n_test)
    for n, row in enumerate(trows):
        lesion = lesion_params(rng_for(seed, 4, row["index"]), row["visual_class"], row["pigmented"])
        view = view_params(None, standard=True)
        arr = render(lesion, view, row["render_type"], size, rng_for(seed, 5, row["index"]))
        (paths.test_images / row["DDI_file"]).write_bytes(encode(arr, None))
        if progress and ((n + 1) % 50 == 0 or n + 1 == len(trows)):
            progress("test", n + 1, len(trows))
    _write_csv(
        paths.test_csv,
        ("", "DDI_ID", "DDI_file", "skin_tone", "malignant", "disease"),
        ([r["index"], r["DDI_ID"], r["DDI_file"], r["skin_tone"], r["malignant"], r["disease"]] for r in trows),
    )


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
