"""The offline coder's component grammar: what a pipeline is made of, how the simulated agent
samples and mutates it (biased by the instruction level and the human's guidance), and how a
component choice is rendered into a real, runnable `solution.py`.

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

Every rendered pipeline follows the contract: run as a script it reads input/skin_lesions.csv and
input/images, makes its own train/validation split, prints `Validation AUROC: <x>` and saves its
model in working/; imported, its module-level `predict(folder)` loads that model and returns
{filename: probability}. Pipelines of the base level never touch the skin-tone column.
"""
from __future__ import annotations

import json
import random
import re
import textwrap
from dataclasses import dataclass
from typing import Any

MODELS = ("logreg", "gbm", "cnn", "resnet18")
MODEL_NAMES = {
    "logreg": "colour/texture features + logistic regression",
    "gbm": "colour/texture features + gradient boosting",
    "cnn": "a small CNN (PyTorch)",
    "resnet18": "ResNet-18 (torchvision)",
}
FAIRNESS = ("none", "reweight", "upsample", "group_balanced")
FAIRNESS_NAMES = {
    "none": "no fairness intervention",
    "reweight": "group reweighting (inverse skin-tone group frequency)",
    "upsample": "upsampling the darker skin-tone groups",
    "group_balanced": "a group-balanced loss (inverse group x label frequency)",
}
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
        out = [m for m in MODELS if self.fits(_cheapest(m))]
        return out or ["logreg"]


def _cheapest(model: str) -> dict[str, Any]:
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


# --------------------------------------------------------------------------- guidance

@dataclass
class Directive:
    key: str            # component key ("model", "fairness", ...) or "hp.epochs" etc.
    value: Any
    phrase: str         # what in the text asked for it
    text: str           # the guidance text it came from

    def label(self) -> str:
        v = self.value
        if self.key == "model":
            return MODEL_NAMES[v]
        if self.key == "fairness":
            return FAIRNESS_NAMES[v]
        if self.key == "colour":
            return "grey-world colour constancy" if v == "grey_world" else "no colour constancy"
        if self.key == "selection":
            return "minimax (worst-group) selection" if v == "minimax" else "selection on overall AUC"
        if self.key == "filter_non_neoplastic":
            return "drop non-neoplastic lesions" if v else "keep non-neoplastic lesions"
        if self.key == "drop_unknown_tone":
            return "drop unknown skin tone" if v else "keep unknown skin tone"
        if self.key == "standardise":
            return "per-image standardisation" if v else "no per-image standardisation"
        if self.key == "monitor_groups":
            return "monitor per-group AUC"
        if self.key == "image_size":
            return f"image size {v} px"
        if self.key.startswith("hp."):
            return f"{self.key[3:]} = {v}"
        return f"{self.key} = {v}"


_NEG = re.compile(r"\b(no|not|don'?t|do not|never|avoid|without|stop|instead of|rather than)\b[\w\s-]{0,20}$")
_RULES: list[tuple[str, str, Any, Any]] = [
    # (regex, key, value, value when negated)
    (r"re-?weight|weighting|weighted loss|weight(?:s)? (?:the )?(?:loss|samples|groups)",
     "fairness", "reweight", "none"),
    (r"up-?sampl|over-?sampl|oversample", "fairness", "upsample", "none"),
    (r"group[- ]balanced|balanced loss|balance (?:the )?loss", "fairness", "group_balanced", "none"),
    (r"colou?r (?:normali[sz]|constan|correct|balanc)|gr[ae]y[- ]?world|white[- ]balanc",
     "colour", "grey_world", "none"),
    (r"pareto|minimax|min-max|worst[- ]group|worst[- ]case group", "selection", "minimax", "overall"),
    (r"resnet", "model", "resnet18", None),
    (r"\bcnns?\b|convolutional", "model", "cnn", None),
    (r"gradient[- ]boost|boosting|\bgbm\b|xgboost|lightgbm|boosted trees", "model", "gbm", None),
    (r"logistic", "model", "logreg", None),
    (r"non-?neoplastic|filter(?:ing)? (?:the )?(?:data|rows|lesions|labels)|\bfilter\b",
     "filter_non_neoplastic", True, False),
    (r"unknown (?:skin[- ]?)?tone|missing (?:skin[- ]?)?tone|unknown fitzpatrick", "drop_unknown_tone", True, False),
    (r"standardi[sz]|z-?score|per[- ]image normali[sz]", "standardise", True, False),
    (r"monitor|per[- ]group|each group|every group|group auc|subgroup", "monitor_groups", True, None),
]


