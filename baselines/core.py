"""The MEDFAIR ResNet-18 pipeline's compute core, self-contained.

This module imports only torch, torchvision, numpy and PIL: its source is also the first half of
every exported ``solution.py`` (see baselines/export.py), so the pipelines trained here and the
ones run as nodes in a session share one implementation.

MEDFAIR (Zong et al., ICLR 2023) trains with ``Resize(256)``, ``RandomHorizontalFlip``,
``RandomRotation(±15°)``, ``RandomCrop(224)``, ``ToTensor``, ImageNet ``Normalize``, applied per
sample by PIL every epoch, and evaluates with ``Resize(256)`` + ``CenterCrop(224)``. Here:

* each image is decoded once into a uint8 tensor at the working resolution (``resize_for(size)``,
  256 for 224): shorter side resized, then centre-cropped to a square (Fitzpatrick17k images
  vary in aspect; a square store lets a whole batch be one tensor);
* augmentation runs on the device, one batch at a time: flip, rotation and random crop are one
  affine map per image, sampled with ``affine_grid``/``grid_sample`` (bilinear, zero fill as
  torchvision's rotation fills 0 before normalisation);
* evaluation is the centre crop of the stored square;
* the model is torchvision's ResNet-18 with a single-logit head; ImageNet weights are used only
  when the checkpoint is already in the torch hub cache (never downloaded).
"""
from __future__ import annotations

import math
import os
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)
ROTATION_DEGREES = 15.0
RESNET18_FILE = "resnet18-f37072fd.pth"  # torchvision's ResNet18_Weights.IMAGENET1K_V1


def resize_for(size: int) -> int:
    """MEDFAIR's 256/224 ratio at any working size (224 -> 256, 56 -> 64)."""
    return int(round(size * 256 / 224))


# --------------------------------------------------------------------------- decoding


def decode_image(path: str | os.PathLike[str], resize: int) -> np.ndarray:
    """One image as uint8 HWC (resize x resize): RGB, shorter side -> resize, centre square."""
    with Image.open(path) as src:
        im = src.convert("RGB")
        w, h = im.size
        scale = resize / min(w, h)
        nw, nh = max(resize, int(round(w * scale))), max(resize, int(round(h * scale)))
        im = im.resize((nw, nh), Image.Resampling.BILINEAR)
        left, top = (nw - resize) // 2, (nh - resize) // 2
        im = im.crop((left, top, left + resize, top + resize))
        return np.asarray(im, dtype=np.uint8).copy()


def decode_images(paths: Sequence[str | os.PathLike[str]], resize: int) -> torch.Tensor:
    """Decode every image once into one uint8 tensor N x 3 x resize x resize."""
    # numpy does the HWC -> CHW copy: torch's copy starts its intra-op thread pool per image, and in
    # the decoding processes (one per core) those pools oversubscribe the CPU (H100 host: 131 img/s).
    out = np.empty((len(paths), 3, resize, resize), dtype=np.uint8)
    for i, p in enumerate(paths):
        out[i] = decode_image(p, resize).transpose(2, 0, 1)
    return torch.from_numpy(out)


# --------------------------------------------------------------------------- augmentation


