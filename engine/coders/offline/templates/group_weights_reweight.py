"""group_weights for `fairness: reweight`: inverse skin-tone group frequency."""
import numpy as np
import pandas as pd

# --- solution.py ---


def group_weights(groups, labels):
    """Inverse skin-tone group frequency, normalised to mean 1."""
    counts = pd.Series(groups).value_counts()
    weights = np.array([len(groups) / (len(counts) * counts[g]) for g in groups], dtype=np.float32)
    return weights / weights.mean()
