"""Whether a node's skin-tone groups can be told apart, in words, and the signed differences a
clinician reads (dark − light, dark − medium AUC), from a stored `evaluated` summary.

The figures come from engine.measures.uncertainty (`signed`, `groups_apart`: simultaneous
bootstrap max-t intervals of every pair's AUC difference and the test of equal group AUCs they
make). A summary recorded before them (METHOD_ID v1, or without intervals) has no words here.
Beside the "too few to judge" rule: "cannot be told apart" about groups too small to judge says
little, and the words say so.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.measures.summary import EvaluationSummary
from engine.measures.uncertainty import GROUP_TEST, SIGNED_PAIRS
from engine.session import figure_text
from engine.session.figure_text import fmt

CANNOT_TELL = "skin-tone groups cannot be told apart"
TOLD_APART = "skin-tone groups' AUCs differ"
APART_HELP = ("Skin-tone groups cannot be told apart when every pair of groups' AUC difference has a 95 % "
              "interval that includes 0 (the intervals hold together: a bootstrap max-t band). It is not a "
              "proof that the groups are equal: with few malignant images the intervals are wide.")


@dataclass(frozen=True)
class SignedDifference:
    """One group's AUC minus another's, with its simultaneous 95 % interval."""

    pair: str          # dark − light | dark − medium
    groups: tuple[str, str]
    diff: float
    low: float
    high: float

    def text(self) -> str:
        """`dark − light -.082 (-.164 to .011)`."""
        return f"{self.pair} {fmt(self.diff)} ({fmt(self.low)} to {fmt(self.high)})"

    @property
    def includes_zero(self) -> bool:
        return self.low <= 0 <= self.high


def signed(summary: EvaluationSummary | None) -> list[SignedDifference]:
    """The summary's signed differences (uncertainty.SIGNED_PAIRS' order); [] for one recorded
    without them. A pair without figures (a group with no AUC) is left out."""
    stored = summary.signed if summary is not None else None
    if stored is None:
        return []
    out = []
    for i, (groups, pair) in enumerate(SIGNED_PAIRS):
        values = stored[3 * i:3 * i + 3]
        if len(values) == 3 and all(isinstance(v, (int, float)) for v in values):
            out.append(SignedDifference(pair, groups, float(values[0]), float(values[1]), float(values[2])))
    return out


def words(summary: EvaluationSummary | None) -> str | None:
    """What a node's screen says about its groups, e.g. "skin-tone groups cannot be told apart (their
    AUCs' differences all include 0: dark − light -.030 (-.120 to .060); …; bootstrap max-t test of equal
    skin-tone group AUCs, p = .41)"; None without the test."""
    test = summary.groups_apart if summary is not None else None
    if test is None:
        return None
    shown = "; ".join(d.text() for d in signed(summary))
    method = f"{GROUP_TEST}, p {_p(test.p)}"
    if test.apart:
        why = "at least one pair's interval excludes 0"
        return f"{TOLD_APART} ({why}: {shown}; {method})" if shown else f"{TOLD_APART} ({why}; {method})"
    why = "their AUCs' differences all include 0"
    text = f"{CANNOT_TELL} ({why}: {shown}; {method})" if shown else f"{CANNOT_TELL} ({why}; {method})"
    small = ", ".join(figure_text.GROUP_WORDS.get(key, key) for key in figure_text.too_few_groups(summary))
    return f"{text}; {figure_text.TOO_FEW} in {small}, so that says little" if small else text


def _p(value: Any) -> str:
    """`= .412`, `< .001`."""
    if not isinstance(value, (int, float)):
        return "not recorded"
    return "< .001" if value < 0.001 else f"= {fmt(float(value), 3)}"
