"""The offline coder (a simulated agent) reads a dermatologist's plain words: each phrasing below,
written as a dermatologist would, has a documented direction in the component grammar (the key and
value the next plan moves to, or "unmappable"). Measured through the real coder's draft and
improve, against the same call without guidance (same seed), and every phrasing gets a plain
answer in the plan."""
from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

import pytest

from engine.coders.offline import OfflineCoder
from engine.coders.protocol import CoderContext, CoderReply, NodeView
from engine.task import LEVELS, METRIC_LINE

UNMAPPABLE = "unmappable"
# Directions: ("model", "neural") a CNN or ResNet; ("model", "not neural") logistic regression or
# boosting; ("image_size", "larger"); ("hp", "longer") more epochs or boosting rounds; ("hp",
# "stronger regularisation") a smaller C, fewer boosting rounds, or fewer epochs. Otherwise the
# component key and the value it takes.
PHRASINGS: list[tuple[str, Any]] = [
    # goals about skin tone
    ("It must work as well on dark skin as on light skin.", ("fairness", "reweight")),
    ("Please check the model works as well on dark skin as on light skin; lesions on darker skin are "
     "often missed.", ("monitor_groups", True)),
    ("Don't miss melanomas on darker skin.", ("fairness", "group_balanced")),
    ("Lesions on darker skin are often missed.", ("fairness", "group_balanced")),
    ("I want equal performance across all skin types.", ("fairness", "reweight")),
    ("In my experience these models do worse on brown and black skin.", ("fairness", "reweight")),
    ("The model should be fair to patients of every skin colour.", ("fairness", "reweight")),
    ("Performance on Fitzpatrick V-VI should be no worse than on I-II.", ("fairness", "reweight")),
    ("Skin tone doesn't matter for this project, just maximise overall accuracy.", ("fairness", "none")),
    # checks
    ("Check each skin tone separately.", ("monitor_groups", True)),
    ("Could you look at the results per skin type?", ("monitor_groups", True)),
    ("Show me the sensitivity for each Fitzpatrick type.", ("monitor_groups", True)),
    ("How well does it do on darker skin?", ("monitor_groups", True)),
    # the data
    ("Fitzpatrick V and VI are underrepresented in our collection.", ("fairness", "upsample")),
    ("There are too few dark-skin images.", ("fairness", "upsample")),
    ("Some labels are wrong.", ("hp", "stronger regularisation")),
    ("A fair number of these diagnoses were never biopsy-confirmed, so some are probably mislabelled.",
     ("hp", "stronger regularisation")),
    ("Ignore the inflammatory lesions, we only care about tumours.", ("filter_non_neoplastic", True)),
    ("Eczema and psoriasis cases don't belong in a cancer model.", ("filter_non_neoplastic", True)),
    ("The photos were taken under different lighting in different clinics.", ("colour", "grey_world")),
    ("Images have different colour casts depending on the camera.", ("colour", "grey_world")),
    ("Drop the cases where the Fitzpatrick type is unknown.", ("drop_unknown_tone", True)),
    # the model
    ("Keep it simple.", ("model", "logreg")),
    ("I need something I can explain to my patients.", ("model", "logreg")),
    ("I don't want a black box.", ("model", "logreg")),
    ("Use a proper deep learning model.", ("model", "neural")),
    ("Could you use a network pretrained on ImageNet?", ("model", "resnet18")),
    ("It's overfitting.", ("hp", "stronger regularisation")),
    ("Train longer, it hasn't converged.", ("hp", "longer")),
    ("Higher resolution please, small lesions matter.", ("image_size", "larger")),
    # which error is worse
    ("Missing a melanoma is worse than a false alarm.", ("fairness", "group_balanced")),
    ("I'd rather send a few extra patients for biopsy than miss a cancer.", ("fairness", "group_balanced")),
    # negated
    ("Please don't throw away any images, the data took years to collect.", ("filter_non_neoplastic", False)),
    ("Don't leave out the inflammatory conditions.", ("filter_non_neoplastic", False)),
    ("Keep the images whose skin type was not recorded.", ("drop_unknown_tone", False)),
    ("No neural network, please.", ("model", "not neural")),
    ("No deep learning, it's overkill for this.", ("model", "not neural")),
    ("Please do not normalise the colours, colour is diagnostic.", ("colour", "none")),
    # unmappable
    ("Thank you, this looks promising!", UNMAPPABLE),
    ("There are duplicate images in the data.", UNMAPPABLE),
    ("Could you also use the patient's age and sex?", UNMAPPABLE),
    ("The model must be saved so we can use it in clinic.", UNMAPPABLE),
    ("Dermoscopy images would be better than clinical photos.", UNMAPPABLE),
]
LEVELS_USED = ("base", "fairness-methods")  # parents with and without a fairness intervention
SEEDS = range(8)
NEURAL = ("cnn", "resnet18")
IDENTIFIERS = re.compile(r"\b[a-z]+_[a-z_]+\b|\b(?:logreg|gbm|resnet18|hp\.\w+|model!)|->")


def ctx(level: str, seed: int, glob: tuple[str, ...] = ()) -> CoderContext:
    return CoderContext(instruction=LEVELS[level], metric_line=METRIC_LINE, data_preview="", step=2, seed=seed,
                        guidance_global=list(glob), guidance_node=[], level=level)


