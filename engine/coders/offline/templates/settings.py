"""The paths and settings of every pipeline: it reads input/, writes its model in working/."""
import os

from choices import CHOICE_IMAGE_SIZE

# --- solution.py ---
HERE = os.path.dirname(os.path.abspath(__file__))
INPUT_DIR = os.path.join(HERE, "input")
WORKING_DIR = os.path.join(HERE, "working")
MODEL_PATH = os.path.join(WORKING_DIR, "model.pkl")  # when: sklearn
MODEL_PATH = os.path.join(WORKING_DIR, "model.pt")  # when: torch
IMAGE_SIZE = CHOICE_IMAGE_SIZE
SEED = 42
IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
