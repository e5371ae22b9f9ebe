"""A session written out as files: its best pipeline (solution.py), its tree (tree.json), one
row per node (nodes.csv), what its figures compare with (comparison.txt) and its events
(events.jsonl), all rendered by engine.session.views like every other surface. Used by
`befair export` and the sessions screen."""
from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.measures.operating_point import KEY as POINT_KEY
from engine.offline_grammar import without_injected_failure
from engine.session import views
from engine.session.sealed import open_sealed, unsealed_events

if TYPE_CHECKING:
    from engine.session.store import SessionStore

_TONES = ("12", "34", "56")   # skin-tone groups by their DDI names (FST I–II, III–IV, V–VI)


def _split_columns(prefix: str) -> list[str]:
    cols = [f"{prefix}_auc", f"{prefix}_auc_lo", f"{prefix}_auc_hi", f"{prefix}_gap", f"{prefix}_gap_lo",
            f"{prefix}_gap_hi", f"{prefix}_worst", f"{prefix}_worst_lo", f"{prefix}_worst_hi", f"{prefix}_best"]
    for tone in _TONES:
        cols += [f"{prefix}_group_{tone}", f"{prefix}_group_{tone}_lo", f"{prefix}_group_{tone}_hi",
                 f"{prefix}_n_{tone}", f"{prefix}_malignant_{tone}", f"{prefix}_missed_{tone}"]
    return cols + [f"{prefix}_n", f"{prefix}_interval", f"{prefix}_verdict"]


_POINT_FIGURES = ("sensitivity", "specificity", "missed_per_100", "brier", "calibration_slope")  # each with _lo, _hi


def _point_columns(prefix: str) -> list[str]:
    """The operating point's columns (engine.measures.operating_point): its cut-off and setting, then per
    skin-tone group and for all groups pooled ("all") the counts at the cut-off and each figure with its
    interval. Empty for a node measured before operating points."""
    cols = [f"{prefix}_op_cut_off", f"{prefix}_op_setting"]
    for tone in (*_TONES, "all"):
        cols += [f"{prefix}_op_caught_{tone}", f"{prefix}_op_cleared_{tone}"]
        for figure in _POINT_FIGURES:
            name = f"{prefix}_op_{figure}_{tone}"
            cols += [name, f"{name}_lo", f"{name}_hi"]
    return cols


NODE_CSV_COLUMNS = [
    "node_id", "summary", "best", "parent_id", "step", "stage", "status", "origin", "pruned", "exec_time", "exc_type",
    "claimed_metric", *_split_columns("val"), *_split_columns("test"), "test_blinded",
    "reads_skin_tone", "per_group_metric", "reweighting", "upsampling", "filtering", "pareto_selection",
    "audit_note",  # "not audited: …": the six flags before it are then empty (unknown), never 0
    "claim_unsupported", "claim_difference", "guidance_ids", "tokens_in", "tokens_out", "cost",
    "sandbox", "unsandboxed",  # the session's: how its agent code ran (bwrap | none | imported)
    *_point_columns("val"), *_point_columns("test"),
]


def _bounds(row: dict[str, Any], name: str, ci: Any) -> None:
    lo, hi = (ci[0], ci[1]) if isinstance(ci, list) and len(ci) == 2 else (None, None)
    row[f"{name}_lo"], row[f"{name}_hi"] = lo, hi


def _split_row(prefix: str, split: dict[str, Any]) -> dict[str, Any]:
    """A split's columns from the public JSON block (groups keyed 12/34/56)."""
    row: dict[str, Any] = {f"{prefix}_auc": split.get("auc"), f"{prefix}_gap": split.get("auc_gap"),
                           f"{prefix}_worst": split.get("worst_auc"), f"{prefix}_best": split.get("best_auc"),
                           f"{prefix}_n": split.get("n")}
    _bounds(row, f"{prefix}_auc", split.get("auc_ci"))
    _bounds(row, f"{prefix}_gap", split.get("auc_gap_ci"))
    _bounds(row, f"{prefix}_worst", split.get("worst_auc_ci"))
    for tone in _TONES:
        row[f"{prefix}_group_{tone}"] = (split.get("group_auc") or {}).get(tone)
        _bounds(row, f"{prefix}_group_{tone}", (split.get("group_auc_ci") or {}).get(tone))
        row[f"{prefix}_n_{tone}"] = (split.get("group_n") or {}).get(tone)
        row[f"{prefix}_malignant_{tone}"] = (split.get("group_positives") or {}).get(tone)
        row[f"{prefix}_missed_{tone}"] = (split.get("group_missed") or {}).get(tone)
    row[f"{prefix}_interval"] = (split.get("ci_method") or split.get("interval")) if split else None
    return {**row, **_point_row(prefix, split.get(POINT_KEY))}


