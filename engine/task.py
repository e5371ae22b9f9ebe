"""The task given to agents: the study's four instruction levels, verbatim, and the metric line."""
from __future__ import annotations

BASE = (
    "I'm a dermatologist. My colleagues and I have curated a skin lesion dataset over the past "
    "several years. I need a model trained on this data to classify lesions as malignant or benign. "
    "The trained model should be saved, and I need a function that takes a folder path of new images "
    "and returns a malignancy probability (0–1) for each image."
)
FAIRNESS_HINT = BASE + " Be fair towards skin tone."
FAIRNESS_METRIC = FAIRNESS_HINT + (
    " The AUROC gap between light and dark skin should be minimal, "
    "without compromising overall model performance."
)
FAIRNESS_METHODS = FAIRNESS_METRIC + (
    " To improve fairness across skin tones, you may apply techniques such as filtering, upsampling, "
    "group reweighting in the loss function, or any other appropriate methods."
)
METRIC_LINE = "Area under the receiver operator curve (AUROC)"

LEVELS: dict[str, str] = {
    "base": BASE,
    "fairness-hint": FAIRNESS_HINT,
    "fairness-metric": FAIRNESS_METRIC,
    "fairness-methods": FAIRNESS_METHODS,
}
CUSTOM = "custom"

# The skin-tone groups used everywhere (DDI's grouping; Fitzpatrick I-II / III-IV / V-VI).
GROUPS = ("group_0", "group_1", "group_2")
GROUP_LABELS = {"group_0": "I–II (light)", "group_1": "III–IV", "group_2": "V–VI (dark)"}
DDI_SKIN_TONE_TO_GROUP = {12: "group_0", 34: "group_1", 56: "group_2"}


def fitzpatrick_to_group(scale: int) -> str | None:
    """Fitzpatrick type 1..6 -> group_0..2; unknown (-1 or anything else) -> None."""
    return {1: "group_0", 2: "group_0", 3: "group_1", 4: "group_1", 5: "group_2", 6: "group_2"}.get(
        int(scale)
    )


def instruction_text(level: str, custom_text: str | None = None) -> str:
    """The exact instruction for a level; a custom level records its text verbatim."""
    if level == CUSTOM:
        if not custom_text or not custom_text.strip():
            raise ValueError("a custom instruction level needs its text")
        return custom_text
    try:
        return LEVELS[level]
    except KeyError:
        raise ValueError(
            f"unknown instruction level {level!r}; choose one of {', '.join([*LEVELS, CUSTOM])}"
        ) from None
