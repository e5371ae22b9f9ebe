"""The imports of a pipeline, each where the component choice needs it."""
# ruff: noqa: F401  (the names are used by the other templates, not here)

# --- solution.py ---
import os
import pickle  # when: sklearn
import json  # when: torch

import numpy as np
import pandas as pd
from PIL import Image
from sklearn.metrics import roc_auc_score  # when: not bug_missing_import
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler  # when: sklearn
from sklearn.linear_model import LogisticRegression  # when: logreg
from sklearn.ensemble import HistGradientBoostingClassifier  # when: gbm
from sklearn.utils import resample  # when: upsample
import torch  # when: torch
import torch.nn as nn  # when: torch
import torch.nn.functional as F  # when: torch
from torchvision import models  # when: resnet18
