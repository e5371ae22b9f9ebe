"""The rest of main() for a scikit-learn model: features, fit (a grid under minimax selection),
per-group AUROC where skin tone is used, the model saved, the validation AUROC printed."""
import pickle

import numpy as np
from choices import CHOICE_C, CHOICE_C_GRID, CHOICE_LEARNING_RATE, CHOICE_MAX_ITER, CHOICE_MAX_ITER_GRID
from features import extract_features
from group_weights_reweight import group_weights
from load_image import load_image
from settings import MODEL_PATH, SEED
from skin_tone_groups import group_aucs
from sklearn.ensemble import HistGradientBoostingClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import roc_auc_score
from sklearn.preprocessing import StandardScaler


def main():
    y = groups = train_idx = val_idx = paths = None  # set by main.py's lines
    # --- solution.py ---
    X = np.stack([extract_features(load_image(p)) for p in paths])  # when: not bug_slow
    features = []  # when: bug_slow
    for i in range(len(paths)):  # when: bug_slow
        all_features = np.stack([extract_features(load_image(p)) for p in paths])  # when: bug_slow
        features.append(all_features[i])  # when: bug_slow
    X = np.stack(features)  # when: bug_slow
    print(f"Features: {X.shape}")
    scaler = StandardScaler().fit(X[train_idx])
    X_train, y_train = scaler.transform(X[train_idx]), y[train_idx]
    X_val, y_val = scaler.transform(X[val_idx]), y[val_idx]
    sample_weight = group_weights(groups[train_idx], y_train)  # when: weighted
    candidates = [dict(C=CHOICE_C)]  # when: logreg and not minimax
    candidates = [dict(C=C) for C in CHOICE_C_GRID]  # when: logreg and minimax
    candidates = [dict(max_iter=CHOICE_MAX_ITER, learning_rate=CHOICE_LEARNING_RATE)]  # when: gbm and not minimax
    candidates = [dict(max_iter=n, learning_rate=CHOICE_LEARNING_RATE) for n in CHOICE_MAX_ITER_GRID]  # when: gbm and minimax
    results = []
    for params in candidates:
        model = LogisticRegression(max_iter=2000, **params)  # when: logreg
        model = HistGradientBoostingClassifier(max_leaf_nodes=15, random_state=SEED, **params)  # when: gbm
        model.fit(X_train, y_train, sample_weight=sample_weight)  # when: weighted
        model.fit(X_train, y_train)  # when: not weighted
        scores = model.predict_proba(X_val)[:, 1]
        result = {"params": params, "model": model, "auc": roc_auc_score(y_val, scores)}
        aucs = group_aucs(y_val, scores, groups[val_idx])  # when: groups
        result["group_aucs"] = aucs  # when: groups
        result["worst_group_auc"] = min(aucs.values()) if aucs else result["auc"]  # when: groups
        results.append(result)
    best = max(results, key=lambda r: r["worst_group_auc"])  # minimax: best worst-group AUC  # when: minimax
    print(f"Selected {best['params']} by worst-group validation AUC")  # when: minimax
    best = max(results, key=lambda r: r["auc"])  # when: not minimax
    for g, a in sorted(best["group_aucs"].items()):  # when: monitor_groups
        print(f"Group {g} validation AUROC: {a:.4f}")  # when: monitor_groups
    if best["group_aucs"]:  # when: monitor_groups
        print(f"Skin-tone AUROC gap: {max(best['group_aucs'].values()) - min(best['group_aucs'].values()):.4f}")  # when: monitor_groups
    with open(MODEL_PATH, "wb") as fh:
        pickle.dump({"model": best["model"], "scaler": scaler}, fh)
    print(f"Validation AUROC: {best['auc']:.4f}")
