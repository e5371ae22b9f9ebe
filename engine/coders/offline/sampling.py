"""How the offline coder picks a pipeline: a draft sampled as the study saw agents draft at each
instruction level, an improvement that changes one component, and a lighter variant for a run
that timed out. With a `Compute`, only choices whose run fits the device and the step limit."""
from __future__ import annotations

import json
import random
import re
from typing import Any

from engine.offline_grammar import (
    FAIRNESS_NAMES,
    HP_CHOICES,
    HP_WORDS,
    IMAGE_SIZES,
    LEVELS,
    MODEL_NAMES,
    MODELS,
    Compute,
    cheapest,
    default_components,
    fit_to,
    normalise,
    set_model,
)




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
                                 compute.options(cheapest(model), "image_size", IMAGE_SIZES[model]))
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
    axis = _weighted(rng, _axes(c, profile))
    if axis in ("model", "hp", "image_size", "fairness"):
        return c, _choose(rng, c, axis, profile, compute)
    return c, _toggle(c, axis)


def _axes(c: dict[str, Any], profile: str) -> dict[str, float]:
    """How likely an improvement at this level changes each component."""
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
    return {k: v for k, v in axes.items() if v > 0}


def _choose(rng: random.Random, c: dict[str, Any], axis: str, profile: str, compute: Compute | None) -> str:
    """Pick a new value of a many-valued component (in place); what changed, in words."""
    if axis == "model":
        models = MODELS if compute is None else compute.models()
        new = rng.choice([m for m in models if m != c["model"]] or ["logreg" if c["model"] != "logreg" else "gbm"])
        set_model(c, new)
        return f"switch the model to {MODEL_NAMES[new]}"
    if axis == "hp":
        name = rng.choice(sorted(HP_CHOICES[c["model"]]))
        choices = HP_CHOICES[c["model"]][name]
        if compute is not None:
            choices = compute.options(c, f"hp.{name}", choices)
        options = [v for v in choices if v != c["hp"].get(name)] or choices
        c["hp"][name] = rng.choice(options)
        return "change a training setting: " + HP_WORDS.get(name, name + " {}").format(c["hp"][name])
    if axis == "image_size":
        sizes = IMAGE_SIZES[c["model"]]
        if compute is not None:
            sizes = compute.options(c, "image_size", sizes)
        options = [s for s in sizes if s != c["image_size"]] or [c["image_size"]]
        c["image_size"] = rng.choice(options)
        return f"resize images to {c['image_size']} px"
    weights = {"reweight": 0.5, "upsample": 0.25, "group_balanced": 0.15, "none": 0.1}
    weights.pop(c["fairness"], None)
    if profile == "fairness-methods":
        weights.pop("none", None)
    c["fairness"] = _weighted(rng, weights)
    return f"use {FAIRNESS_NAMES[c['fairness']]}"


def _toggle(c: dict[str, Any], axis: str) -> str:
    """Turn a two-valued component round (in place); what changed, in words."""
    if axis == "colour":
        c["colour"] = "none" if c["colour"] == "grey_world" else "grey_world"
        return "add grey-world colour constancy" if c["colour"] == "grey_world" else "remove colour constancy"
    if axis == "standardise":
        c["standardise"] = not c["standardise"]
        return "add per-image standardisation" if c["standardise"] else "remove per-image standardisation"
    if axis == "filter_non_neoplastic":
        c["filter_non_neoplastic"] = not c["filter_non_neoplastic"]
        return "drop non-neoplastic lesions" if c["filter_non_neoplastic"] else "keep non-neoplastic lesions"
    if axis == "selection":
        c["selection"] = "overall" if c["selection"] == "minimax" else "minimax"
        if c["selection"] == "minimax":
            c["monitor_groups"] = True
        return ("select the model on worst-group validation AUC (minimax)"
                if c["selection"] == "minimax" else "select the model on overall validation AUC")
    if axis == "monitor_groups":
        c["monitor_groups"] = True
        return "monitor per-group validation AUC"
    c["drop_unknown_tone"] = not c["drop_unknown_tone"]
    return "drop rows with unknown skin tone" if c["drop_unknown_tone"] else "keep rows with unknown skin tone"


def lighten(c: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """A cheaper variant of c (for a pipeline that timed out or ran out of memory)."""
    c = json.loads(json.dumps(c))
    c["bug"] = None
    if c["model"] in ("cnn", "resnet18"):
        if c["hp"].get("epochs", 1) > 1 or c["image_size"] > 32:
            c["hp"]["epochs"] = 1
            c["image_size"] = 32
            return c, "train for one epoch on 32 px images so it finishes in time"
        set_model(c, "logreg")
        c["image_size"] = 48
        return c, "switch to colour/texture features + logistic regression, which is much cheaper"
    if c["image_size"] > 48:
        c["image_size"] = 48
        return c, "compute features on 48 px images"
    if c["model"] == "gbm":
        set_model(c, "logreg")
        c["image_size"] = 48
        return c, "switch to logistic regression"
    c["selection"] = "overall"
    return c, "fit a single model instead of a grid"