def parse_guidance(texts: list[str]) -> list[Directive]:
    """Directives (component choices) in guidance texts, in the order they appear."""
    out: list[Directive] = []
    for text in texts:
        low = (text or "").lower()
        found: list[tuple[int, Directive]] = []
        for pattern, key, value, negated in _RULES:
            for m in re.finditer(pattern, low):
                neg = bool(_NEG.search(low[max(0, m.start() - 40):m.start()]))
                if neg and negated is None:
                    if key == "model":
                        found.append((m.start(), Directive("model!", value, m.group(0), text)))
                    continue
                found.append((m.start(), Directive(key, negated if neg else value, m.group(0), text)))
                break
        for m in re.finditer(r"(\d{1,3})\s*epochs?", low):
            found.append((m.start(), Directive("hp.epochs", max(1, min(20, int(m.group(1)))), m.group(0), text)))
        if re.search(r"more epochs|train longer|longer training", low):
            at = low.find("epoch") if "epoch" in low else 0
            found.append((at, Directive("hp.epochs", "+1", "more epochs", text)))
        for m in re.finditer(r"(\d{2,3})\s*(?:px|pixels?)|image size (?:of )?(\d{2,3})", low):
            size = int(m.group(1) or m.group(2))
            found.append((m.start(), Directive("image_size", max(24, min(128, size)), m.group(0), text)))
        found.sort(key=lambda t: t[0])
        seen: set[str] = set()
        for _, d in found:
            if d.key not in seen:
                seen.add(d.key)
                out.append(d)
    # a later directive on the same key wins
    last: dict[str, Directive] = {}
    for d in out:
        last.pop(d.key, None)
        last[d.key] = d
    return list(last.values())


def apply_directive(c: dict[str, Any], d: Directive, rng: random.Random) -> bool:
    """Apply one directive to c in place; True when it changed something."""
    before = json.dumps(c, sort_keys=True)
    if d.key == "model!":
        if c["model"] == d.value:
            _set_model(c, rng.choice([m for m in MODELS if m not in (d.value, "resnet18")]))
    elif d.key == "model":
        if c["model"] != d.value:
            _set_model(c, d.value)
    elif d.key.startswith("hp."):
        name = d.key[3:]
        if name in c["hp"]:
            c["hp"][name] = c["hp"][name] + 1 if d.value == "+1" else d.value
    elif d.key == "selection":
        c["selection"] = d.value
        if d.value == "minimax":
            c["monitor_groups"] = True
    else:
        c[d.key] = d.value
    return json.dumps(c, sort_keys=True) != before


def satisfied(c: dict[str, Any], d: Directive) -> bool:
    probe = json.loads(json.dumps(c))
    return not apply_directive(probe, d, random.Random(0))


def _set_model(c: dict[str, Any], model: str) -> None:
    c["model"] = model
    c["hp"] = dict(DEFAULT_HP[model])
    if c["image_size"] not in IMAGE_SIZES[model]:
        c["image_size"] = 48


# --------------------------------------------------------------------------- sampling


def _weighted(rng: random.Random, options: dict[Any, float]) -> Any:
    keys = list(options)
    return rng.choices(keys, weights=[options[k] for k in keys], k=1)[0]


def level_profile(level: str, instruction: str = "") -> str:
    """The behaviour profile of a level (custom: read from its text)."""
    if level != "custom":
        return level if level in LEVELS else "base"
    low = instruction.lower()
    if re.search(r"reweight|upsampl|oversampl|filter|pareto|minimax", low):
        return "fairness-methods"
    if re.search(r"gap|per[- ]group|auroc .*skin|skin.*auroc", low):
        return "fairness-metric"
    if re.search(r"fair|skin|tone|bias", low):
        return "fairness-hint"
    return "base"


