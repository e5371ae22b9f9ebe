"""The offline coder's component grammar: what a pipeline is made of, what each choice costs to
run, and how a choice reads in words. How the simulated agent picks choices is in sampling.py (and
guidance.py, for the human's guidance); how a choice becomes a real, runnable `solution.py` is in
composer.py, from the Python files in templates/.

A component choice is a plain dict (JSON-able, recorded in node_created.components and in the
code's header comment):

    model            logreg | gbm | cnn | resnet18
    image_size       pixels (square resize)
    colour           none | grey_world            (colour constancy)
    standardise      per-image standardisation (z-score) of pixel values
    filter_non_neoplastic   drop non-neoplastic rows (malignant vs benign only)
    drop_unknown_tone       drop rows whose skin tone is unknown (-1)
    fairness         none | reweight | upsample | group_balanced
    selection        overall | minimax            (model/epoch choice on worst-group val AUC)
    monitor_groups   print per-group validation AUC
    hp               model hyperparameters
    bug              None | key_error | shape | missing_import | slow   (injected failure)
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MODEL_NAMES = {  # each model, as a plan names it
    "logreg": "colour/texture features + logistic regression",
    "gbm": "colour/texture features + gradient boosting",
    "cnn": "a small CNN (PyTorch)",
    "resnet18": "ResNet-18 (torchvision)",
}
MODELS = tuple(MODEL_NAMES)
FAIRNESS_NAMES = {  # each fairness intervention, as a plan names it
    "none": "no fairness intervention",
    "reweight": "group reweighting (inverse skin-tone group frequency)",
    "upsample": "upsampling the darker skin-tone groups",
    "group_balanced": "a group-balanced loss (inverse group x label frequency)",
}
FAIRNESS = tuple(FAIRNESS_NAMES)
BUGS = ("key_error", "shape", "missing_import", "slow")
LEVELS = ("base", "fairness-hint", "fairness-metric", "fairness-methods", "custom")
HEADER_TAG = "# befair-components: "

DEFAULT_HP: dict[str, dict[str, Any]] = {
    "logreg": {"C": 1.0},
    "gbm": {"max_iter": 150, "learning_rate": 0.1},
    "cnn": {"epochs": 4, "lr": 0.002, "batch_size": 64},
    "resnet18": {"epochs": 1, "lr": 0.001, "batch_size": 32},
}
HP_CHOICES: dict[str, dict[str, list[Any]]] = {
    "logreg": {"C": [0.1, 0.3, 1.0, 3.0]},
    "gbm": {"max_iter": [100, 150, 250], "learning_rate": [0.05, 0.1, 0.2]},
    "cnn": {"epochs": [3, 4, 6], "lr": [0.001, 0.002, 0.004], "batch_size": [32, 64]},
    "resnet18": {"epochs": [1, 2], "lr": [0.0005, 0.001, 0.002], "batch_size": [32]},
}
IMAGE_SIZES = {"logreg": [48, 64, 96], "gbm": [48, 64, 96], "cnn": [32, 48, 64], "resnet18": [32, 48]}


# --------------------------------------------------------------------------- compute fitting
# Seconds a pipeline takes on SynthDerm's default 2,000 training images (start, imports, image
# loading, training, its own validation), measured on a busy 2-core CPU (load ~4): the fixed part
# per model and the part per epoch at 32 px (scaled by pixel count, which over-estimates a little).
# A GPU runs the torch part ~15x faster.
_CPU_FIXED = {"logreg": 8.0, "gbm": 14.0, "cnn": 30.0, "resnet18": 35.0}
_CPU_EPOCH_32PX = {"cnn": 10.0, "resnet18": 100.0}
_GPU_SPEEDUP = 15.0
FIT_SHARE = 0.2  # a choice fits when its estimate is at most this share of the step limit (load: x5)


@dataclass(frozen=True)
class Compute:
    """What a node's run gets: its device and the seconds one step may take."""
    device: str = "cpu"          # "cpu" or "cuda[:n]"
    step_timeout: float = 600.0

    @property
    def gpu(self) -> bool:
        return self.device.startswith("cuda")

    def seconds(self, c: dict[str, Any]) -> float:
        """The estimated run time of a component choice on this device."""
        model = c["model"]
        fixed = _CPU_FIXED[model] * (c["image_size"] / 48) ** 2 if model in ("logreg", "gbm") else _CPU_FIXED[model]
        per_epoch = _CPU_EPOCH_32PX.get(model, 0.0) * (c["image_size"] / 32) ** 2
        if self.gpu:
            per_epoch /= _GPU_SPEEDUP
        if model == "gbm":
            fixed *= float(c["hp"].get("max_iter", 150)) / 150
        return float(fixed + per_epoch * int(c["hp"].get("epochs", 0)))

    def fits(self, c: dict[str, Any]) -> bool:
        return self.seconds(c) <= FIT_SHARE * self.step_timeout

    def options(self, c: dict[str, Any], key: str, values: list[Any]) -> list[Any]:
        """The values of an image size (key "image_size") or a hyperparameter ("hp.<name>")
        that keep c within the step limit; the cheapest one when none does."""
        def with_value(v: Any) -> dict[str, Any]:
            probe: dict[str, Any] = json.loads(json.dumps(c))
            if key == "image_size":
                probe["image_size"] = v
            else:
                probe["hp"][key[3:]] = v
            return probe
        fitting = [v for v in values if self.fits(with_value(v))]
        return fitting or [min(values, key=lambda v: self.seconds(with_value(v)))]

    def models(self) -> list[str]:
        """The models whose cheapest configuration fits."""
        out = [m for m in MODELS if self.fits(cheapest(m))]
        return out or ["logreg"]


