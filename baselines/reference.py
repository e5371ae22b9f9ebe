"""The study's published figures, kept as reference data with their source.

These rows (baselines/reference.csv) are the "Be Fair!" study's numbers on DDI (mean ± std over
runs; AUC and skin-tone AUC gap) and the dermatologists' figures as that study reports them.
They live in the session database's ``reference_rows`` table, never in ``baselines`` (which holds
only runs trained here), and every row's ``source`` starts with "published:". The console must
label them as published, never as this product's results.
"""
from __future__ import annotations

import csv
import json
from importlib import resources
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from engine.session.store import SessionStore

PUBLISHED_PREFIX = "published:"
_FLOATS = ("auc_mean", "auc_std", "gap_mean", "gap_std")


def _parse(row: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {k: (v if v != "" else None) for k, v in row.items()}
    for k in _FLOATS:
        out[k] = float(out[k]) if out[k] is not None else None
    # group_auc stays a JSON string in the table; {} when the study gives none
    out["group_auc"] = json.dumps(json.loads(out["group_auc"])) if out["group_auc"] else None
    if not str(out["source"] or "").startswith(PUBLISHED_PREFIX):
        raise ValueError(f"reference row {out['id']!r} has no published source")
    return out


def load_reference_rows() -> list[dict[str, Any]]:
    """The published rows shipped with the package, in file order."""
    text = resources.files("baselines").joinpath("reference.csv").read_text(encoding="utf-8")
    return [_parse(r) for r in csv.DictReader(text.splitlines())]


def ensure_reference_rows(store: SessionStore) -> list[dict[str, Any]]:
    """Upsert the published rows into the store's reference_rows table; returns them."""
    rows = load_reference_rows()
    store.upsert_reference_rows(rows)
    return rows


def reference_rows(store: SessionStore) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What a comparison sets beside a session: (the baselines table's rows, the published rows),
    the database's published rows, else the ones shipped with the package."""
    baselines = list(store.baselines())
    rows = list(store.reference_rows())
    if not rows:
        try:
            rows = load_reference_rows()
        except Exception:  # noqa: BLE001 - published rows are optional
            rows = []
    return baselines, rows


def group_auc(row: dict[str, Any]) -> dict[str, float]:
    g = row.get("group_auc")
    return json.loads(g) if isinstance(g, str) and g else (g or {})
