"""The images of a folder, and the image file of each row of the metadata."""
import os

from settings import IMAGE_EXTENSIONS

# --- solution.py ---


def list_images(folder):
    return sorted(f for f in os.listdir(folder) if f.lower().endswith(IMAGE_EXTENSIONS))


def image_paths(df, folder):
    files = {os.path.splitext(f)[0]: f for f in list_images(folder)}
    paths = []
    for name in df["image_name"].astype(str):
        stem = os.path.splitext(name)[0]
        paths.append(os.path.join(folder, files.get(stem, stem + ".jpg")))
    return paths
