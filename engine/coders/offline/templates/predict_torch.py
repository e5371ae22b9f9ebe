"""predict() of a PyTorch pipeline: the contract's entry point, run on the held-out images."""
import os

import torch
from image_files import list_images
from load_image import load_image
from settings import MODEL_PATH
from torch_cnn import build_model
from torch_helpers import score, to_tensor

# --- solution.py ---


def predict(folder):
    """Malignancy probability (0-1) for every image in folder: {filename: probability}."""
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    model = build_model(pretrained=False)
    model.load_state_dict(torch.load(MODEL_PATH, map_location="cpu"))
    model.to(device)
    names = list_images(folder)
    if not names:
        return {}
    probs = []
    for i in range(0, len(names), 256):
        batch = to_tensor([load_image(os.path.join(folder, n)) for n in names[i:i + 256]])
        probs.extend(score(model, batch, device).tolist())
    return {n: float(p) for n, p in zip(names, probs)}
