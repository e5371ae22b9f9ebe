"""The ResNet-18 of a `resnet18` pipeline (ImageNet weights only where they are already on disk)."""
import os

import torch
import torch.nn as nn
from torchvision import models

# --- solution.py ---
RESNET_WEIGHTS = "resnet18-f37072fd.pth"


def build_model(pretrained=False):
    model = models.resnet18(weights=None)
    if pretrained:
        path = os.path.join(torch.hub.get_dir(), "checkpoints", RESNET_WEIGHTS)
        if os.path.exists(path):
            model.load_state_dict(torch.load(path, map_location="cpu"))
            print("Using ImageNet weights from", path)
        else:
            print("Notice: no pretrained ResNet-18 weights are available offline; "
                  "training from random initialisation.")
    model.fc = nn.Linear(model.fc.in_features, 1)
    return model
