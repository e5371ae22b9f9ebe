"""Like with like, for the console: the rules live in engine.session.views (the presentation
model every surface shares); this module only re-exports them for the widgets and reads the
reference rows (baselines trained here, the study's published rows) a comparison needs."""
from __future__ import annotations

from typing import Any

from engine.session.views import (  # noqa: F401 - re-exported for the widgets and the help screen
    AXIS,
    BLINDED_NOTE,
    CRITERIA,
    CRITERION_SHORT,
    ENDED,
    IMPORTED_NOTE,
    PUBLISHED_NOTE,
    SOURCE_HELP,
    SOURCE_MEASURED,
    SOURCE_PUBLISHED,
    SOURCE_TRAINED,
    SPLIT_TITLE,
    SPLIT_WORDS,
    SPLITS,
    STUDY_BLINDED_NOTE,
    SYNTH_NOTE,
    Comparison,
    Row,
    baseline_points,
    best_nodes,
    blinded_note,
    comparison,
    comparison_rows,
    data_kind,
    node_metrics,
    node_rows,
    notes,
    plot_points,
    published_label,
    published_points,
    reference_points,
    same_data,
    synth,
    test_hidden,
    test_visible,
)


def blinded(state: Any) -> bool:
    """Does this session hide test metrics from the console (a participant) right now?"""
    return test_hidden(state)


def reference_rows(store: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the baselines table's rows, the published rows): the database's published rows, else the
    ones shipped with the package."""
    baselines = list(store.baselines())
    rows = list(store.reference_rows())
    if not rows:
        try:
            from baselines.reference import load_reference_rows

            rows = list(load_reference_rows())
        except Exception:  # noqa: BLE001 - published rows are optional
            rows = []
    return baselines, rows


BASELINE_TAGS = "ABCDEFGHIJ"
PUBLISHED_TAGS = "123456789"


def reference_tags(baselines: list[dict[str, Any]], published: list[dict[str, Any]],
                   split: str) -> dict[tuple[str, str], str]:
    """(kind, name) -> the letter (baselines trained here: A, B, …) or number (published rows:
    1, 2, …) a plotted reference is drawn as; the scoreboard names its rows with the same tags,
    so every point on the plot is named even where the plot has no room for a legend."""
    tags: dict[tuple[str, str], str] = {}
    counts = {"baseline": 0, "published": 0}
    for name, _gap, _auc, kind in reference_points(baselines, published, split):
        letters = BASELINE_TAGS if kind == "baseline" else PUBLISHED_TAGS
        counts[kind] += 1
        if counts[kind] <= len(letters):
            tags[(kind, name)] = letters[counts[kind] - 1]
    return tags
