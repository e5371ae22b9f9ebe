"""The human's guidance, read as the offline coder reads it: component keywords ("reweight", "a
ResNet") and a dermatologist's plain words (clinical.py: "it must work as well on dark skin") in a
guidance text become directives (component choices), a negation ("no CNN") turns a directive
round, and a directive is applied to a component choice one at a time. Each directive says what it
does in words a dermatologist reads (`plain`), never in component names."""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from engine.coders.offline.clinical import FAMILIES
from engine.offline_grammar import HP_WORDS, MODEL_NAMES, MODELS, set_model

NEURAL = ("cnn", "resnet18")
SIZE_LADDER = (32, 48, 64, 96, 128)   # image sizes a "higher/lower resolution" steps through
MAX_ITER_LADDER = (100, 150, 250, 400)
# "regularise more" steps a little beyond the values the agent picks on its own
REGULARISATION_LADDERS: dict[str, tuple[float, ...]] = {
    "C": (0.01, 0.03, 0.1, 0.3, 1.0, 3.0), "max_iter": (50, 100, 150, 250), "learning_rate": (0.02, 0.05, 0.1, 0.2)}
RELATIVE = ("+1", "more", "larger", "smaller")

MODEL_WORDS = {  # what using each model means, for a dermatologist
    "logreg": "use a simple model whose decisions can be explained: logistic regression on colour and "
              "texture measurements of each image",
    "gbm": "use gradient boosting on colour and texture measurements of each image",
    "cnn": "use a small neural network (a CNN) that learns from the images themselves",
    "resnet18": "use a deep network pretrained on millions of photographs (ResNet-18) and adapt it to "
                "the lesions",
    "neural": "use a neural network that learns from the images themselves (a small CNN)",
}
PLAIN: dict[tuple[str, Any], str] = {  # (key, value) -> what I do, after "I"
    ("fairness", "reweight"): "weight the training so each skin-tone group counts equally",
    ("fairness", "upsample"): "show the model the images of the rarer, darker skin tones more often in "
                              "training, so each skin-tone group is seen as often",
    ("fairness", "group_balanced"): "weight the training so malignant lesions count as much as benign ones "
                                    "within each skin-tone group, so that a missed cancer costs more",
    ("fairness", "none"): "train on every image alike, with no extra weight for any skin-tone group",
    ("selection", "minimax"): "choose the model by its worst skin-tone group",
    ("selection", "overall"): "choose the model by its overall AUC",
    ("monitor_groups", True): "report the AUC of each skin-tone group separately",
    ("colour", "grey_world"): "balance each image's colours (grey-world colour constancy), so lighting "
                              "and camera differences matter less",
    ("colour", "none"): "leave the images' colours as they are",
    ("standardise", True): "even out each image's brightness and contrast",
    ("standardise", False): "leave each image's brightness and contrast as they are",
    ("filter_non_neoplastic", True): "leave out the non-neoplastic conditions (inflammatory and other "
                                     "non-tumour lesions) and tell malignant from benign tumours only",
    ("filter_non_neoplastic", False): "keep the non-neoplastic conditions in training",
    ("drop_unknown_tone", True): "leave out the images whose skin type was not recorded",
    ("drop_unknown_tone", False): "keep the images whose skin type was not recorded",
    ("hp.longer", "more"): "train longer",
    ("hp.regularise", "more"): "regularise the model more, so it learns the general pattern rather than "
                               "each training image (and its label) by heart",
    ("hp.epochs", "+1"): "train for one more pass over the data",
    ("image_size", "larger"): "use higher-resolution images, so small lesions keep their detail",
    ("image_size", "smaller"): "use smaller images, so training is faster",
}
AT_LIMIT = {  # what "already" means for a relative directive: it is at its limit
    "hp.longer": "train as long as I can for this model",
    "hp.regularise": "regularise this model as strongly as I can",
    "hp.epochs": "train as long as I can for this model",
    "image_size": "use the largest or smallest images I can",
}


