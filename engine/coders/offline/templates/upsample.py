"""upsample_darker_groups, for `fairness: upsample`."""
import numpy as np
from settings import SEED
from sklearn.utils import resample

# --- solution.py ---


def upsample_darker_groups(train_idx, groups):
    """Upsample skin-tone groups III-IV and V-VI to the size of group I-II."""
    target = int((groups[train_idx] == 0).sum())
    extra = []
    for g in (1, 2):
        members = train_idx[groups[train_idx] == g]
        if 0 < len(members) < target:
            extra.append(resample(members, replace=True, n_samples=target - len(members),
                                  random_state=SEED + g))
    return np.concatenate([train_idx] + extra) if extra else train_idx
