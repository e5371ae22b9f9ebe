"""The pipeline-contract half of an exported MEDFAIR baseline (see baselines/export.py).

An exported solution.py is baselines/core.py followed by this file (lines marked
``# export: drop`` removed and CONFIG filled in). Run as a script with cwd holding
``input/skin_lesions.csv`` and ``input/images/``, it trains, saves ``working/model.pt`` and prints
``Validation AUROC: x``; imported, it offers ``predict(folder) -> {filename: probability}``.

The agent's copy of the data is obfuscated (image_name, skin_tone, alternative_skin_tone,
super_label, label, expert_opinion; no md5 hashes), so the cleaning here works on what a node
can see: "dedup" drops rows marked wrongly labelled by the experts and keeps one image per
perceptual-hash cluster (exact and near duplicates); "filtered" also drops non-neoplastic rows.
"""
from baselines.core import *  # noqa: F401,F403  # export: drop
from baselines.core import build_model, decode_images, pick_device, predict_scores, prepare_model, train_epoch, worst_group_rank, resize_for  # noqa: E501  # export: drop

import copy
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from sklearn.metrics import roc_auc_score

CONFIG = {"variant": "medfair", "epochs": 30, "patience": 5, "size": 224, "batch_size": 64, "lr": 1e-4, "weight_decay": 1e-4, "seed": 0, "val_fraction": 0.2, "weights": "auto"}  # noqa: E501
IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
_MODEL: dict[str, Any] = {}


def _group(tone: int) -> str | None:
    return {1: "group_0", 2: "group_0", 3: "group_1", 4: "group_1", 5: "group_2", 6: "group_2"}.get(tone)


def _image_path(images_dir: Path, name: object) -> Path:
    name = str(name)
    p = images_dir / name
    if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file():
        return p
    for suffix in IMAGE_SUFFIXES:
        q = images_dir / (name + suffix)
        if q.is_file():
            return q
    return images_dir / (name + ".jpg")


def _dhash(path: str | Path, size: int = 8) -> int:
    from PIL import Image

    with Image.open(path) as im:
        g = np.asarray(im.convert("L").resize((size + 1, size), Image.Resampling.BILINEAR), dtype=np.int16)
    bits = (g[:, 1:] > g[:, :-1]).flatten()
    return int("".join("1" if b else "0" for b in bits), 2)


def load_table(input_dir: Path, variant: str) -> pd.DataFrame:
    """MEDFAIR preprocessing and the variant's cleaning on the agent's data."""
    df = pd.read_csv(input_dir / "skin_lesions.csv")
    tone = pd.to_numeric(df["skin_tone"], errors="coerce")
    df = df[tone.isin([1, 2, 3, 4, 5, 6])].copy()  # drop unknown skin type
    df["group"] = pd.to_numeric(df["skin_tone"]).astype(int).map(_group)
    df["path"] = [str(_image_path(input_dir / "images", n)) for n in df["image_name"]]
    df = df[[Path(p).is_file() for p in df["path"]]]
    if variant in ("medfair-dedup", "medfair-filtered"):
        opinion = df["expert_opinion"].astype(str) if "expert_opinion" in df.columns else pd.Series("", index=df.index)
        df = df[~opinion.str.startswith("3")].copy()  # "3 Wrongly labelled"
        df["phash"] = [_dhash(p) for p in df["path"]]
        df = df.drop_duplicates("phash").drop(columns="phash")
    if variant == "medfair-filtered":
        df = df[df["label"].astype(str) != "non-neoplastic"]
    df = df.copy()
    df["target"] = (df["label"].astype(str) == "malignant").astype(int)  # malignant vs the rest
    return df.reset_index(drop=True)