@dataclass
class Directive:
    key: str            # component key ("model", "fairness", ...), "model!" (not this model) or "hp.<name>"
    value: Any
    phrase: str         # what in the text asked for it
    text: str           # the guidance text it came from

    @property
    def relative(self) -> bool:
        """A step from the current choice ("train longer"), not a choice of its own."""
        return self.value in RELATIVE

    def plain(self) -> str:
        """What following it means, as a verb phrase after "I", in a dermatologist's words."""
        v = self.value
        if self.key == "model":
            return MODEL_WORDS[v]
        if self.key == "model!":
            return "use a model that is not a neural network" if v == "neural" else \
                f"use another model than {MODEL_NAMES[v]}"
        if (self.key, v) in PLAIN:
            return PLAIN[(self.key, v)]
        if self.key == "image_size":
            return f"resize the images to {v} px"
        if self.key.startswith("hp."):
            return "set " + HP_WORDS.get(self.key[3:], self.key[3:] + " {}").format(v)
        return f"set {self.key} to {v}"

    def at_limit(self) -> str:
        return AT_LIMIT.get(self.key, self.plain()) if self.relative else self.plain()


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


def _negated(low: str, at: int) -> bool:
    return bool(_NEG.search(low[max(0, at - 40):at]))


def _keyword_directives(low: str, text: str) -> list[tuple[int, Directive]]:
    found: list[tuple[int, Directive]] = []
    for pattern, key, value, negated in _RULES:
        for m in re.finditer(pattern, low):
            neg = _negated(low, m.start())
            if neg and negated is None:
                if key == "model":
                    found.append((m.start(), Directive("model!", value, m.group(0), text)))
                continue
            found.append((m.start(), Directive(key, negated if neg else value, m.group(0), text)))
            break
    for m in re.finditer(r"(\d{1,3})\s*epochs?", low):
        found.append((m.start(), Directive("hp.epochs", max(1, min(20, int(m.group(1)))), m.group(0), text)))
    if "more epochs" in low:
        found.append((low.find("more epochs"), Directive("hp.epochs", "+1", "more epochs", text)))
    for m in re.finditer(r"(\d{2,3})\s*(?:px|pixels?)|image size (?:of )?(\d{2,3})", low):
        size = int(m.group(1) or m.group(2))
        found.append((m.start(), Directive("image_size", max(24, min(128, size)), m.group(0), text)))
    return found


def _clinical_directives(low: str, text: str) -> list[tuple[int, Directive]]:
    """A dermatologist's plain words (clinical.FAMILIES), each family read once per text."""
    found: list[tuple[int, Directive]] = []
    for family in FAMILIES:
        m = re.search(family.pattern, low)
        if m is None:
            continue
        asks = family.negated if family.polar and _negated(low, m.start()) else family.asks
        found += [(m.start(), Directive(key, value, m.group(0), text)) for key, value in asks]
    return found


def parse_guidance(texts: list[str]) -> list[Directive]:
    """Directives (component choices) in guidance texts, in the order they appear."""
    out: list[Directive] = []
    for text in texts:
        low = (text or "").lower()
        found = _keyword_directives(low, text) + _clinical_directives(low, text)
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


def applicable(c: dict[str, Any], d: Directive) -> bool:
    """False for a setting the current model does not have (epochs of a logistic regression)."""
    if d.key == "hp.longer":
        return "epochs" in c["hp"] or "max_iter" in c["hp"]
    if d.key.startswith("hp.") and d.key != "hp.regularise":
        return d.key[3:] in c["hp"]
    return True


def apply_directive(c: dict[str, Any], d: Directive, rng: random.Random) -> bool:
    """Apply one directive to c in place; True when it changed something."""
    before = json.dumps(c, sort_keys=True)
    if d.key == "model!":
        excluded = NEURAL if d.value == "neural" else (d.value,)
        if c["model"] in excluded:
            set_model(c, rng.choice([m for m in MODELS if m not in excluded and m != "resnet18"]))
    elif d.key == "model":
        if d.value == "neural":
            if c["model"] not in NEURAL:
                set_model(c, "cnn")
        elif c["model"] != d.value:
            set_model(c, d.value)
    elif d.key == "hp.longer":
        _train_longer(c["hp"])
    elif d.key == "hp.regularise":
        _regularise(c)
    elif d.key.startswith("hp."):
        name = d.key[3:]
        if name in c["hp"]:
            c["hp"][name] = c["hp"][name] + 1 if d.value == "+1" else d.value
    elif d.key == "image_size" and d.value in ("larger", "smaller"):
        c["image_size"] = _step(SIZE_LADDER, c["image_size"], up=d.value == "larger")
    elif d.key == "selection":
        c["selection"] = d.value
        if d.value == "minimax":
            c["monitor_groups"] = True
    else:
        c[d.key] = d.value
    return json.dumps(c, sort_keys=True) != before


