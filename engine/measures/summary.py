"""One split's measured figures, typed: what an `evaluated` event's summary holds, read back.

The summary's payload is never rewritten (the events table keeps it as recorded), and its keys grew
with each version. `EvaluationSummary.from_payload` is the one place that reads those keys; every
other reader uses the typed fields. The versions it loads:

- v0: auc, worst_auc, best_auc, auc_gap, group_auc, group_auc_reason, n (no intervals);
- v1: and the intervals spelled out (auc_ci, worst_auc_ci, auc_gap_ci, group_auc_ci, group_n,
  group_positives, group_missed, ci_method), which v2 replaced;
- v2: and the intervals compact (ci, cases, ci_groups, ci_method: engine.measures.uncertainty);
- v3: and the signed group differences with the test of equal group AUCs (signed, groups_apart);
- any version: and the operating point's block (operating_point: engine.measures.operating_point).

`to_payload` gives the payload back as stored (a summary round-trips to the same keys and values).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from engine.measures.operating_point import KEY as OPERATING_POINT, OperatingPoint
from engine.measures.uncertainty import Intervals
from engine.task import GROUPS

HEADLINE = ("auc", "worst_auc", "best_auc", "auc_gap")
_GROUPED = ("group_auc", "group_auc_reason")
_V1_GROUPED = ("group_n", "group_positives", "group_missed")
_EMPTY: Mapping[str, Any] = {}
_new = object.__new__


@dataclass(frozen=True)
class GroupsTest:
    """The test of equal skin-tone group AUCs (engine.measures.uncertainty.GROUP_TEST)."""

    p: float | None
    apart: bool


@dataclass(frozen=True)
class EvaluationSummary:
    """AUC, worst/best group AUC and the gap, each group's AUC, the images scored; the intervals,
    the group differences and the operating point are read from the stored payload when asked for."""

    auc: float | None = None
    worst_auc: float | None = None
    best_auc: float | None = None
    auc_gap: float | None = None
    group_auc: Mapping[str, float | None] = field(default_factory=dict)
    group_auc_reason: Mapping[str, str] = field(default_factory=dict)
    n: int | None = None
    stored: Mapping[str, Any] = field(default_factory=dict, repr=False)   # the payload as recorded

    @classmethod
    def from_payload(cls, payload: Mapping[str, Any] | EvaluationSummary | None) -> EvaluationSummary | None:
        """The summary of any version (see the module's docstring); None for no payload."""
        if payload is None:
            return None
        if isinstance(payload, EvaluationSummary):
            return payload
        get = payload.get
        n = get("n")
        # the frozen __init__ sets each field through object.__setattr__: a session's open reads a
        # summary per evaluation, so the fields go into the instance's dict at once
        summary = _new(cls)
        summary.__dict__.update(
            auc=_number(get("auc")), worst_auc=_number(get("worst_auc")), best_auc=_number(get("best_auc")),
            auc_gap=_number(get("auc_gap")), group_auc=_mapping(get("group_auc")),
            group_auc_reason=_mapping(get("group_auc_reason")),
            n=int(n) if isinstance(n, (int, float)) and not isinstance(n, bool) else None, stored=payload)
        return summary

    def to_payload(self) -> dict[str, Any]:
        return dict(self.stored)

    @cached_property
    def intervals(self) -> Intervals | None:
        """None for a summary recorded without intervals (predictions not kept)."""
        stored = self.stored
        ci = stored.get("ci")
        if isinstance(ci, list):
            return Intervals(ci, stored.get("cases") or [], tuple(stored.get("ci_groups") or GROUPS),
                             method=_text(stored.get("ci_method")))
        if "auc_ci" in stored:
            return _spelled_out(stored)
        return None

    @cached_property
    def operating_point(self) -> OperatingPoint | None:
        """None for a summary recorded before operating points (its figures are at 0.5)."""
        return OperatingPoint.of(self.stored.get(OPERATING_POINT))

    @cached_property
    def signed(self) -> Sequence[Any] | None:
        """[diff, low, high] per pair of uncertainty.SIGNED_PAIRS, flat; None before v3."""
        found = self.stored.get("signed")
        return found if isinstance(found, list) else None

    @cached_property
    def groups_apart(self) -> GroupsTest | None:
        found = self.stored.get("groups_apart")
        if not isinstance(found, Mapping) or "apart" not in found:
            return None
        return GroupsTest(p=_number(found.get("p")), apart=bool(found.get("apart")))

    @property
    def extra(self) -> dict[str, Any]:
        """The stored keys besides the headline figures, the group maps and the intervals' (an
        export's and `befair show --json`'s "everything else")."""
        known = {*HEADLINE, *_GROUPED, "n", "ci", "cases", "ci_groups", "ci_method", "signed", "groups_apart",
                 OPERATING_POINT}
        return {k: v for k, v in self.stored.items() if k not in known}

    def only(self, figures: frozenset[str]) -> EvaluationSummary | None:
        """The summary with only the named figures (of HEADLINE and "group_auc"); None if none is left."""
        kept = {k: v for k, v in self.stored.items() if k in figures}
        return EvaluationSummary.from_payload(kept) if kept else None


def _number(value: Any) -> float | None:
    if type(value) is float or value is None:   # the common cases first
        return value
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else _EMPTY


def _spelled_out(stored: Mapping[str, Any]) -> Intervals:
    """v1's intervals (one key per figure) in v2's compact form."""
    group_ci = _mapping(stored.get("group_auc_ci"))
    counts = [_mapping(stored.get(k)) for k in _V1_GROUPED]
    names = [g for g in GROUPS if g in group_ci or g in counts[0]]
    names += sorted(set(group_ci) - set(names))
    ci: list[float | None] = []
    for pair in (stored.get("auc_ci"), stored.get("worst_auc_ci"), stored.get("auc_gap_ci"),
                 *(group_ci.get(g) for g in names)):
        ci += list(pair) if isinstance(pair, (list, tuple)) and len(pair) == 2 else [None, None]
    cases: list[int] = []
    for g in names:
        if all(isinstance(c.get(g), int) for c in counts):
            cases += [int(c[g]) for c in counts]
    return Intervals(ci, cases if len(cases) == 3 * len(names) else [], tuple(names),
                     method=_text(stored.get("ci_method")))