def view(reply: CoderReply) -> NodeView:
    return NodeView(node_id=1, stage="draft", plan=reply.plan, code=reply.code or "", status="ok",
                    components=reply.components)


def _length(c: dict[str, Any]) -> Any:
    return c["hp"].get("epochs", c["hp"].get("max_iter"))


def _size(c: dict[str, Any]) -> Any:
    return c["image_size"]


def _strength(c: dict[str, Any]) -> Any:
    hp = c["hp"]
    if "C" in hp:
        return -hp["C"]
    if "max_iter" in hp:
        return (-hp["max_iter"], -hp["learning_rate"])
    return -hp["epochs"]


def moved(direction: tuple[str, Any], start: dict[str, Any], plain: dict[str, Any],
          guided: dict[str, Any]) -> bool | None:
    """Whether the guided choice moved in the direction from the unguided one; None where the
    unguided one is already there (nothing to measure). `start`: what both calls started from
    (the parent of an improvement; the unguided draft itself)."""
    key, value = direction
    if direction == ("model", "neural"):
        return None if plain["model"] in NEURAL else guided["model"] in NEURAL
    if direction == ("model", "not neural"):
        return None if plain["model"] not in NEURAL else guided["model"] not in NEURAL
    if key == "hp" or value == "larger":
        measure = {"longer": _length, "stronger regularisation": _strength, "larger": _size}[value]
        if len({start["model"], plain["model"], guided["model"]}) > 1 or measure(plain) is None:
            return None
        if measure(plain) > measure(start):  # the unguided call itself went that way
            return None
        return bool(measure(guided) > measure(plain))
    return None if plain[key] == value else guided[key] == value


def calls(text: str) -> list[tuple[dict[str, Any], CoderReply, CoderReply]]:
    """(start, without guidance, with it) for each parent: the same draft call and the same
    improve call."""
    coder = OfflineCoder(failure_rate=0.0, device="cpu")
    out = []
    for level in LEVELS_USED:
        for seed in SEEDS:
            parent = coder.draft(replace(ctx(level, seed), step=1))
            draft = coder.draft(ctx(level, seed))
            out.append((draft.components or {}, draft, coder.draft(ctx(level, seed, (text,)))))
            out.append((parent.components or {}, coder.improve(ctx(level, seed), view(parent)),
                        coder.improve(ctx(level, seed, (text,)), view(parent))))
    return out


def measure(text: str, direction: tuple[str, Any]) -> tuple[bool, str]:
    """Whether every measurable call moved in the direction (and at least one was measurable)."""
    results = [moved(direction, start, plain.components or {}, guided.components or {})
               for start, plain, guided in calls(text)]
    measured = [r for r in results if r is not None]
    return bool(measured) and all(measured), f"{sum(measured)} of {len(measured)} measurable calls moved"


def test_at_least_80_percent_of_mappable_phrasings_move_the_plan_in_their_direction() -> None:
    mappable = [(text, d) for text, d in PHRASINGS if d != UNMAPPABLE]
    assert len(PHRASINGS) >= 30
    outcomes = {text: measure(text, d) for text, d in mappable}
    failed = {text: why for text, (ok, why) in outcomes.items() if not ok}
    share = (len(mappable) - len(failed)) / len(mappable)
    print(f"\n{len(mappable) - len(failed)} of {len(mappable)} mappable phrasings ({share:.0%}) moved the next "
          f"plan in their documented direction; failed: {failed}")
    assert share >= 0.8, failed


@pytest.mark.parametrize("text,direction", PHRASINGS, ids=[t[:40] for t, _ in PHRASINGS])
def test_every_phrasing_gets_a_plain_answer(text: str, direction: Any) -> None:
    for _, plain, guided in calls(text):
        answer = "Following guidance" if direction != UNMAPPABLE else "I could not turn"
        assert f'{answer} "{text}"' in guided.plan, guided.plan
        unquoted = re.sub(r'"[^"]*"', "", guided.plan)
        assert not IDENTIFIERS.findall(unquoted), (IDENTIFIERS.findall(unquoted), guided.plan)
        assert "names no component" not in guided.plan
        if direction == UNMAPPABLE:
            assert f'I could not turn "{text}" into a change I can make; I kept my choice.' in guided.plan
            assert guided.components == plain.components


def test_the_answer_says_what_was_taken_in_a_dermatologists_words() -> None:
    coder = OfflineCoder(failure_rate=0.0, device="cpu")
    text = "it must work as well on dark skin"
    draft = coder.draft(ctx("base", 0, (text,)))
    assert (f'Following guidance "{text}": I weight the training so each skin-tone group counts equally, and '
            "choose the model by its worst skin-tone group.") in draft.plan
    improved = coder.improve(ctx("base", 0, (text,)), view(coder.draft(ctx("base", 1))))
    assert "I weight the training so each skin-tone group counts equally; next I will choose the model by its " \
           "worst skin-tone group." in improved.plan


def test_a_setting_the_model_lacks_is_said_plainly() -> None:
    coder = OfflineCoder(failure_rate=0.0, device="cpu")
    for seed in range(20):
        parent = coder.draft(ctx("base", seed))
        if parent.components and parent.components["model"] == "logreg":
            break
    reply = coder.improve(ctx("base", seed, ("Train longer.",)), view(parent))
    assert "I cannot train longer with the model I use now (colour/texture features + logistic regression)" \
        in reply.plan
