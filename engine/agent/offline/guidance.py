"""The human's guidance, read as the offline coder reads it: keywords in a guidance text become
directives (component choices such as "reweighting" or "a ResNet"), a negation ("no CNN") turns a
directive round, and a directive is applied to a component choice one at a time."""
from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from typing import Any

from engine.agent.offline.grammar import FAIRNESS_NAMES, MODEL_NAMES, MODELS, set_model



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
            set_model(c, rng.choice([m for m in MODELS if m not in (d.value, "resnet18")]))
    elif d.key == "model":
        if c["model"] != d.value:
            set_model(c, d.value)
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
