"""Like with like: what the scoreboard, the plot, `befair show` and the exports may put side by side.

Test against test (the DDI-format test set next to the published DDI rows), validation apart, with
a note whenever the data is generated. Computed from a `SessionState` and the baselines and
published rows the caller passes in; nothing else is read."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.session import selection

from engine.session import figure_text
from engine.session.figure_text import fmt
from engine.session.state import NodeState, SessionState
from engine.session.views.best import CRITERION_WORDS, best_nodes, session_criterion
from engine.session.views.blinding import blinded_note, test_hidden, test_withheld, visible_test

# "test": the best nodes' held-out DDI-format TEST metrics next to the published DDI test rows and
# the baselines' test rows. "validation": the held-out validation split (carved out of the
# training data, never seen by the agent) next to the baselines scored on that same split;
# published figures are test results only, never in this view.
SPLITS = ("test", "validation")
CRITERION_SHORT = selection.CRITERION_SHORT
SYNTH_NOTE = "generated data: not comparable to published DDI numbers"
IMPORTED_NOTE = "imported run: not measured here"
PUBLISHED_NOTE = "published rows are DDI test results: listed with the test figures"
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
SPLIT_TITLE = {"test": "test (DDI format)", "validation": "validation (held-out split of the training data)"}
SPLIT_WORDS = {
    "test": "held-out DDI-format test set",
    "validation": "held-out validation split (training-data images the agent never saw)",
}
AXIS = {  # split -> (y axis, x axis): the AUC along x, the gap up y, as in the study's Figure 2
    "test": ("skin-tone AUC gap (test)", "test AUC"),
    "validation": ("skin-tone AUC gap (validation)", "validation AUC"),
}


def data_kind(state: SessionState) -> str:
    """"synth" (generated SynthDerm), "real" (a prepared workspace), "imported" (an AIDE run
    measured elsewhere) or "" (not known yet)."""
    kind = str((state.data or {}).get("kind") or "")
    if kind == "synth":
        return "synth"
    if "import" in kind or "import" in str(state.coder.get("name", "")):
        return "imported"
    return "real" if kind else ""


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


def node_metrics(state: SessionState, node: NodeState, split: str,
                 unblind: bool = False) -> tuple[float | None, float | None]:
    """(AUC, gap) of a node on a split, or (None, None) when it has none or it is hidden."""
    if split == "validation":
        return node.val_auc, node.val_gap
    test = visible_test(state, node, unblind)
    return (test.auc, test.auc_gap) if test is not None else (None, None)


@dataclass
class Row:
    name: str
    auc: float | None
    gap: float | None
    source: str                       # measured here | trained here | published
    kind: str                         # node | baseline | published
    std: tuple[float | None, float | None] = (None, None)
    node_id: int | None = None
    criteria: list[str] = field(default_factory=list)
    chosen: bool = False              # the best node by the session's own criterion
    hidden: bool = False              # blinded: the figures exist but this reader may not see them
    note: str = ""                    # why a number is missing, or a caveat
    explain: str = ""                 # the tooltip: what the row's numbers are
    auc_ci: list[float] | None = None     # 95 % intervals (measured rows with kept predictions)
    gap_ci: list[float] | None = None
    interval: str = ""                # what the row's uncertainty is, or why it has none

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def figures(self) -> str:
        """`.74 ±.04 · gap .03 ±.09`, `.641 / .097` (no interval), or `hidden`."""
        if self.hidden:
            return "hidden"
        if self.auc_ci is None and self.gap_ci is None:
            return f"{fmt(self.auc)} / {fmt(self.gap)}"
        return f"{figure_text.plus_minus(self.auc, self.auc_ci)} · gap {figure_text.plus_minus(self.gap, self.gap_ci)}"


INTERVAL_MEASURED = "95 % bootstrap interval (images resampled within skin-tone group and label)"
INTERVAL_PUBLISHED = "no interval known: a published mean ± std over runs"
INTERVAL_SEEDS = "no interval: mean ± std over the baseline's seeds"


def _mean_std(values: Iterable[float | None]) -> tuple[float | None, float | None]:
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None, None
    mean = sum(vals) / len(vals)
    std = (sum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) ** 0.5 if len(vals) > 1 else 0.0
    return mean, std


def baseline_points(baselines: list[dict[str, Any]], state: SessionState | None = None) -> list[dict[str, Any]]:
    """Mean test and validation AUC / gap per baseline variant trained here (and on which data)."""
    by_key: dict[tuple[str, str], list[dict[str, Any]]] = {}
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


def _node_note(state: SessionState, node: NodeState, split: str, auc: float | None, hidden: bool) -> str:
    if auc is not None:
        return ""
    if hidden:
        return blinded_note(state)
    if node.origin == "import":
        return IMPORTED_NOTE
    return "not measured on test yet" if split == "test" else "no validation measurement"


def node_rows(state: SessionState, split: str, unblind: bool = False, criterion: str | None = None) -> list[Row]:
    """The best node by each criterion on a split; `criterion`: the one ★ follows for this reader
    (a replay's view choice; default: the session's)."""
    chosen = criterion or session_criterion(state)
    rows = []
    for node_id, crits in best_nodes(state).items():
        node = state.nodes[node_id]
        auc, gap = node_metrics(state, node, split, unblind)
        hidden = split == "test" and test_withheld(state, node, unblind)
        note = _node_note(state, node, split, auc, hidden)
        source = node.eval_sources.get(split, SOURCE_MEASURED)
        explain = (f"Node {node_id}: the best node by {', '.join(CRITERION_WORDS[c] for c in crits)}. "
                   f"AUC and skin-tone AUC gap on the {SPLIT_WORDS[split]}, {source}."
                   + (f" {note[0].upper() + note[1:]}." if note else ""))
        summary = node.validation if split == "validation" else visible_test(state, node, unblind)
        measured = figure_text.has_intervals(summary)
        rows.append(Row(name=f"node {node_id} · best {'/'.join(CRITERION_SHORT[c] for c in crits)}", auc=auc,
                        gap=gap, source=source, kind="node", node_id=node_id, criteria=crits,
                        chosen=chosen in crits, hidden=hidden, note=note, explain=explain,
                        auc_ci=figure_text.interval(summary, "auc"), gap_ci=figure_text.interval(summary, "auc_gap"),
                        interval=INTERVAL_MEASURED if measured
                        else (figure_text.NO_INTERVAL if auc is not None else "")))
    return rows


def _baseline_row(b: dict[str, Any], split: str) -> Row:
    other = b.get("same_data") is False
    if split == "test":
        auc, gap, std = b.get("auc"), b.get("gap"), (b.get("auc_std"), b.get("gap_std"))
    else:
        auc, gap, std = b.get("val_auc"), b.get("val_gap"), (b.get("val_auc_std"), b.get("val_gap_std"))
    where = "DDI-format test set" if split == "test" else "validation split"
    return Row(name=f"{b['name']} (n={b['n']})", auc=auc, gap=gap, source=SOURCE_TRAINED, kind="baseline", std=std,
               interval=INTERVAL_SEEDS,
               note="other data: not comparable" if other else "",
               explain=f"Expert baseline {b['name']} trained here: mean over {b['n']} seed(s) on the "
                       f"{where} of {b.get('dataset') or 'its data'}."
                       + (" It was trained on other data than this session's, so it is not comparable."
                          if other else ""))


def comparison_rows(state: SessionState, baselines: list[dict[str, Any]], published: list[dict[str, Any]],
                    split: str, unblind: bool = False, criterion: str | None = None) -> list[Row]:
    """The scoreboard's rows for one split, like with like. `baselines`: baseline_points();
    `published`: published_points()."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, not {split!r}")
    rows = node_rows(state, split, unblind, criterion) + [_baseline_row(b, split) for b in baselines]
    if split == "test":
        caveat = " This session uses generated data: not comparable." if synth(state) else ""
        for p in published:
            rows.append(Row(name=published_label(p["name"]), auc=p.get("auc"), gap=p.get("gap"),
                            interval=INTERVAL_PUBLISHED,
                            source=SOURCE_PUBLISHED, kind="published", std=(p.get("auc_std"), p.get("gap_std")),
                            note="not comparable: generated data" if synth(state) else "",
                            explain=f"{p['name']}: mean over runs on the real DDI test set as the Be Fair! "
                                    f"study published it (not measured by this product).{caveat}"))
    return rows


