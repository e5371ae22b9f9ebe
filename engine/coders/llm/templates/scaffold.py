import os
import sys

import joblib
import numpy as np
import pandas as pd
from PIL import Image
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline, make_pipeline
from sklearn.preprocessing import StandardScaler

INPUT = "./input"
WORKING = os.path.join(os.path.dirname(os.path.abspath(__file__)), "working")
SIZE = 32  # images are resized to SIZE x SIZE
FLATTEN = True  # True: features() output becomes one flat row per image; False: it keeps its shape


def load_image(path):
    """One image as a float32 array of shape (SIZE, SIZE, 3), values 0-1."""
    with Image.open(path) as im:
        return np.asarray(im.convert("RGB").resize((SIZE, SIZE)), dtype=np.float32) / 255.0


def load_training_data():
    """X: images (n, SIZE, SIZE, 3); y: 1 for malignant, 0 otherwise; skin_tone: the CSV's skin_tone value, 1-6 (0: unknown)."""
    df = pd.read_csv(os.path.join(INPUT, "skin_lesions.csv"))
    X = np.stack([load_image(os.path.join(INPUT, "images", f"{name}.jpg")) for name in df["image_name"]])
    y = (df["label"] == "malignant").astype(int).to_numpy()
    tone = pd.to_numeric(df["skin_tone"], errors="coerce").fillna(0).astype(int).to_numpy()
    return X, y, np.where((tone >= 1) & (tone <= 6), tone, 0)


class _Rows(np.ndarray):
    """What features() returned: features() of it is itself."""


def _one_row_per_image(written):
    """features() as written below, made to return float32 (one flat row per image unless FLATTEN is
    False) wherever it is used; given its own output, it returns it unchanged."""
    def rows(X):
        if isinstance(X, _Rows):
            return X
        out = np.asarray(written(X), dtype=np.float32)
        return (out.reshape(len(X), -1) if FLATTEN else out).view(_Rows)
    return rows


class _TorchModel:
    """A torch module that train() returned, with predict_proba(features) -> (n, 2) as a saved model."""

    def __init__(self, module):
        self.module = module.cpu().eval()

    def predict_proba(self, X):
        import torch

        with torch.no_grad():
            out = torch.cat([self.module(torch.from_numpy(np.ascontiguousarray(batch, dtype=np.float32))).reshape(len(batch), -1)
                             for batch in np.array_split(X, max(1, -(-len(X) // 256)))])
        if out.shape[1] not in (1, 2):
            raise ValueError(f"the torch module gave {out.shape[1]} values per image: give 1 (a logit) or 2 (two logits)")
        p = (torch.softmax(out, dim=1)[:, 1] if out.shape[1] == 2 else torch.sigmoid(out[:, 0])).double().numpy()
        return np.stack([1 - p, p], axis=1)


def _as_predictor(model):
    """The model train() returned, ready to save: a torch nn.Module is wrapped to give predict_proba(features) as (n, 2)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(model, torch.nn.Module):
        return _TorchModel(model)
    if not hasattr(model, "predict_proba"):
        raise TypeError(f"train() returned {type(model).__name__}, which has no predict_proba(): return a fitted "
                        "model with predict_proba(features) or a torch nn.Module")
    return model


# >>> features(X) and train(X, y, skin_tone) go here <<<

features = _one_row_per_image(features)


def predict(folder):
    model = joblib.load(os.path.join(WORKING, "model.joblib"))
    names = sorted(f for f in os.listdir(folder) if f.lower().endswith((".jpg", ".jpeg", ".png")))
    X = np.stack([load_image(os.path.join(folder, name)) for name in names])
    probs = model.predict_proba(features(X))[:, 1]
    return {name: float(p) for name, p in zip(names, probs, strict=True)}


if __name__ == "__main__":
    os.makedirs(WORKING, exist_ok=True)
    X, y, skin_tone = load_training_data()
    X_tr, X_val, y_tr, y_val, st_tr, st_val = train_test_split(X, y, skin_tone, test_size=0.2, stratify=y, random_state=0)
    model = _as_predictor(train(features(X_tr), y_tr, st_tr))
    joblib.dump(model, os.path.join(WORKING, "model.joblib"))
    print(f"Validation AUROC: {roc_auc_score(y_val, model.predict_proba(features(X_val))[:, 1]):.4f}")
