"""The rest of main() for a PyTorch model: epochs of training (group-weighted loss where chosen),
the checkpoint kept by overall or worst-group validation AUROC, the model saved, the AUROC printed."""
import json
import os

import numpy as np
import torch
import torch.nn.functional as F
from choices import CHOICE_BATCH_SIZE, CHOICE_EPOCHS, CHOICE_LR, CHOICE_MODEL, CHOICE_PRETRAINED
from group_weights_reweight import group_weights
from load_image import load_image
from settings import IMAGE_SIZE, MODEL_PATH, SEED, WORKING_DIR
from skin_tone_groups import group_aucs
from sklearn.metrics import roc_auc_score
from torch_cnn import build_model
from torch_helpers import score, to_tensor


def main():
    y = groups = train_idx = val_idx = paths = None  # set by main.py's lines
    # --- solution.py ---
    torch.manual_seed(SEED)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    x_all = to_tensor([load_image(p) for p in paths])
    y_all = torch.tensor(y, dtype=torch.float32)
    x_val, y_val = x_all[val_idx], y[val_idx]
    print(f"Images: {tuple(x_all.shape)} on {device}")
    model = build_model(pretrained=CHOICE_PRETRAINED).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=CHOICE_LR)
    epochs, batch_size = CHOICE_EPOCHS, CHOICE_BATCH_SIZE  # when: not bug_slow
    epochs, batch_size = 300, CHOICE_BATCH_SIZE  # when: bug_slow
    weights_all = torch.tensor(group_weights(groups, y), dtype=torch.float32)  # when: weighted
    best_auc, best_worst_auc, best_state = -1.0, -1.0, None
    for epoch in range(epochs):
        model.train()
        order = np.random.permutation(train_idx)
        total = 0.0
        for i in range(0, len(order), batch_size):
            batch = order[i:i + batch_size]
            xb, yb = x_all[batch].to(device), y_all[batch].to(device)
            if np.random.rand() < 0.5:
                xb = torch.flip(xb, dims=[3])
            logits = model(xb).squeeze(1)
            loss = F.binary_cross_entropy_with_logits(logits, yb, weight=weights_all[batch].to(device))  # when: weighted
            loss = F.binary_cross_entropy_with_logits(logits, yb)  # when: not weighted
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(batch)
        scores = score(model, x_val, device)
        auc = roc_auc_score(y_val, scores)
        aucs = group_aucs(y_val, scores, groups[val_idx])  # when: groups
        worst_auc = min(aucs.values()) if aucs else auc  # when: groups
        print(f"epoch {epoch + 1}/{epochs}: loss {total / len(order):.4f}, val auc {auc:.4f}, worst group {worst_auc:.4f}")  # when: groups
        print(f"epoch {epoch + 1}/{epochs}: loss {total / len(order):.4f}, val auc {auc:.4f}")  # when: not groups
        if worst_auc > best_worst_auc:  # minimax checkpoint: best worst-group AUC  # when: minimax
            best_auc, best_worst_auc, best_aucs = auc, worst_auc, aucs  # when: minimax
        if auc > best_auc:  # when: not minimax
            best_auc, best_worst_auc, best_aucs = auc, worst_auc, aucs  # when: groups and not minimax
            best_auc = auc  # when: not groups
            best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}
    torch.save(best_state, MODEL_PATH)
    with open(os.path.join(WORKING_DIR, "model.json"), "w") as fh:
        json.dump({"model": CHOICE_MODEL, "image_size": IMAGE_SIZE}, fh)
    for g, a in sorted(best_aucs.items()):  # when: monitor_groups
        print(f"Group {g} validation AUROC: {a:.4f}")  # when: monitor_groups
    if best_aucs:  # when: monitor_groups
        print(f"Skin-tone AUROC gap: {max(best_aucs.values()) - min(best_aucs.values()):.4f}")  # when: monitor_groups
    print(f"Validation AUROC: {best_auc:.4f}")
