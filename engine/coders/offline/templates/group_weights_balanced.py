"""group_weights for `fairness: group_balanced`: inverse (group, label) frequency."""
import numpy as np
import pandas as pd

# --- solution.py ---


def group_weights(groups, labels):
    """Group-balanced loss weights: inverse (skin-tone group, label) frequency."""
    keys = pd.Series([f"{g}_{y}" for g, y in zip(groups, labels)])
    counts = keys.value_counts()
    weights = np.array([len(keys) / (len(counts) * counts[k]) for k in keys], dtype=np.float32)
    return weights / weights.mean()