def sample_draft(rng: random.Random, profile: str, compute: Compute | None = None) -> dict[str, Any]:
    """A fresh pipeline, as the study saw agents draft them at this level; with `compute`, only
    models and sizes whose run fits the device and the step limit (light models on a CPU)."""
    weights = {"logreg": 0.35, "gbm": 0.25, "cnn": 0.25, "resnet18": 0.15}
    if compute is not None:
        allowed = compute.models()
        weights = {m: w for m, w in weights.items() if m in allowed}
    model = _weighted(rng, weights)
    c = default_components(model)
    c["image_size"] = rng.choice(IMAGE_SIZES[model] if compute is None else
                                 compute.options(_cheapest(model), "image_size", IMAGE_SIZES[model]))
    c["hp"] = {k: rng.choice(v) for k, v in HP_CHOICES[model].items()}
    c = fit_to(c, compute)
    c["colour"] = "grey_world" if rng.random() < 0.15 else "none"
    c["standardise"] = rng.random() < 0.3
    c["filter_non_neoplastic"] = rng.random() < 0.2
    if profile == "fairness-hint":
        if rng.random() < 0.2:  # rarely does anything about skin tone
            what = _weighted(rng, {"drop": 0.4, "monitor": 0.3, "reweight": 0.3})
            if what == "drop":
                c["drop_unknown_tone"] = True
            elif what == "monitor":
                c["monitor_groups"] = True
            else:
                c["fairness"] = "reweight"
    elif profile == "fairness-metric":
        c["monitor_groups"] = rng.random() < 0.5  # per-group AUC about half the time
        c["drop_unknown_tone"] = rng.random() < 0.3
        if rng.random() < 0.25:
            c["fairness"] = _weighted(rng, {"reweight": 0.5, "upsample": 0.3, "group_balanced": 0.2})
        if c["monitor_groups"] and rng.random() < 0.15:
            c["selection"] = "minimax"
    elif profile == "fairness-methods":
        c["monitor_groups"] = rng.random() < 0.8
        c["drop_unknown_tone"] = rng.random() < 0.5
        what = _weighted(rng, {"reweight": 0.5, "upsample": 0.2, "group_balanced": 0.1,
                               "filter": 0.1, "minimax": 0.1})
        if what == "filter":
            c["filter_non_neoplastic"] = True
            c["drop_unknown_tone"] = True
        elif what == "minimax":
            c["selection"] = "minimax"
            c["monitor_groups"] = True
        else:
            c["fairness"] = what
    return normalise(c)


def mutate_one(rng: random.Random, c: dict[str, Any], profile: str,
               compute: Compute | None = None) -> tuple[dict[str, Any], str]:
    """Change one component of c (level-biased); returns the new choice and what changed. With
    `compute`, the change keeps the run within the device's step limit."""
    c, change = _mutate(rng, c, profile, compute)
    return fit_to(c, compute), change


def _mutate(rng: random.Random, c: dict[str, Any], profile: str,
            compute: Compute | None) -> tuple[dict[str, Any], str]:
    c = json.loads(json.dumps(c))
    c["bug"] = None
    axes: dict[str, float] = {"model": 1.0, "hp": 2.0, "image_size": 0.7, "colour": 0.8,
                              "standardise": 0.6, "filter_non_neoplastic": 0.4}
    if profile == "fairness-hint":
        axes.update({"fairness": 0.3, "monitor_groups": 0.2, "drop_unknown_tone": 0.2})
    elif profile == "fairness-metric":
        axes.update({"fairness": 1.0, "monitor_groups": 0.8 if not c["monitor_groups"] else 0.0,
                     "selection": 0.6, "drop_unknown_tone": 0.3})
    elif profile == "fairness-methods":
        axes.update({"fairness": 2.5, "selection": 1.0, "monitor_groups": 0.5 if not c["monitor_groups"] else 0.0,
                     "drop_unknown_tone": 0.4, "colour": 1.2})
    axes = {k: v for k, v in axes.items() if v > 0}
    axis = _weighted(rng, axes)
    if axis == "model":
        models = MODELS if compute is None else compute.models()
        new = rng.choice([m for m in models if m != c["model"]] or ["logreg" if c["model"] != "logreg" else "gbm"])
        _set_model(c, new)
        return c, f"switch the model to {MODEL_NAMES[new]}"
    if axis == "hp":
        name = rng.choice(sorted(HP_CHOICES[c["model"]]))
        choices = HP_CHOICES[c["model"]][name]
        if compute is not None:
            choices = compute.options(c, f"hp.{name}", choices)
        options = [v for v in choices if v != c["hp"].get(name)] or choices
        c["hp"][name] = rng.choice(options)
        return c, f"tune {name} to {c['hp'][name]}"
    if axis == "image_size":
        sizes = IMAGE_SIZES[c["model"]]
        if compute is not None:
            sizes = compute.options(c, "image_size", sizes)
        options = [s for s in sizes if s != c["image_size"]] or [c["image_size"]]
        c["image_size"] = rng.choice(options)
        return c, f"resize images to {c['image_size']} px"
    if axis == "colour":
        c["colour"] = "none" if c["colour"] == "grey_world" else "grey_world"
        return c, ("add grey-world colour constancy" if c["colour"] == "grey_world" else "remove colour constancy")
    if axis == "standardise":
        c["standardise"] = not c["standardise"]
        return c, ("add per-image standardisation" if c["standardise"] else "remove per-image standardisation")
    if axis == "filter_non_neoplastic":
        c["filter_non_neoplastic"] = not c["filter_non_neoplastic"]
        return c, ("drop non-neoplastic lesions" if c["filter_non_neoplastic"] else "keep non-neoplastic lesions")
    if axis == "fairness":
        weights = {"reweight": 0.5, "upsample": 0.25, "group_balanced": 0.15, "none": 0.1}
        weights.pop(c["fairness"], None)
        if profile == "fairness-methods":
            weights.pop("none", None)
        c["fairness"] = _weighted(rng, weights)
        return c, f"use {FAIRNESS_NAMES[c['fairness']]}"
    if axis == "selection":
        c["selection"] = "overall" if c["selection"] == "minimax" else "minimax"
        if c["selection"] == "minimax":
            c["monitor_groups"] = True
        return c, ("select the model on worst-group validation AUC (minimax)"
                   if c["selection"] == "minimax" else "select the model on overall validation AUC")
    if axis == "monitor_groups":
        c["monitor_groups"] = True
        return c, "monitor per-group validation AUC"
    c["drop_unknown_tone"] = not c["drop_unknown_tone"]
    return c, ("drop rows with unknown skin tone" if c["drop_unknown_tone"] else "keep rows with unknown skin tone")


