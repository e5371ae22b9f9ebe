"""The composer: a component choice made into a real, runnable `solution.py`, from the Python files in
templates/ (package data, read with importlib.resources).

Every composed pipeline follows the contract: run as a script it reads input/skin_lesions.csv and
input/images, makes its own train/validation split, prints `Validation AUROC: <x>` and saves its
model in working/; imported, its module-level `predict(folder)` loads that model and returns
{filename: probability}. Pipelines of the base level never touch the skin-tone column.

A template is a Python file. What stands below its `# --- solution.py ---` line is copied into the
pipeline, with two changes: a line tagged `# when: <flag>` is kept only where the flag holds (the
tag is dropped), and each CHOICE_* name becomes the choice's value as a Python literal (the names
and example values are in templates/choices.py). What stands above that line is there for the
reader and the linter only.
"""
from __future__ import annotations

import functools
import json
import re
import textwrap
from collections.abc import Mapping
from importlib import resources
from typing import Any, TypeAlias

from engine.offline_grammar import HEADER_TAG, describe, normalise, uses_skin_tone

START = "# --- solution.py ---"
TITLE = "# Pipeline written by the befair offline coder (a simulated agent)."
FLAGS = ("sklearn", "torch", "logreg", "gbm", "resnet18", "grey_world", "standardise", "filter_non_neoplastic",
         "drop_unknown_tone", "groups", "weighted", "upsample", "minimax", "monitor_groups",
         "bug_key_error", "bug_shape", "bug_missing_import", "bug_slow")
_WHEN = re.compile(r"  # when: ([\w ]+)$")
_CHOICE = re.compile(r"\bCHOICE_[A-Z0-9_]+\b")
ChoiceValue: TypeAlias = bool | int | float | str | list[int] | list[float]


@functools.cache
def template(name: str) -> str:
    """The part of templates/<name>.py that is copied into a pipeline (tags and CHOICE_* names in)."""
    text = (resources.files("engine.coders.offline") / "templates" / f"{name}.py").read_text(encoding="utf-8")
    lines = text.split("\n")
    starts = [i for i, line in enumerate(lines) if line.strip() == START]
    if len(starts) != 1:
        raise ValueError(f"template {name}.py has {len(starts)} {START!r} lines, not one")
    return "\n".join(lines[starts[0] + 1:]).strip("\n")


def holds(condition: str, flags: Mapping[str, bool]) -> bool:
    """A `# when:` condition: flags joined by `and`, each may be negated with `not`."""
    for term in condition.split(" and "):
        negated = term.startswith("not ")
        if flags[term[4:] if negated else term] == negated:
            return False
    return True


def fill(name: str, flags: Mapping[str, bool], choices: Mapping[str, ChoiceValue] | None = None) -> str:
    """A template's code for this pipeline: its tagged lines kept or dropped, its choices filled in."""
    kept = []
    for line in template(name).split("\n"):
        tag = _WHEN.search(line)
        if tag is None:
            kept.append(line)
        elif holds(tag.group(1), flags):
            kept.append(line[:tag.start()])
    code = "\n".join(kept)
    return _CHOICE.sub(lambda m: _literal((choices or {})[m.group(0)]), code)


def _literal(value: ChoiceValue) -> str:
    return json.dumps(value) if isinstance(value, str) else repr(value)


def pipeline_flags(c: dict[str, Any]) -> dict[str, bool]:
    """The `# when:` flags of a (normalised) component choice."""
    model, bug = c["model"], c["bug"]
    flags = {
        "sklearn": model in ("logreg", "gbm"), "torch": model in ("cnn", "resnet18"),
        "logreg": model == "logreg", "gbm": model == "gbm", "resnet18": model == "resnet18",
        "grey_world": c["colour"] == "grey_world", "standardise": bool(c["standardise"]),
        "filter_non_neoplastic": bool(c["filter_non_neoplastic"]), "drop_unknown_tone": bool(c["drop_unknown_tone"]),
        "groups": uses_skin_tone(c), "weighted": c["fairness"] in ("reweight", "group_balanced"),
        "upsample": c["fairness"] == "upsample", "minimax": c["selection"] == "minimax",
        "monitor_groups": bool(c["monitor_groups"]),
    }
    flags.update({f"bug_{kind}": bug == kind for kind in ("key_error", "shape", "missing_import", "slow")})
    return flags


def pipeline_choices(c: dict[str, Any]) -> dict[str, ChoiceValue]:
    """The CHOICE_* values of a (normalised) component choice."""
    hp = c["hp"]
    choices: dict[str, ChoiceValue] = {"CHOICE_IMAGE_SIZE": int(c["image_size"]),
                                   "CHOICE_STANDARDISED": bool(c["standardise"])}
    if c["model"] == "logreg":
        choices.update(CHOICE_C=float(hp["C"]), CHOICE_C_GRID=sorted({0.1, 1.0, float(hp["C"]), 10.0}))
    elif c["model"] == "gbm":
        choices.update(CHOICE_MAX_ITER=int(hp["max_iter"]), CHOICE_LEARNING_RATE=float(hp["learning_rate"]),
                       CHOICE_MAX_ITER_GRID=sorted({50, int(hp["max_iter"]), 300}))
    else:
        choices.update(CHOICE_MODEL=c["model"], CHOICE_PRETRAINED=c["model"] == "resnet18",
                       CHOICE_LR=float(hp["lr"]), CHOICE_EPOCHS=int(hp["epochs"]),
                       CHOICE_BATCH_SIZE=int(hp["batch_size"]))
    return choices


def pieces(c: dict[str, Any]) -> list[str]:
    """The templates a pipeline is made of, in order."""
    torch_model = c["model"] in ("cnn", "resnet18")
    names = ["imports", "settings", "load_image", "image_files"]
    if torch_model:
        names += ["torch_standardised", f"torch_{c['model']}", "torch_helpers"]
    else:
        names.append("features")
    if uses_skin_tone(c):
        names.append("skin_tone_groups")
        names += {"reweight": ["group_weights_reweight"], "group_balanced": ["group_weights_balanced"],
                  "upsample": ["upsample"]}.get(c["fairness"], [])
    names.append("predict_torch" if torch_model else "predict_sklearn")
    return names


def header(c: dict[str, Any], plan: str) -> str:
    """The comment recording the choice, and the docstring saying the plan."""
    # an injected failure is the simulated agent's doing, not a property of the code, so it stays
    # in the node's record only
    comp_json = json.dumps({k: v for k, v in c.items() if k != "bug"}, sort_keys=True)
    lines = [TITLE, "#", *(f"#   {line}" for line in describe(c)), HEADER_TAG + comp_json]
    doc = plan.replace('"""', "'''").strip() or "Skin-lesion malignancy classifier."
    wrapped = textwrap.fill(doc, 96, break_long_words=False, replace_whitespace=False)
    return "\n".join(lines) + "\n\n\n" + '"""' + wrapped + '\n"""'


def render(c: dict[str, Any], plan: str) -> str:
    """The solution.py for a component choice."""
    c = normalise(c)
    flags, choices = pipeline_flags(c), pipeline_choices(c)
    train = "train_torch" if flags["torch"] else "train_sklearn"
    parts = [header(c, plan)]
    parts += [fill(name, flags, choices) for name in pieces(c)]
    parts.append(fill("main", flags) + "\n" + fill(train, flags, choices))
    parts.append(fill("entry", flags))
    return "\n\n\n".join(parts) + "\n"