def _step(ladder: tuple[Any, ...] | list[Any], value: Any, up: bool) -> Any:
    """The next value up (or down) the ladder from value; value itself at the ladder's end."""
    beyond = [v for v in ladder if (v > value if up else v < value)]
    if not beyond:
        return value
    return min(beyond) if up else max(beyond)


def _train_longer(hp: dict[str, Any]) -> None:
    if "epochs" in hp:
        hp["epochs"] = min(hp["epochs"] + 1, 10)
    elif "max_iter" in hp:
        hp["max_iter"] = _step(MAX_ITER_LADDER, hp["max_iter"], up=True)


def _regularise(c: dict[str, Any]) -> None:
    """One step stronger: a smaller C, fewer boosting rounds (then a smaller learning rate), or
    fewer epochs (stopping early)."""
    hp, choices = c["hp"], REGULARISATION_LADDERS
    if "C" in hp:
        hp["C"] = _step(choices["C"], hp["C"], up=False)
    elif "max_iter" in hp:
        stepped = _step(choices["max_iter"], hp["max_iter"], up=False)
        if stepped == hp["max_iter"]:
            hp["learning_rate"] = _step(choices["learning_rate"], hp["learning_rate"], up=False)
        hp["max_iter"] = stepped
    elif "epochs" in hp:
        hp["epochs"] = max(1, hp["epochs"] - 1)


def satisfied(c: dict[str, Any], d: Directive) -> bool:
    probe = json.loads(json.dumps(c))
    return not apply_directive(probe, d, random.Random(0))


@dataclass
class Outcome:
    """What became of each directive in one reply."""
    applied: list[Directive]
    already: list[Directive]
    pending: list[Directive]           # left for a later step (one change per improvement)
    inapplicable: list[Directive]      # the current model has no such setting


def answer(texts: list[str], directives: list[Directive], outcome: Outcome, model: str) -> str:
    """The plan's answer to each guidance text, in a dermatologist's words: what was taken from
    it, or plainly that nothing could be."""
    sentences = []
    for text in dict.fromkeys(texts):
        mine = [d for d in directives if d.text == text]
        if not mine:
            overridden = bool(parse_guidance([text]))
            sentences.append(f'Following guidance "{text.strip()}": later guidance asks otherwise; I follow that.'
                             if overridden else
                             f'I could not turn "{text.strip()}" into a change I can make; I kept my choice.')
            continue
        sentences.append(f'Following guidance "{text.strip()}": ' + "; ".join(_clauses(mine, outcome, model)) + ".")
    return " ".join(sentences)


def _clauses(mine: list[Directive], outcome: Outcome, model: str) -> list[str]:
    def among(group: list[Directive]) -> list[Directive]:
        return [d for d in mine if d in group]

    clauses = []
    if applied := among(outcome.applied):
        clauses.append("I " + _join([d.plain() for d in applied]))
    if already := among(outcome.already):
        clauses.append("I already " + _join([d.at_limit() for d in already]))
    if pending := among(outcome.pending):
        clauses.append("next I will " + _join([d.plain() for d in pending]))
    for d in among(outcome.inapplicable):
        clauses.append(f"I cannot {d.plain()} with the model I use now ({MODEL_NAMES[model]}); I kept my choice")
    return clauses


def _join(phrases: list[str]) -> str:
    """"a", "a, and b", "a, b, and c"."""
    return phrases[0] if len(phrases) == 1 else ", ".join(phrases[:-1]) + ", and " + phrases[-1]
