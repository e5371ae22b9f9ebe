"""Skin-tone groups and per-group validation AUROC, in a pipeline that uses skin tone."""
import numpy as np
import pandas as pd
from sklearn.metrics import roc_auc_score

# --- solution.py ---


def tone_groups(skin_tone):
    """Fitzpatrick I-II -> 0, III-IV -> 1, V-VI -> 2, unknown -> -1."""
    tone = pd.to_numeric(skin_tone, errors="coerce").fillna(-1).astype(int).values
    return np.select([(tone >= 1) & (tone <= 2), (tone >= 3) & (tone <= 4), (tone >= 5) & (tone <= 6)],
                     [0, 1, 2], default=-1)


def group_aucs(y_true, scores, groups):
    """Validation AUROC per skin-tone group (groups with both classes only)."""
    aucs = {}
    for g in sorted(set(groups.tolist())):
        if g < 0:
            continue
        mask = groups == g
        if len(np.unique(y_true[mask])) == 2:
            aucs[g] = roc_auc_score(y_true[mask], scores[mask])
    return aucs