def notes(state: SessionState, split: str, *, has_published: bool = True, unblind: bool = False) -> list[str]:
    """The caveats a reader must see next to this split's numbers."""
    if split != "test":   # where the published rows went (none to say where no reader sees them)
        return [PUBLISHED_NOTE] if has_published else []
    out = [SYNTH_NOTE] if synth(state) and has_published else []
    if test_hidden(state, unblind) and state.nodes:
        out.append(blinded_note(state))
    return out


def plot_points(state: SessionState, split: str, unblind: bool = False) -> list[tuple[int, float, float]]:
    """(node id, gap, AUC) of every measured, working node on this split (nothing hidden is plotted)."""
    out = []
    for node in state.nodes.values():
        if node.status != "ok":
            continue
        auc, gap = node_metrics(state, node, split, unblind)
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


@dataclass
class Comparison:
    """One split's comparison, as the scoreboard, `befair show` and the exports present it."""

    split: str
    title: str
    axes: tuple[str, str]             # (y, x)
    rows: list[Row]
    notes: list[str]

    def to_json(self) -> dict[str, Any]:
        return {"split": self.split, "title": self.title, "y_axis": self.axes[0], "x_axis": self.axes[1],
                "notes": list(self.notes), "rows": [r.to_json() for r in self.rows]}

    def lines(self) -> list[str]:
        """Plain text: a title, the notes, one row per line."""
        label = "test AUC" if self.split == "test" else "val AUC"
        out = [f"{self.title}: {label} / skin-tone AUC gap"]
        out += [f"  {'note:' if n == PUBLISHED_NOTE else '⚠'} {n}" for n in self.notes]
        for r in self.rows:
            star = "★" if r.chosen else " "
            # a published row's caveat is the note above; a node's or baseline's is its own
            note = f"  ({r.note})" if r.note and not r.hidden and r.kind != "published" else ""
            out.append(f"  {star} {r.name:<38} {r.figures():>24}  {r.source}{note}")
        if any(r.auc_ci is not None for r in self.rows):
            out.append("  ± half the 95 % interval: images resampled within skin-tone group and label; "
                       "published rows have no interval (mean ± std over runs)")
        return out


def comparison(state: SessionState, baselines: list[dict[str, Any]], reference: list[dict[str, Any]],
               split: str, *, unblind: bool = False) -> Comparison:
    """From raw rows: `baselines` (the baselines table) and `reference` (the published rows)."""
    points = baseline_points(baselines, state)
    published = published_points(reference, state.level)
    return Comparison(split=split, title=SPLIT_TITLE[split], axes=AXIS[split],
                      rows=comparison_rows(state, points, published, split, unblind),
                      notes=notes(state, split, has_published=bool(published), unblind=unblind))


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