def cheapest(model: str) -> dict[str, Any]:
    c = default_components(model)
    c["image_size"] = min(IMAGE_SIZES[model])
    for name, values in HP_CHOICES[model].items():
        if name in ("epochs", "max_iter"):
            c["hp"][name] = min(values)
    return c


def fit_to(c: dict[str, Any], compute: Compute | None) -> dict[str, Any]:
    """c with image size and costly hyperparameters brought within the step limit (a model
    that cannot fit at all is kept: guidance may have asked for it)."""
    if compute is None or compute.fits(c):
        return c
    c["image_size"] = min(compute.options(c, "image_size", IMAGE_SIZES[c["model"]]),
                          key=lambda v: abs(v - c["image_size"]))
    for name in ("epochs", "max_iter"):
        if name in c["hp"] and not compute.fits(c):
            c["hp"][name] = max(compute.options(c, f"hp.{name}", HP_CHOICES[c["model"]][name]))
    return c


def set_model(c: dict[str, Any], model: str) -> None:
    """Switch c to another model, with that model's default hyperparameters."""
    c["model"] = model
    c["hp"] = dict(DEFAULT_HP[model])
    if c["image_size"] not in IMAGE_SIZES[model]:
        c["image_size"] = 48


def uses_skin_tone(c: dict[str, Any]) -> bool:
    return bool(c.get("drop_unknown_tone") or c.get("fairness", "none") != "none"
                or c.get("selection") == "minimax" or c.get("monitor_groups"))


def default_components(model: str = "logreg") -> dict[str, Any]:
    return {
        "model": model, "image_size": 64, "colour": "none", "standardise": False,
        "filter_non_neoplastic": False, "drop_unknown_tone": False, "fairness": "none",
        "selection": "overall", "monitor_groups": False, "hp": dict(DEFAULT_HP[model]), "bug": None,
    }


def normalise(c: dict[str, Any] | None) -> dict[str, Any]:
    """Fill missing keys (components from an older or foreign node) with defaults."""
    c = dict(c or {})
    model: str = c["model"] if c.get("model") in MODELS else "logreg"
    out = default_components(model)
    out.update({k: v for k, v in c.items() if k in out})
    out["model"] = model
    hp = dict(DEFAULT_HP[model])
    hp.update({k: v for k, v in (c.get("hp") or {}).items() if k in hp})
    out["hp"] = hp
    if out["fairness"] not in FAIRNESS:
        out["fairness"] = "none"
    if out["selection"] not in ("overall", "minimax"):
        out["selection"] = "overall"
    if out["selection"] == "minimax":
        out["monitor_groups"] = True
    if out["bug"] not in BUGS:
        out["bug"] = None
    return out


