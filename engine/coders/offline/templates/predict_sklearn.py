"""predict() of a scikit-learn pipeline: the contract's entry point, run on the held-out images."""
import os
import pickle

import numpy as np
from features import extract_features
from image_files import list_images
from load_image import load_image
from settings import MODEL_PATH

# --- solution.py ---


def predict(folder):
    """Malignancy probability (0-1) for every image in folder: {filename: probability}."""
    with open(MODEL_PATH, "rb") as fh:
        saved = pickle.load(fh)
    names = list_images(folder)
    if not names:
        return {}
    X = np.stack([extract_features(load_image(os.path.join(folder, n))) for n in names])
    probs = saved["model"].predict_proba(saved["scaler"].transform(X))[:, 1]
    return {n: float(p) for n, p in zip(names, probs)}
