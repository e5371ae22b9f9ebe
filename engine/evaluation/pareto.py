"""Minimax-Pareto model selection over per-group validation AUCs.

A candidate is a vector of per-group AUCs ({group: auc or None}). Candidate A dominates B when
A is at least as good on every group and strictly better on one. `minimax_pareto` picks, among
the non-dominated candidates, the one whose worst group AUC is highest.

Missing values: a group that has no AUC for *any* candidate (e.g. a validation group with a single
class) is left out of the comparison; a candidate missing an AUC that others have counts as
-inf on that group (it cannot be shown to be good there). Candidates with no AUC at all are not
eligible.

Tie-break (deterministic): equal worst-group AUC -> higher mean group AUC -> the candidate that
comes first in the mapping's order (callers pass candidates in node order, so the earlier node).
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import TypeVar

Vector = Mapping[str, "float | None"]
K = TypeVar("K", bound=Hashable)  # a candidate's key (a node id)


def _groups(candidates: Mapping[K, Vector]) -> list[str]:
    seen: dict[str, None] = {}
    for vec in candidates.values():
        for g, v in (vec or {}).items():
            if v is not None and not (isinstance(v, float) and math.isnan(v)):
                seen.setdefault(g, None)
    return sorted(seen)


def _vectors(candidates: Mapping[K, Vector]) -> dict[K, tuple[float, ...]]:
    groups = _groups(candidates)
    out: dict[K, tuple[float, ...]] = {}
    for key, vec in candidates.items():
        vec = vec or {}
        values = []
        for g in groups:
            v = vec.get(g)
            values.append(-math.inf if v is None or math.isnan(float(v)) else float(v))
        if groups and any(v != -math.inf for v in values):
            out[key] = tuple(values)
    return out


def dominates(a: tuple[float, ...], b: tuple[float, ...]) -> bool:
    return all(x >= y for x, y in zip(a, b, strict=True)) and any(x > y for x, y in zip(a, b, strict=True))


def pareto_front(candidates: Mapping[K, Vector]) -> list[K]:
    """Keys of the non-dominated candidates, in the mapping's order."""
    vecs = _vectors(candidates)
    return [k for k, v in vecs.items() if not any(dominates(o, v) for j, o in vecs.items() if j != k)]


def minimax_pareto(candidates: Mapping[K, Vector]) -> K | None:
    """The Pareto-front candidate with the highest worst-group AUC (ties: mean AUC, then order)."""
    vecs = _vectors(candidates)
    best_key, best_rank = None, None
    for key in pareto_front(candidates):
        v = vecs[key]
        finite = [x for x in v if x != -math.inf]
        rank = (min(v), sum(finite) / len(finite) if finite else -math.inf)
        if best_rank is None or rank > best_rank:
            best_key, best_rank = key, rank
    return best_key
