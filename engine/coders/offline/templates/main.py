"""The start of main(): the metadata read, the rows chosen, the labels, the skin-tone groups and the
train/validation split. train_sklearn.py or train_torch.py continues it."""
# ruff: noqa: F841  (main() goes on in train_sklearn.py or train_torch.py, which use what it sets here)
import os

import numpy as np
import pandas as pd
from image_files import image_paths
from settings import INPUT_DIR, SEED, WORKING_DIR
from skin_tone_groups import tone_groups
from sklearn.model_selection import train_test_split
from upsample import upsample_darker_groups

# --- solution.py ---


def main():
    np.random.seed(SEED)
    os.makedirs(WORKING_DIR, exist_ok=True)
    df = pd.read_csv(os.path.join(INPUT_DIR, "skin_lesions.csv"))
    print(f"Loaded {len(df)} rows")
    df = df[df["label"] != "non-neoplastic"].reset_index(drop=True)  # when: filter_non_neoplastic
    print(f"Kept {len(df)} neoplastic lesions (malignant or benign)")  # when: filter_non_neoplastic
    df = df[df["skin_tone"] != -1].reset_index(drop=True)  # when: drop_unknown_tone
    print(f"Kept {len(df)} rows with a known skin tone")  # when: drop_unknown_tone
    y = (df["label"] == "malignant").astype(int).values  # when: not bug_key_error
    y = (df["diagnosis"] == "malignant").astype(int).values  # when: bug_key_error
    y = y[1:]  # labels aligned with the images  # when: bug_shape
    groups = tone_groups(df["skin_tone"])  # when: groups
    idx = np.arange(len(df))
    train_idx, val_idx = train_test_split(idx, test_size=0.2, stratify=y, random_state=SEED)
    paths = image_paths(df, os.path.join(INPUT_DIR, "images"))
    train_idx = upsample_darker_groups(train_idx, groups)  # when: upsample
    print(f"Training rows after upsampling darker skin tones: {len(train_idx)}")  # when: upsample