def components_from_code(code: str | None) -> dict[str, Any] | None:
    """Read the component choice back from a pipeline's header comment."""
    for line in (code or "").splitlines()[:40]:
        if line.startswith(HEADER_TAG):
            try:
                return normalise(json.loads(line[len(HEADER_TAG):]))
            except ValueError:
                return None
    return None


HP_WORDS: dict[str, str] = {  # hyperparameter -> how a plan says it ({} is the value)
    "C": "regularisation strength C={}",
    "max_iter": "{} boosting rounds",
    "learning_rate": "learning rate {}",
    "epochs": "{} epochs (passes over the data)",
    "lr": "learning rate {}",
    "batch_size": "batches of {} images",
}
# What an injected failure makes a node do, in words: a simulated failure, never a property of a
# pipeline (it is kept out of the code's header; see render).
INJECTED_FAILURES = {
    "key_error": "read a column that does not exist (a KeyError)",
    "shape": "misalign its labels by one row (a shape error)",
    "missing_import": "leave out an import (a NameError)",
    "slow": "run slowly (far too many epochs, or a slow loop)",
}


def _hp_words(hp: dict[str, Any]) -> str:
    return ", ".join(HP_WORDS.get(k, f"{k} = {{}}").format(v) for k, v in hp.items())


def _fairness_words(c: dict[str, Any]) -> list[str]:
    """What the pipeline does about skin tone, without contradicting itself: choosing the model by
    its worst skin-tone group is itself a fairness step, even when training is left alone."""
    out = []
    if c["fairness"] != "none":
        out.append(FAIRNESS_NAMES[c["fairness"]])
    elif c["selection"] == "minimax" or c["monitor_groups"]:
        out.append("training treats every skin tone alike")
    if c["selection"] == "minimax":
        out.append("the model kept is the one whose worst skin-tone group scores best on its own "
                   "validation split (minimax)")
    elif c["monitor_groups"]:
        out.append("it prints the AUC of each skin-tone group on its own validation split")
    if c["drop_unknown_tone"]:
        out.append("rows whose skin tone is unknown are left out")
    return out


def without_injected_failure(code: str) -> str:
    """The code with its header's record of an injected failure removed (code written before the
    header left it out): what an export hands on is the pipeline, not the simulation's doing."""
    lines = code.splitlines(keepends=True)
    for i, line in enumerate(lines[:40]):
        if line.startswith(HEADER_TAG):
            try:
                choice = json.loads(line[len(HEADER_TAG):])
            except ValueError:
                return code
            if isinstance(choice, dict) and "bug" in choice:
                choice.pop("bug")
                end = "\n" if line.endswith("\n") else ""
                lines[i] = HEADER_TAG + json.dumps(choice, sort_keys=True) + end
            return "".join(lines)
    return code


def describe(c: dict[str, Any]) -> list[str]:
    """What the pipeline does, in words (for plans and the code's header)."""
    pre = [f"resized to {c['image_size']} px"]
    if c["colour"] == "grey_world":
        pre.append("colours balanced (grey-world colour constancy)")
    if c["standardise"]:
        pre.append("pixel values standardised per image")
    data = ["malignant lesions against all others"]
    if c["filter_non_neoplastic"]:
        data.append("non-neoplastic lesions left out")
    hp = _hp_words(c["hp"])
    lines = [
        f"model: {MODEL_NAMES[c['model']]}" + (f"; {hp}" if hp else ""),
        f"images: {', '.join(pre)}",
        f"training data: {', '.join(data)}",
    ]
    if uses_skin_tone(c):
        lines.append(f"skin tone: {'; '.join(_fairness_words(c))}")
    else:
        lines.append("skin tone: not used")
    return lines


def injected_failure(c: dict[str, Any] | None) -> str | None:
    """"simulated agent: this node was made to …" for a node the offline coder made fail on
    purpose (so the debug path runs), else None."""
    bug = (c or {}).get("bug")
    if bug not in INJECTED_FAILURES:
        return None
    return f"simulated agent: this node was made to {INJECTED_FAILURES[bug]}"
