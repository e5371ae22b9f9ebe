"""The SynthDerm skin-tone gap, measured with a small image classifier (numpy + scikit-learn).

`plain`: colour / texture statistics of each image (log optical density relative to the
surrounding skin, contrast-standardised per image) and a logistic regression trained on the
training set with malignant-vs-rest labels; no fairness intervention.
`fair`: the same, plus per-skin-tone feature standardisation: each image's skin tone group is
estimated from the colour of its border (a classifier fitted on the training rows with a known
Fitzpatrick type), and the features are standardised with that group's training statistics, so
the faded, low-contrast cues on dark skin are read on the same scale as on light skin.
Both are scored on the DDI-format test set: per-group AUC (sklearn) and gap = max - min.
"""
from __future__ import annotations

from pathlib import Path
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd
from PIL import Image

from engine.data.common import UNREADABLE_IMAGE, image_error
from engine.task import DDI_SKIN_TONE_TO_GROUP, GROUPS, fitzpatrick_to_group


def image_features(arr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(features, border colour) of one RGB uint8 image."""
    f = arr.astype(np.float32) / 255
    h = f.shape[0]
    b = max(1, h // 8)
    ring = np.concatenate([f[:b].reshape(-1, 3), f[-b:].reshape(-1, 3),
                           f[:, :b].reshape(-1, 3), f[:, -b:].reshape(-1, 3)])
    skin = np.median(ring, 0)
    od = -np.log(f + 2 / 255) + np.log(skin + 2 / 255)      # optical density relative to skin
    od /= np.percentile(od.mean(2), 99) + 0.05              # per-image contrast standardisation
    q = h // 4
    centre = od[q:h - q, q:h - q].reshape(-1, 3)
    border = np.concatenate([od[:q].reshape(-1, 3), od[-q:].reshape(-1, 3)])
    every = od.reshape(-1, 3)
    g = od.mean(2)
    gm = np.hypot(np.diff(g, axis=0)[:, :-1], np.diff(g, axis=1)[:-1, :]).ravel()
    cs = np.sort(centre, 0)
    n = len(cs)
    chroma = centre[:, 2] - centre[:, 0]
    feats = np.concatenate([
        every.mean(0), every.std(0), centre.mean(0) - border.mean(0), centre.std(0),
        cs[n // 20], cs[n // 2],
        [chroma.std(), gm.mean(), gm.std(), np.sort(gm)[-max(1, len(gm) // 20)]],
    ])
    return feats, skin


def _load(paths: Iterable[Path]) -> tuple[np.ndarray, np.ndarray]:
    F, S = [], []
    for p in paths:
        try:
            with Image.open(p) as im:
                f, s = image_features(np.asarray(im.convert("RGB")))
        except UNREADABLE_IMAGE as exc:
            raise image_error(p, exc) from None
        F.append(f)
        S.append(s)
    return np.array(F), np.array(S)


def gap_check(train_csv: Path, train_images: Path, test_csv: Path, test_images: Path) -> dict[str, Any]:
    """{"plain": {...}, "fair": {...}}, each with auc, group_auc (dict), gap, worst."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    tr = pd.read_csv(train_csv, dtype={"md5hash": str})
    te = pd.read_csv(test_csv)
    y = (tr["three_partition_label"] == "malignant").to_numpy().astype(int)
    grp = np.array([fitzpatrick_to_group(s) or "unknown" for s in tr["fitzpatrick_scale"]])
    yt = te["malignant"].astype(str).str.lower().eq("true").to_numpy().astype(int)
    gt = te["skin_tone"].map(DDI_SKIN_TONE_TO_GROUP).to_numpy()
    X, S = _load([Path(train_images) / f"{h}.jpg" for h in tr["md5hash"]])
    Xt, St = _load([Path(test_images) / f for f in te["DDI_file"]])

    known = grp != "unknown"
    tone = LogisticRegression(max_iter=2000).fit(np.log(S[known]), grp[known])
    g_tr = np.where(known, grp, tone.predict(np.log(S)))
    g_te = tone.predict(np.log(St))
    stats = {k: (X[g_tr == k].mean(0), X[g_tr == k].std(0) + 1e-6) for k in np.unique(g_tr)}

    def per_group(A: np.ndarray, g: np.ndarray) -> np.ndarray:
        A = A.copy()
        for k, (mu, sd) in stats.items():
            A[g == k] = (A[g == k] - mu) / sd
        return A

    out: dict[str, Any] = {}
    for name, (A, At) in {"plain": (X, Xt), "fair": (per_group(X, g_tr), per_group(Xt, g_te))}.items():
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=3000, C=0.3)).fit(A, y)
        s = model.predict_proba(At)[:, 1]
        aucs = {g: float(roc_auc_score(yt[gt == g], s[gt == g])) for g in GROUPS}
        out[name] = dict(auc=float(roc_auc_score(yt, s)), group_auc=aucs,
                         gap=max(aucs.values()) - min(aucs.values()), worst=min(aucs.values()))
    out["tone_accuracy"] = float((g_te == gt).mean())
    return out
