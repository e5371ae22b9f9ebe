"""Like with like: which figures the scoreboard and the plot may put side by side.

Pure functions over a folded `SessionState` and the reference rows (no widgets), so they can move
into engine/session/views.py unchanged. Two views:

- "test": each best node's held-out DDI-format TEST metrics next to the study's published DDI
  test rows and the expert baselines' test rows. Test metrics of a blinded session are hidden
  (and the view says why) until the session ends, unless a study keeps them blind.
- "validation": each node's metrics on the held-out validation split (carved out of the
  training data, never seen by the agent) next to the baselines trained on the same data,
  scored on that same split. Published figures are test results only: never in this view.

Every row carries where its numbers come from: "measured here", "trained here" or "published".
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Iterable
from typing import Any

from engine.session import views
from engine.session.state import NodeState, SessionState, best_node

SPLITS = ("test", "validation")
CRITERIA = ("claimed", "validation", "minimax")
CRITERION_SHORT = {"claimed": "claim", "validation": "val", "minimax": "minimax"}  # tooltips say it in full
ENDED = ("finished", "stopped", "failed")

SYNTH_NOTE = "generated data: not comparable to published DDI numbers"
BLINDED_NOTE = "test metrics hidden until the session ends"
STUDY_BLINDED_NOTE = "test metrics blinded for this study"
IMPORTED_NOTE = "imported run: not measured here"
PUBLISHED_NOTE = "published rows are DDI test results: see the test view (v)"

SOURCE_MEASURED = "measured here"
SOURCE_TRAINED = "trained here"
SOURCE_PUBLISHED = "published"
SOURCE_HELP = {
    SOURCE_MEASURED: "measured by befair on this session's held-out images (the node's predict() "
                     "was run here; labels never reached the node)",
    SOURCE_TRAINED: "an expert baseline (MEDFAIR ResNet-18) trained and scored by befair on this "
                    "database's data, mean over its seeds",
    SOURCE_PUBLISHED: "a figure published by the Be Fair! study (Richter, Stoyanovich, Schelter "
                      "2026) on the real DDI test set: not a result of this product",
}
SPLIT_TITLE = {
    "test": "test (DDI format)",
    "validation": "validation (held-out split of the training data)",
}
SPLIT_WORDS = {
    "test": "held-out DDI-format test set",
    "validation": "held-out validation split (training-data images the agent never saw)",
}
AXIS = {
    "test": ("test AUC", "skin-tone AUC gap (test)"),
    "validation": ("validation AUC", "skin-tone AUC gap (validation)"),
}


# -- the session's data -----------------------------------------------------------------------
def data_kind(state: SessionState) -> str:
    """"synth" (generated SynthDerm), "real" (a prepared workspace), "imported" (an AIDE run
    measured elsewhere) or "" (not known yet)."""
    kind = str((state.data or {}).get("kind") or "")
    if kind == "synth":
        return "synth"
    if "import" in kind or "import" in str(state.coder.get("name", "")):
        return "imported"
    if kind:
        return "real"
    return ""


def synth(state: SessionState) -> bool:
    return data_kind(state) == "synth"


def same_data(dataset: str | None, state: SessionState) -> bool | None:
    """Was a baseline trained on this session's data? True / False, None when it cannot be told.

    A session records its workspace folder (`data.path`); a baseline records the data folder the
    workspace was prepared from (the SynthDerm cache names the workspace `<data>-workspace`)."""
    path = str((state.data or {}).get("path") or "")
    if not dataset or not path:
        return None
    a, b = Path(str(dataset)), Path(path)
    if a == b or b.name == f"{a.name}-workspace" and a.parent == b.parent:
        return True
    if str(dataset) in ("synth", "synthderm"):
        return synth(state) and "synthderm" in path
    return False


# -- visibility of test metrics ---------------------------------------------------------------
def test_visible(state: SessionState, node: NodeState) -> bool:
    """Blinded test metrics (a study's setting) stay hidden while the session runs and are
    revealed when it ends, unless the session belongs to a study (kept blind)."""
    revealed = state.status in ENDED and not state.config.get("study_id")
    return views.test_visible(state, node, unblind=revealed)


def blinded(state: SessionState) -> bool:
    """Does this session hide test metrics from the console right now?"""
    if not (state.config.get("blind_test") or any(n.test_blinded for n in state.nodes.values())):
        return False
    return not (state.status in ENDED and not state.config.get("study_id"))


def blinded_note(state: SessionState) -> str:
    return STUDY_BLINDED_NOTE if state.status in ENDED else BLINDED_NOTE


def node_metrics(state: SessionState, node: NodeState, split: str) -> tuple[float | None, float | None]:
    """(AUC, gap) of a node on a split, or (None, None) when it has none or it is hidden."""
    if split == "validation":
        return node.val_auc, node.val_gap
    if not test_visible(state, node):
        return None, None
    test = node.test or {}
    return test.get("auc"), test.get("auc_gap")


# -- rows -------------------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    auc: float | None
    gap: float | None
    source: str                       # measured here | trained here | published
    kind: str                         # node | baseline | published | note
    std: tuple[float | None, float | None] = (None, None)
    node_id: int | None = None
    criteria: list[str] = field(default_factory=list)
    chosen: bool = False              # the best node by the session's own criterion
    note: str = ""                    # why a number is missing, or a caveat
    explain: str = ""                 # the tooltip: what the row's numbers are


def _mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None
    mean = sum(vals) / len(vals)
    std = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5 if len(vals) > 1 else 0.0
    return mean, std


def baseline_points(baselines: list[dict[str, Any]], state: SessionState | None = None) -> list[dict[str, Any]]:
    """Mean test and validation AUC / gap per baseline variant trained here (and on which data)."""
    by_key: dict[tuple[str, str], list[dict]] = {}
    for row in baselines:
        by_key.setdefault((row.get("variant") or "baseline", str(row.get("dataset") or "")), []).append(row)
    out = []
    for (variant, dataset), rows in sorted(by_key.items()):
        auc, auc_std = _mean_std(r.get("test_auc") for r in rows)
        gap, gap_std = _mean_std(r.get("test_gap") for r in rows)
        val_auc, val_auc_std = _mean_std(r.get("val_auc") for r in rows)
        val_gap, val_gap_std = _mean_std(r.get("val_gap") for r in rows)
        out.append({"name": variant, "dataset": dataset, "n": len(rows),
                    "auc": auc, "auc_std": auc_std, "gap": gap, "gap_std": gap_std,
                    "val_auc": val_auc, "val_auc_std": val_auc_std, "val_gap": val_gap, "val_gap_std": val_gap_std,
                    "same_data": same_data(dataset, state) if state is not None else None})
    return out


def published_points(reference: list[dict[str, Any]], level: str) -> list[dict[str, Any]]:
    """The experts' and dermatologists' published rows, plus the agents' rows at this level."""
    out = []
    for row in reference:
        if row.get("agent") and row.get("level") not in (level, None, ""):
            continue  # an agent's row at another instruction level
        name = str(row.get("name") or row.get("id"))
        out.append({"name": name, "auc": row.get("auc_mean"), "auc_std": row.get("auc_std"),
                    "gap": row.get("gap_mean"), "gap_std": row.get("gap_std"),
                    "source": row.get("source") or SOURCE_PUBLISHED})
    return out


def published_label(name: str) -> str:
    return f"{name} (published)"


def best_nodes(state: SessionState) -> dict[int, list[str]]:
    """node id -> the criteria it is best by (claimed, validation, minimax), in criteria order."""
    out: dict[int, list[str]] = {}
    for criterion in CRITERIA:
        node = best_node(state, criterion)
        if node is not None:
            out.setdefault(node.node_id, []).append(criterion)
    return out


def node_rows(state: SessionState, split: str) -> list[Row]:
    chosen = state.config.get("best", "validation")
    rows = []
    hidden_note = blinded_note(state)
    for node_id, crits in best_nodes(state).items():
        node = state.nodes[node_id]
        auc, gap = node_metrics(state, node, split)
        note = ""
        if split == "test" and auc is None:
            if node.test is not None and not test_visible(state, node):
                note = hidden_note
            elif node.origin == "import" and node.test is None:
                note = IMPORTED_NOTE
            else:
                note = "not measured on test yet"
        elif split == "validation" and auc is None:
            note = IMPORTED_NOTE if node.origin == "import" else "no validation measurement"
        names = "/".join(CRITERION_SHORT[c] for c in crits)
        where = SPLIT_WORDS[split]
        explain = (f"Node {node_id}: the best node by {', '.join(_criterion_words(c) for c in crits)}. "
                   f"AUC and skin-tone AUC gap on the {where}, {SOURCE_MEASURED}."
                   + (f" {note[0].upper() + note[1:]}." if note else ""))
        rows.append(Row(name=f"node {node_id} · best {names}", auc=auc, gap=gap, source=SOURCE_MEASURED,
                        kind="node", node_id=node_id, criteria=crits, chosen=chosen in crits, note=note,
                        explain=explain))
    return rows


def _criterion_words(criterion: str) -> str:
    return {"claimed": "the metric the agent itself reported (its claim)",
            "validation": "validation AUC",
            "minimax": "minimax (best worst-group validation AUC)"}[criterion]


def comparison_rows(state: SessionState, baselines: list[dict[str, Any]], published: list[dict[str, Any]],
                    split: str) -> list[Row]:
    """The scoreboard's rows for one split, like with like (see the module's docstring)."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    rows = node_rows(state, split)
    for b in baselines:
        other = b.get("same_data") is False
        if split == "test":
            auc, gap, std = b.get("auc"), b.get("gap"), (b.get("auc_std"), b.get("gap_std"))
        else:
            auc, gap, std = b.get("val_auc"), b.get("val_gap"), (b.get("val_auc_std"), b.get("val_gap_std"))
        note = "other data: not comparable" if other else ""
        where = "DDI-format test set" if split == "test" else "validation split"
        rows.append(Row(name=f"{b['name']} (n={b['n']})", auc=auc, gap=gap, source=SOURCE_TRAINED,
                        kind="baseline", std=std, note=note,
                        explain=f"Expert baseline {b['name']} trained here: mean over {b['n']} seed(s) on the "
                                f"{where} of {b.get('dataset') or 'its data'}."
                                + (" It was trained on other data than this session's, so it is not "
                                   "comparable." if other else "")))
    if split == "test":
        for p in published:
            rows.append(Row(name=published_label(p["name"]), auc=p.get("auc"), gap=p.get("gap"),
                            source=SOURCE_PUBLISHED, kind="published", std=(p.get("auc_std"), p.get("gap_std")),
                            explain=f"{p['name']}: mean over runs on the real DDI test set as the Be Fair! study "
                                    f"published it (not measured by this product)."
                                    + (" This session uses generated data: not comparable." if synth(state)
                                       else "")))
    return rows


def notes(state: SessionState, split: str, *, has_published: bool = True) -> list[str]:
    """The caveats a reader must see next to this split's numbers."""
    out = []
    if split == "test":
        if synth(state) and has_published:
            out.append(SYNTH_NOTE)
        if blinded(state) and state.nodes:
            out.append(blinded_note(state))
    else:
        out.append(PUBLISHED_NOTE)
    return out


def plot_points(state: SessionState, split: str) -> list[tuple[int, float, float]]:
    """(node id, gap, AUC) of every measured node on this split (nothing hidden is plotted)."""
    out = []
    for node in state.nodes.values():
        if node.status != "ok":
            continue
        auc, gap = node_metrics(state, node, split)
        if auc is not None and gap is not None:
            out.append((node.node_id, gap, auc))
    return out


def reference_points(baselines: list[dict[str, Any]], published: list[dict[str, Any]],
                     split: str) -> list[tuple[str, float, float, str]]:
    """(name, gap, AUC, kind) of the baselines (same or unknown data) and, on test, the published rows."""
    out = []
    for b in baselines:
        if b.get("same_data") is False:
            continue
        auc, gap = (b.get("auc"), b.get("gap")) if split == "test" else (b.get("val_auc"), b.get("val_gap"))
        if auc is not None and gap is not None:
            out.append((b["name"], gap, auc, "baseline"))
    if split == "test":
        for p in published:
            if p.get("auc") is not None and p.get("gap") is not None:
                out.append((p["name"], p["gap"], p["auc"], "published"))
    return out