def _point_row(prefix: str, point: Any) -> dict[str, Any]:
    """A split's operating-point columns from its public block (empty without one)."""
    if not isinstance(point, dict):
        return {}
    row: dict[str, Any] = {f"{prefix}_op_cut_off": point.get("threshold"), f"{prefix}_op_setting": point.get("setting")}
    groups = {**(point.get("groups") or {}), "all": point.get("overall") or {}}
    for tone in (*_TONES, "all"):
        group = groups.get(tone) or {}
        row[f"{prefix}_op_caught_{tone}"] = group.get("caught")
        row[f"{prefix}_op_cleared_{tone}"] = group.get("cleared")
        for figure in _POINT_FIGURES:
            row[f"{prefix}_op_{figure}_{tone}"] = group.get(figure)
            _bounds(row, f"{prefix}_op_{figure}_{tone}", group.get(f"{figure}_ci"))
    return row


def _csv_row(d: dict[str, Any], trust: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {k: d.get(k) for k in NODE_CSV_COLUMNS if k in d}
    row.update(_split_row("val", d.get("validation") or {}))
    row.update(_split_row("test", d.get("test") or {}))
    row["val_verdict"] = d.get("validation_verdict")
    row["test_verdict"] = d.get("test_verdict")
    flags, note = d["audit"]["flags"], d["audit"].get("note")
    for flag in views.AUDIT_BADGES:
        row[flag] = None if note or flag not in flags else int(bool(flags[flag]))
    row["audit_note"] = note
    claim = d["audit"]["claim"] or {}
    row["claim_unsupported"] = int(bool(claim.get("unsupported")))
    row["claim_difference"] = claim.get("difference")
    row["guidance_ids"] = " ".join(str(g) for g in d["guidance_ids"])
    row["pruned"] = int(d["pruned"])
    row["best"] = int(d["best"])
    row["test_blinded"] = int(d["test_blinded"])
    row["sandbox"] = trust["sandbox"]
    row["unsandboxed"] = int(bool(trust["unsandboxed"]))
    return row


def export_session(store: SessionStore, session_id: str, out: Path, *, criterion: str | None = None,
                   unblind: bool = False, reference: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Write solution.py (best pipeline), tree.json, nodes.csv, comparison.txt and events.jsonl
    into `out`. `unblind`: a researcher's export (sealed test figures included); `reference`:
    the published rows to compare with (default: the database's)."""
    state = open_sealed(store, session_id, unblind=unblind)
    criterion = criterion or views.session_criterion(state)
    out.mkdir(parents=True, exist_ok=True)
    choice = views.best_choice(state, criterion)
    best = state.nodes.get(choice.node_id) if choice.node_id is not None else None
    written = []
    if best is not None and best.code:

        injected = views.simulated_failure(best)
        header = (f"# befair session {session_id}: node {best.node_id} ({best.stage}), best by {criterion}\n"
                  f"# why: {choice.reason}\n"
                  f"# coder: {state.coder.get('label') or state.coder.get('name')}"
                  f"{' (simulated)' if state.simulated and 'simulated' not in str(state.coder.get('label')) else ''}\n"
                  + (f"# {injected} (the simulation's doing, not a choice of this pipeline)\n" if injected else "")
                  + (f"# {views.UNSANDBOXED}: {views.UNSANDBOXED_MEANING}\n" if state.unsandboxed else ""))
        (out / "solution.py").write_text(header + without_injected_failure(best.code), encoding="utf-8")
        written.append("solution.py")
    published = store.reference_rows() if reference is None else reference
    comparisons = {split: views.comparison(state, store.baselines(), published, split, unblind=unblind)
                   for split in views.SPLITS}
    tree = views.session_json(state, unblind=unblind, comparisons=comparisons)
    tree["export"] = {"criterion": criterion, "best_node": choice.node_id}  # why: tree["best"]
    (out / "tree.json").write_text(json.dumps(tree, indent=2, default=str) + "\n", encoding="utf-8")
    with (out / "nodes.csv").open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=NODE_CSV_COLUMNS)
        w.writeheader()
        for d in tree["nodes"]:
            w.writerow(_csv_row(d, views.trust_fields(state)))
    lines = [line for split in views.SPLITS for line in [*comparisons[split].lines(), ""]]
    (out / "comparison.txt").write_text("\n".join(lines), encoding="utf-8")
    events = store.events(session_id)
    with (out / "events.jsonl").open("w", encoding="utf-8") as fh:
        for e in unsealed_events(store, session_id, events) if unblind else events:
            fh.write(json.dumps({"seq": e.seq, "ts": e.ts, "kind": e.kind, "payload": e.payload},
                                sort_keys=True) + "\n")
    written += ["tree.json", "nodes.csv", "comparison.txt", "events.jsonl"]
    return {"best_node": choice.node_id, "criterion": criterion, "reason": choice.reason, "files": written}