def split(df: pd.DataFrame, fraction: float, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A validation split stratified by skin-tone group and label."""
    rng = np.random.default_rng(seed)
    val = np.zeros(len(df), dtype=bool)
    for _, idx in df.groupby(["group", "target"]).indices.items():
        idx = rng.permutation(idx)
        k = int(round(len(idx) * fraction))
        if len(idx) >= 2:
            val[idx[:max(1, k)]] = True
    return df[~val].reset_index(drop=True), df[val].reset_index(drop=True)


def group_aucs(labels: np.ndarray, scores: np.ndarray, groups: np.ndarray) -> dict[str, float]:
    out: dict[str, float] = {}
    for g in sorted(set(groups)):
        m = groups == g
        if len(set(labels[m])) == 2:
            out[g] = float(roc_auc_score(labels[m], scores[m]))
    return out


def train(input_dir: str | Path = Path("input"), working_dir: str | Path = Path("working"),
          config: dict[str, Any] | None = None) -> float | None:
    cfg = dict(CONFIG, **(config or {}))
    torch.manual_seed(cfg["seed"])
    np.random.seed(cfg["seed"])
    gen = torch.Generator().manual_seed(cfg["seed"])
    device = pick_device()
    size, resize = cfg["size"], resize_for(cfg["size"])

    df = load_table(Path(input_dir), cfg["variant"])
    tr, va = split(df, cfg["val_fraction"], cfg["seed"])
    print(f"{cfg['variant']}: train {len(tr)} ({int(tr.target.sum())} malignant), "
          f"validation {len(va)}; device {device}")
    train_x = decode_images(list(tr["path"]), resize)
    val_x = decode_images(list(va["path"]), resize)
    if device.type == "cuda":
        train_x = train_x.to(device)
    train_y = torch.as_tensor(tr["target"].to_numpy(), dtype=torch.float32).to(train_x.device)
    val_y, val_g = va["target"].to_numpy(), va["group"].to_numpy()

    model, weights = build_model(cfg["weights"])
    print(f"weights: {weights}")
    model = prepare_model(model, device)
    opt = torch.optim.Adam(model.parameters(), lr=cfg["lr"], weight_decay=cfg["weight_decay"])
    best, best_rank, best_auc, stale = None, None, None, 0
    for epoch in range(1, cfg["epochs"] + 1):
        loss = train_epoch(model, opt, train_x, train_y, size=size, batch_size=cfg["batch_size"],
                           device=device, generator=gen)
        scores = predict_scores(model, val_x, size=size, batch_size=256, device=device)
        per_group = group_aucs(val_y, scores, val_g)
        overall = float(roc_auc_score(val_y, scores)) if len(set(val_y)) == 2 else float("nan")
        rank = worst_group_rank(per_group)
        print(f"epoch {epoch}: loss {loss:.4f} val AUC {overall:.4f} per group "
              + " ".join(f"{g}={v:.3f}" for g, v in per_group.items()))
        if best_rank is None or rank > best_rank:  # minimax Pareto over epochs: best worst group
            best_rank, best_auc, stale = rank, overall, 0
            best = copy.deepcopy({k: v.detach().cpu() for k, v in model.state_dict().items()})
            best_epoch = epoch
        else:
            stale += 1
            if stale >= cfg["patience"]:
                break
    working_dir = Path(working_dir)
    working_dir.mkdir(parents=True, exist_ok=True)
    torch.save({"model": best, "size": size, "resize": resize, "epoch": best_epoch, "config": cfg},
               working_dir / "model.pt")
    assert best_rank is not None  # set with best_epoch, which the save above needed
    print(f"kept epoch {best_epoch} (worst-group validation AUC {best_rank[0]:.4f})")
    print(f"Validation AUROC: {best_auc:.4f}")
    return best_auc


def _load_model() -> tuple[torch.nn.Module, dict[str, Any], torch.device]:
    if "model" in _MODEL:
        return _MODEL["model"], _MODEL["ckpt"], _MODEL["device"]
    candidates = [Path.cwd() / "working" / "model.pt", Path(__file__).resolve().parent / "working" / "model.pt"]
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        raise FileNotFoundError("working/model.pt not found: run this solution as a script first")
    ckpt = torch.load(path, map_location="cpu", weights_only=False)
    device = pick_device()
    model, _ = build_model("random")
    model.load_state_dict(ckpt["model"])
    model = prepare_model(model, device)
    _MODEL.update(model=model, ckpt=ckpt, device=device)
    return model, ckpt, device


def predict(folder: str | Path) -> dict[str, float]:
    """{filename: malignancy probability} for every image in `folder`."""
    model, ckpt, device = _load_model()
    files = sorted(p for p in Path(folder).iterdir() if p.suffix.lower() in IMAGE_SUFFIXES)
    out: dict[str, float] = {}
    for start in range(0, len(files), 512):
        chunk = files[start:start + 512]
        x = decode_images(chunk, ckpt["resize"])
        scores = predict_scores(model, x, size=ckpt["size"], batch_size=256, device=device)
        out.update({p.name: float(s) for p, s in zip(chunk, scores, strict=True)})
    return out


if __name__ == "__main__":
    train()
    sys.exit(0)