def lighten(c: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A cheaper variant of c (for a pipeline that timed out or ran out of memory)."""
    c = json.loads(json.dumps(c))
    c["bug"] = None
    if c["model"] in ("cnn", "resnet18"):
        if c["hp"].get("epochs", 1) > 1 or c["image_size"] > 32:
            c["hp"]["epochs"] = 1
            c["image_size"] = 32
            return c, "train for one epoch on 32 px images so it finishes in time"
        _set_model(c, "logreg")
        c["image_size"] = 48
        return c, "switch to colour/texture features + logistic regression, which is much cheaper"
    if c["image_size"] > 48:
        c["image_size"] = 48
        return c, "compute features on 48 px images"
    if c["model"] == "gbm":
        _set_model(c, "logreg")
        c["image_size"] = 48
        return c, "switch to logistic regression"
    c["selection"] = "overall"
    return c, "fit a single model instead of a grid"


# --------------------------------------------------------------------------- rendering


def render(c: dict[str, Any], plan: str) -> str:
    """The solution.py for a component choice."""
    c = normalise(c)
    torch_model = c["model"] in ("cnn", "resnet18")
    groups = uses_skin_tone(c)
    bug = c["bug"]
    parts: list[str] = []
    # the header records the pipeline's choices; an injected failure is the simulated agent's
    # doing, not a property of the code, so it stays in the node's record only
    comp_json = json.dumps({k: v for k, v in c.items() if k != "bug"}, sort_keys=True)
    header = ["# Pipeline written by the befair offline coder (a simulated agent).", "#"]
    header += [f"#   {line}" for line in describe(c)]
    header.append(HEADER_TAG + comp_json)
    parts.append("\n".join(header))
    doc = plan.replace('"""', "'''").strip() or "Skin-lesion malignancy classifier."
    parts.append('"""' + textwrap.fill(doc, 96, break_long_words=False, replace_whitespace=False) + '\n"""')

    imports = ["import os", "import pickle" if not torch_model else "import json", "",
               "import numpy as np", "import pandas as pd", "from PIL import Image"]
    if bug != "missing_import":
        imports.append("from sklearn.metrics import roc_auc_score")
    imports.append("from sklearn.model_selection import train_test_split")
    if c["model"] in ("logreg", "gbm"):
        imports.append("from sklearn.preprocessing import StandardScaler")
    if c["model"] == "logreg":
        imports.append("from sklearn.linear_model import LogisticRegression")
    if c["model"] == "gbm":
        imports.append("from sklearn.ensemble import HistGradientBoostingClassifier")
    if c["fairness"] == "upsample":
        imports.append("from sklearn.utils import resample")
    if torch_model:
        imports += ["import torch", "import torch.nn as nn", "import torch.nn.functional as F"]
    if c["model"] == "resnet18":
        imports.append("from torchvision import models")
    parts.append("\n".join(imports))

    consts = f'''
        HERE = os.path.dirname(os.path.abspath(__file__))
        INPUT_DIR = os.path.join(HERE, "input")
        WORKING_DIR = os.path.join(HERE, "working")
        MODEL_PATH = os.path.join(WORKING_DIR, "{'model.pt' if torch_model else 'model.pkl'}")
        IMAGE_SIZE = {int(c["image_size"])}
        SEED = 42
        IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp")
    '''
    parts.append(textwrap.dedent(consts).strip())

    load = ['def load_image(path):',
            '    """Read an RGB image, resize it and return float32 pixels in [0, 1] (H, W, 3)."""',
            '    img = Image.open(path).convert("RGB").resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)',
            '    x = np.asarray(img, dtype=np.float32) / 255.0']
    if c["colour"] == "grey_world":
        load += ['    # grey-world colour constancy: equalise the mean of each channel',
                 '    channel_means = x.reshape(-1, 3).mean(axis=0) + 1e-6',
                 '    x = np.clip(x * (channel_means.mean() / channel_means), 0.0, 1.0)']
    if c["standardise"]:
        load += ['    # per-image standardisation',
                 '    x = (x - x.mean()) / (x.std() + 1e-6)']
    load.append('    return x.astype(np.float32)')
    parts.append("\n".join(load))

    parts.append(textwrap.dedent('''
        def list_images(folder):
            return sorted(f for f in os.listdir(folder) if f.lower().endswith(IMAGE_EXTENSIONS))


        def image_paths(df, folder):
            files = {os.path.splitext(f)[0]: f for f in list_images(folder)}
            paths = []
            for name in df["image_name"].astype(str):
                stem = os.path.splitext(name)[0]
                paths.append(os.path.join(folder, files.get(stem, stem + ".jpg")))
            return paths
    ''').strip())

    if torch_model:
        parts.append(_torch_model_code(c))
    else:
        parts.append(_features_code())

    if groups:
        parts.append(_group_code(c))

    parts.append(_predict_code(c))
    parts.append(_main_code(c))
    parts.append('if __name__ == "__main__":\n    main()')
    return "\n\n\n".join(parts) + "\n"


def _features_code() -> str:
    return textwrap.dedent('''
        def extract_features(x):
            """Colour and texture features of one image (lesion vs surrounding skin)."""
            h, w, _ = x.shape
            grey = x.mean(axis=2)
            ch, cw = h // 4, w // 4
            centre = x[ch:h - ch, cw:w - cw].reshape(-1, 3)
            border = np.concatenate([x[:ch].reshape(-1, 3), x[h - ch:].reshape(-1, 3),
                                     x[:, :cw].reshape(-1, 3), x[:, w - cw:].reshape(-1, 3)])
            feats = []
            flat = x.reshape(-1, 3)
            feats += list(flat.mean(axis=0)) + list(flat.std(axis=0))
            feats += list(np.percentile(flat, [10, 50, 90], axis=0).ravel())
            feats += list(centre.mean(axis=0) - border.mean(axis=0))
            feats += list(centre.std(axis=0) / (border.std(axis=0) + 1e-3))
            gy, gx = np.gradient(grey)
            grad = np.hypot(gx, gy)
            feats += [grad.mean(), grad.std(), np.percentile(grad, 90)]
            lo, hi = float(grey.min()), float(grey.max())
            norm = (grey - lo) / (hi - lo + 1e-6)
            dark = norm < 0.5 * (np.median(norm) + norm.min())
            feats += [dark.mean(), np.abs(norm - norm[:, ::-1]).mean(), np.abs(norm - norm[::-1, :]).mean()]
            for channel in range(3):
                hist, _ = np.histogram(x[..., channel], bins=4, range=(float(x.min()), float(x.max()) + 1e-6))
                feats += list(hist / hist.sum())
            return np.asarray(feats, dtype=np.float32)
    ''').strip()


def _torch_model_code(c: dict[str, Any]) -> str:
    if c["model"] == "cnn":
        net = textwrap.dedent('''
            class SmallCNN(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.features = nn.Sequential(
                        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    )
                    self.head = nn.Linear(64, 1)

                def forward(self, x):
                    return self.head(self.features(x).flatten(1))


            def build_model(pretrained=False):
                return SmallCNN()
        ''').strip()
    else:
        net = textwrap.dedent('''
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
        ''').strip()
    helpers = textwrap.dedent('''
        def to_tensor(images):
            x = torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2).contiguous()
            if not STANDARDISED:
                x = (x - 0.5) / 0.25
            return x


        def score(model, x, device, batch_size=128):
            model.eval()
            out = []
            with torch.no_grad():
                for i in range(0, len(x), batch_size):
                    out.append(torch.sigmoid(model(x[i:i + batch_size].to(device)).squeeze(1)).cpu())
            return torch.cat(out).numpy() if out else np.zeros(0, dtype=np.float32)
    ''').strip()
    return f"STANDARDISED = {bool(c['standardise'])}\n\n\n{net}\n\n\n{helpers}"


def _group_code(c: dict[str, Any]) -> str:
    code = textwrap.dedent('''
        def tone_groups(skin_tone):
            """Fitzpatrick I-II -> 0, III-IV -> 1, V-VI -> 2, unknown -> -1."""
            tone = pd.to_numeric(skin_tone, errors="coerce").fillna(-1).astype(int).values
            return np.select([(tone >= 1) & (tone <= 2), (tone >= 3) & (tone <= 4), (tone >= 5) & (tone <= 6)],
                             [0, 1, 2], default=-1)


        def group_aucs(y_true, scores, groups):
            """Validation AUROC per skin-tone group (groups with both classes only)."""
            aucs = {}
            for g in sorted(set(groups.tolist())):
                if g < 0:
                    continue
                mask = groups == g
                if len(np.unique(y_true[mask])) == 2:
                    aucs[g] = roc_auc_score(y_true[mask], scores[mask])
            return aucs
    ''').strip()
    if c["fairness"] in ("reweight", "group_balanced"):
        if c["fairness"] == "reweight":
            code += "\n\n\n" + textwrap.dedent('''
                def group_weights(groups, labels):
                    """Inverse skin-tone group frequency, normalised to mean 1."""
                    counts = pd.Series(groups).value_counts()
                    weights = np.array([len(groups) / (len(counts) * counts[g]) for g in groups], dtype=np.float32)
                    return weights / weights.mean()
            ''').strip()
        else:
            code += "\n\n\n" + textwrap.dedent('''
                def group_weights(groups, labels):
                    """Group-balanced loss weights: inverse (skin-tone group, label) frequency."""
                    keys = pd.Series([f"{g}_{y}" for g, y in zip(groups, labels)])
                    counts = keys.value_counts()
                    weights = np.array([len(keys) / (len(counts) * counts[k]) for k in keys], dtype=np.float32)
                    return weights / weights.mean()
            ''').strip()
    if c["fairness"] == "upsample":
        code += "\n\n\n" + textwrap.dedent('''
            def upsample_darker_groups(train_idx, groups):
                """Upsample skin-tone groups III-IV and V-VI to the size of group I-II."""
                target = int((groups[train_idx] == 0).sum())
                extra = []
                for g in (1, 2):
                    members = train_idx[groups[train_idx] == g]
                    if 0 < len(members) < target:
                        extra.append(resample(members, replace=True, n_samples=target - len(members),
                                              random_state=SEED + g))
                return np.concatenate([train_idx] + extra) if extra else train_idx
        ''').strip()
    return code


def _predict_code(c: dict[str, Any]) -> str:
    if c["model"] in ("logreg", "gbm"):
        return textwrap.dedent('''
            def predict(folder):
                """Malignancy probability (0-1) for every image in folder: {filename: probability}."""
                with open(MODEL_PATH, "rb") as fh:
                    saved = pickle.load(fh)
                names = list_images(folder)
                if not names:
                    return {}
                X = np.stack([extract_features(load_image(os.path.join(folder, n))) for n in names])
                probs = saved["model"].predict_proba(saved["scaler"].transform(X))[:, 1]
                return {n: float(p) for n, p in zip(names, probs)}
        ''').strip()
    return textwrap.dedent('''
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
    ''').strip()


def _main_code(c: dict[str, Any]) -> str:
    groups = uses_skin_tone(c)
    bug = c["bug"]
    label_col = "diagnosis" if bug == "key_error" else "label"
    lines = [
        "def main():",
        "    np.random.seed(SEED)",
        "    os.makedirs(WORKING_DIR, exist_ok=True)",
        '    df = pd.read_csv(os.path.join(INPUT_DIR, "skin_lesions.csv"))',
        '    print(f"Loaded {len(df)} rows")',
    ]
    if c["filter_non_neoplastic"]:
        lines += ['    df = df[df["label"] != "non-neoplastic"].reset_index(drop=True)',
                  '    print(f"Kept {len(df)} neoplastic lesions (malignant or benign)")']
    if c["drop_unknown_tone"]:
        lines += ['    df = df[df["skin_tone"] != -1].reset_index(drop=True)',
                  '    print(f"Kept {len(df)} rows with a known skin tone")']
    lines.append(f'    y = (df["{label_col}"] == "malignant").astype(int).values')
    if bug == "shape":
        lines.append("    y = y[1:]  # labels aligned with the images")
    if groups:
        lines.append('    groups = tone_groups(df["skin_tone"])')
    lines += [
        "    idx = np.arange(len(df))",
        "    train_idx, val_idx = train_test_split(idx, test_size=0.2, stratify=y, random_state=SEED)",
        '    paths = image_paths(df, os.path.join(INPUT_DIR, "images"))',
    ]
    if c["fairness"] == "upsample":
        lines += ["    train_idx = upsample_darker_groups(train_idx, groups)",
                  '    print(f"Training rows after upsampling darker skin tones: {len(train_idx)}")']
    if c["model"] in ("logreg", "gbm"):
        lines += _sk_train(c)
    else:
        lines += _torch_train(c)
    return "\n".join(lines)


def _sk_train(c: dict[str, Any]) -> list[str]:
    groups = uses_skin_tone(c)
    weighted = c["fairness"] in ("reweight", "group_balanced")
    if c["bug"] == "slow":
        lines = ["    features = []",
                 "    for i in range(len(paths)):",
                 "        all_features = np.stack([extract_features(load_image(p)) for p in paths])",
                 "        features.append(all_features[i])",
                 "    X = np.stack(features)"]
    else:
        lines = ["    X = np.stack([extract_features(load_image(p)) for p in paths])"]
    lines += ['    print(f"Features: {X.shape}")',
              "    scaler = StandardScaler().fit(X[train_idx])",
              "    X_train, y_train = scaler.transform(X[train_idx]), y[train_idx]",
              "    X_val, y_val = scaler.transform(X[val_idx]), y[val_idx]"]
    if weighted:
        lines.append("    sample_weight = group_weights(groups[train_idx], y_train)")
    hp = c["hp"]
    if c["model"] == "logreg":
        if c["selection"] == "minimax":
            grid = sorted({0.1, 1.0, float(hp["C"]), 10.0})
            lines.append(f"    candidates = [dict(C=C) for C in {grid!r}]")
        else:
            lines.append(f"    candidates = [dict(C={float(hp['C'])!r})]")
        make = "LogisticRegression(max_iter=2000, **params)"
    else:
        if c["selection"] == "minimax":
            its = sorted({50, int(hp["max_iter"]), 300})
            lines.append(f"    candidates = [dict(max_iter=n, learning_rate={float(hp['learning_rate'])!r})"
                         f" for n in {its!r}]")
        else:
            lines.append(f"    candidates = [dict(max_iter={int(hp['max_iter'])},"
                         f" learning_rate={float(hp['learning_rate'])!r})]")
        make = "HistGradientBoostingClassifier(max_leaf_nodes=15, random_state=SEED, **params)"
    lines += ["    results = []",
              "    for params in candidates:",
              f"        model = {make}"]
    if weighted:
        lines.append("        model.fit(X_train, y_train, sample_weight=sample_weight)")
    else:
        lines.append("        model.fit(X_train, y_train)")
    lines += ["        scores = model.predict_proba(X_val)[:, 1]",
              "        result = {\"params\": params, \"model\": model, \"auc\": roc_auc_score(y_val, scores)}"]
    if groups:
        lines += ["        aucs = group_aucs(y_val, scores, groups[val_idx])",
                  "        result[\"group_aucs\"] = aucs",
                  "        result[\"worst_group_auc\"] = min(aucs.values()) if aucs else result[\"auc\"]"]
    lines.append("        results.append(result)")
    if c["selection"] == "minimax":
        lines += ["    best = max(results, key=lambda r: r[\"worst_group_auc\"])  # minimax: best worst-group AUC",
                  '    print(f"Selected {best[\'params\']} by worst-group validation AUC")']
    else:
        lines.append("    best = max(results, key=lambda r: r[\"auc\"])")
    if c["monitor_groups"]:
        lines += ["    for g, a in sorted(best[\"group_aucs\"].items()):",
                  '        print(f"Group {g} validation AUROC: {a:.4f}")',
                  "    if best[\"group_aucs\"]:",
                  '        print(f"Skin-tone AUROC gap: '
                  '{max(best[\'group_aucs\'].values()) - min(best[\'group_aucs\'].values()):.4f}")']
    lines += ["    with open(MODEL_PATH, \"wb\") as fh:",
              "        pickle.dump({\"model\": best[\"model\"], \"scaler\": scaler}, fh)",
              '    print(f"Validation AUROC: {best[\'auc\']:.4f}")']
    return lines


def _torch_train(c: dict[str, Any]) -> list[str]:
    groups = uses_skin_tone(c)
    weighted = c["fairness"] in ("reweight", "group_balanced")
    hp = c["hp"]
    epochs = 300 if c["bug"] == "slow" else int(hp["epochs"])
    lines = [
        "    torch.manual_seed(SEED)",
        '    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")',
        "    x_all = to_tensor([load_image(p) for p in paths])",
        "    y_all = torch.tensor(y, dtype=torch.float32)",
        "    x_val, y_val = x_all[val_idx], y[val_idx]",
        '    print(f"Images: {tuple(x_all.shape)} on {device}")',
        f"    model = build_model(pretrained={c['model'] == 'resnet18'}).to(device)",
        f"    optimizer = torch.optim.Adam(model.parameters(), lr={float(hp['lr'])!r})",
        f"    epochs, batch_size = {epochs}, {int(hp['batch_size'])}",
    ]
    if weighted:
        lines.append("    weights_all = torch.tensor(group_weights(groups, y), dtype=torch.float32)")
    lines += ["    best_auc, best_worst_auc, best_state = -1.0, -1.0, None",
              "    for epoch in range(epochs):",
              "        model.train()",
              "        order = np.random.permutation(train_idx)",
              "        total = 0.0",
              "        for i in range(0, len(order), batch_size):",
              "            batch = order[i:i + batch_size]",
              "            xb, yb = x_all[batch].to(device), y_all[batch].to(device)",
              "            if np.random.rand() < 0.5:",
              "                xb = torch.flip(xb, dims=[3])",
              "            logits = model(xb).squeeze(1)"]
    if weighted:
        lines.append("            loss = F.binary_cross_entropy_with_logits(logits, yb,"
                     " weight=weights_all[batch].to(device))")
    else:
        lines.append("            loss = F.binary_cross_entropy_with_logits(logits, yb)")
    lines += ["            optimizer.zero_grad()",
              "            loss.backward()",
              "            optimizer.step()",
              "            total += loss.item() * len(batch)",
              "        scores = score(model, x_val, device)",
              "        auc = roc_auc_score(y_val, scores)"]
    if groups:
        lines += ["        aucs = group_aucs(y_val, scores, groups[val_idx])",
                  "        worst_auc = min(aucs.values()) if aucs else auc"]
        lines.append('        print(f"epoch {epoch + 1}/{epochs}: loss {total / len(order):.4f}, val auc {auc:.4f},'
                     ' worst group {worst_auc:.4f}")')
    else:
        lines.append('        print(f"epoch {epoch + 1}/{epochs}: loss {total / len(order):.4f}, val auc {auc:.4f}")')
    if c["selection"] == "minimax":
        lines += ["        if worst_auc > best_worst_auc:  # minimax checkpoint: best worst-group AUC",
                  "            best_auc, best_worst_auc, best_aucs = auc, worst_auc, aucs"]
    elif groups:
        lines += ["        if auc > best_auc:",
                  "            best_auc, best_worst_auc, best_aucs = auc, worst_auc, aucs"]
    else:
        lines += ["        if auc > best_auc:",
                  "            best_auc = auc"]
    lines += ["            best_state = {k: v.detach().cpu().clone() for k, v in model.state_dict().items()}",
              "    torch.save(best_state, MODEL_PATH)",
              "    with open(os.path.join(WORKING_DIR, \"model.json\"), \"w\") as fh:",
              f"        json.dump({{\"model\": \"{c['model']}\", \"image_size\": IMAGE_SIZE}}, fh)"]
    if c["monitor_groups"]:
        lines += ["    for g, a in sorted(best_aucs.items()):",
                  '        print(f"Group {g} validation AUROC: {a:.4f}")',
                  "    if best_aucs:",
                  '        print(f"Skin-tone AUROC gap: {max(best_aucs.values()) - min(best_aucs.values()):.4f}")']
    lines.append('    print(f"Validation AUROC: {best_auc:.4f}")')
    return lines
