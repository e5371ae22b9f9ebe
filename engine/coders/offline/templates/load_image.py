"""load_image: an image as float32 pixels, with the colour constancy and standardisation chosen."""
import numpy as np
from PIL import Image
from settings import IMAGE_SIZE

# --- solution.py ---


def load_image(path):
    """Read an RGB image, resize it and return float32 pixels in [0, 1] (H, W, 3)."""
    img = Image.open(path).convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
    x = np.asarray(img, dtype=np.float32) / 255.0
    # grey-world colour constancy: equalise the mean of each channel  # when: grey_world
    channel_means = x.reshape(-1, 3).mean(axis=0) + 1e-6  # when: grey_world
    x = np.clip(x * (channel_means.mean() / channel_means), 0.0, 1.0)  # when: grey_world
    # per-image standardisation  # when: standardise
    x = (x - x.mean()) / (x.std() + 1e-6)  # when: standardise
    return x.astype(np.float32)