def _normalise(x: torch.Tensor) -> torch.Tensor:
    mean = torch.tensor(IMAGENET_MEAN, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    std = torch.tensor(IMAGENET_STD, device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    return (x - mean) / std


def augment_params(n: int, resize: int, size: int, generator: torch.Generator | None = None,
                   ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random flips, angles (degrees) and integer crop offsets for n images (drawn on the CPU)."""
    flip = torch.rand(n, generator=generator) < 0.5
    angle = (torch.rand(n, generator=generator) * 2 - 1) * ROTATION_DEGREES
    span = resize - size + 1
    ox = torch.randint(0, span, (n,), generator=generator)
    oy = torch.randint(0, span, (n,), generator=generator)
    return flip, angle, ox, oy


def affine_theta(flip: torch.Tensor, angle: torch.Tensor, ox: torch.Tensor, oy: torch.Tensor, resize: int,
                 size: int) -> torch.Tensor:
    """The n x 2 x 3 sampling matrices (affine_grid, align_corners=False) that map each output
    pixel of a size x size crop to the stored resize x resize image: crop at (ox, oy) of the
    image rotated by `angle` about its centre, after an optional horizontal flip."""
    n = flip.shape[0]
    R, S = float(resize), float(size)
    eye = torch.eye(3, dtype=torch.float64).expand(n, 3, 3).clone()
    # output normalised coords -> output pixel coords (continuous, pixel i spans [i, i+1))
    m_out = eye.clone()
    m_out[:, 0, 0] = m_out[:, 1, 1] = S / 2
    m_out[:, 0, 2] = m_out[:, 1, 2] = S / 2
    crop = eye.clone()
    crop[:, 0, 2] = ox.double()
    crop[:, 1, 2] = oy.double()
    # inverse rotation about the centre of the stored image
    a = angle.double() * math.pi / 180
    c, s = torch.cos(a), torch.sin(a)
    rot = eye.clone()
    rot[:, 0, 0], rot[:, 0, 1] = c, s
    rot[:, 1, 0], rot[:, 1, 1] = -s, c
    centre = R / 2
    rot[:, 0, 2] = centre - (c * centre + s * centre)
    rot[:, 1, 2] = centre - (-s * centre + c * centre)
    fl = eye.clone()
    fl[flip, 0, 0] = -1.0
    fl[flip, 0, 2] = R
    n_in = eye.clone()
    n_in[:, 0, 0] = n_in[:, 1, 1] = 2 / R
    n_in[:, 0, 2] = n_in[:, 1, 2] = -1.0
    theta = n_in @ fl @ rot @ crop @ m_out
    return theta[:, :2, :].float()


def augment_batch(x_uint8: torch.Tensor, size: int, generator: torch.Generator | None = None,
                  dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """MEDFAIR's training transform on a whole batch, on whatever device the batch lives:
    flip + rotation ±15° + random crop, then ImageNet normalisation."""
    n, _, resize, _ = x_uint8.shape
    params = augment_params(n, resize, size, generator)
    theta = affine_theta(*params, resize=resize, size=size).to(x_uint8.device, dtype)
    x = x_uint8.to(dtype).div_(255)
    grid = F.affine_grid(theta, [n, 3, size, size], align_corners=False)
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
    return _normalise(x)


def eval_batch(x_uint8: torch.Tensor, size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """MEDFAIR's evaluation transform: centre crop of the stored square, then normalisation."""
    resize = x_uint8.shape[-1]
    o = (resize - size) // 2
    x = x_uint8[:, :, o:o + size, o:o + size].to(dtype).div_(255)
    return _normalise(x)


# --------------------------------------------------------------------------- the model


def imagenet_checkpoint() -> str | None:
    """The ResNet-18 ImageNet checkpoint in the torch hub cache, if one is there (offline)."""
    hub = torch.hub.get_dir()
    for name in (RESNET18_FILE,):
        path = os.path.join(hub, "checkpoints", name)
        if os.path.isfile(path):
            return path
    return None


def build_model(weights: str = "auto") -> tuple[torch.nn.Module, str]:
    """ResNet-18 with a single-logit head. weights: "auto" (ImageNet when cached, else random),
    "imagenet" (required), "random". Returns (model, description of the weights used)."""
    import torchvision

    model = torchvision.models.resnet18(weights=None)
    path = imagenet_checkpoint() if weights in ("auto", "imagenet") else None
    if weights == "imagenet" and path is None:
        raise FileNotFoundError(
            f"no ImageNet ResNet-18 checkpoint in {torch.hub.get_dir()}/checkpoints "
            f"({RESNET18_FILE}); it is never downloaded"
        )
    if path is not None:
        model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
        used = f"imagenet ({path})"
    else:
        used = "random init (no ImageNet ResNet-18 in the torch hub cache; never downloaded)"
    model.fc = torch.nn.Linear(model.fc.in_features, 1)
    return model, used


def pick_device(device: str | None = None) -> torch.device:
    device = device or os.environ.get("BEFAIR_DEVICE") or "auto"
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device)


def prepare_model(model: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    model = model.to(device)
    if device.type == "cuda":
        model = model.to(memory_format=torch.channels_last)
    return model


def _autocast(device: torch.device) -> torch.autocast:
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return torch.autocast("cpu", enabled=False)


def train_epoch(model: torch.nn.Module, optimizer: torch.optim.Optimizer, images: torch.Tensor,
                labels: torch.Tensor, *, size: int, batch_size: int, device: torch.device, generator: torch.Generator,
                on_batch: Callable[[int], None] | None = None) -> float:
    """One epoch over a uint8 image store (on `device` or the CPU). Returns the mean loss.
    `on_batch(images_done)` is called after each batch (progress)."""
    model.train()
    n = images.shape[0]
    order = torch.randperm(n, generator=generator)
    total, seen = 0.0, 0
    for start in range(0, n, batch_size):
        idx = order[start:start + batch_size]
        if idx.numel() < 2 and seen:  # BatchNorm cannot train on a single image
            continue
        xb = images[idx.to(images.device)].to(device, non_blocking=True)
        yb = labels[idx.to(labels.device)].to(device, non_blocking=True).float()
        x = augment_batch(xb, size, generator)
        if device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with _autocast(device):
            logits = model(x).float().squeeze(1)
        loss = F.binary_cross_entropy_with_logits(logits, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]  # torch's Tensor.backward has no annotations
        optimizer.step()
        total += float(loss.detach()) * idx.numel()
        seen += idx.numel()
        if on_batch is not None:
            on_batch(min(start + batch_size, n))
    return total / max(seen, 1)


@torch.no_grad()
def predict_scores(model: torch.nn.Module, images: torch.Tensor, *, size: int, batch_size: int,
                   device: torch.device) -> np.ndarray:
    """Malignancy probabilities for a uint8 image store (centre crop, no augmentation)."""
    model.eval()
    out = []
    for start in range(0, images.shape[0], batch_size):
        xb = images[start:start + batch_size].to(device, non_blocking=True)
        x = eval_batch(xb, size)
        if device.type == "cuda":
            x = x.contiguous(memory_format=torch.channels_last)
        with _autocast(device):
            logits = model(x).float().squeeze(1)
        out.append(torch.sigmoid(logits).cpu())
    return torch.cat(out).numpy().astype(np.float64) if out else np.zeros(0)


def worst_group_rank(group_auc: Mapping[str, float | None]) -> tuple[float, float]:
    """The minimax-Pareto rank of a vector of per-group AUCs: (worst, mean) over groups that have
    one. The candidate with the highest rank is always on the Pareto front."""
    vals = [float(v) for v in group_auc.values() if v is not None and not math.isnan(float(v))]
    if not vals:
        return (-math.inf, -math.inf)
    return (min(vals), sum(vals) / len(vals))
