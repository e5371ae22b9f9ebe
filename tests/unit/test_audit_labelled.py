"""The static audit measured against a labelled set of real pipelines.

tests/fixtures/audit_cases/ holds pipelines from three sources (see its README.md): nodes of the
published AIDE journal, pipelines the offline coder renders (labelled from their components), and
hand-written hard cases (class balancing vs skin-tone reweighting, per-group metrics written many
ways, group vs class upsampling, filters vs preprocessing, worst-group vs best-overall selection).
labels.toml gives each case's expected flags and why; claims.toml gives claimed-vs-output cases
for the `!` (unsupported claim) badge.

The test prints the per-badge table (cases positive, precision, recall) and requires precision
>= 0.9 and recall >= 0.8 for every badge. `score_audit(audit_fn)` and `score_claims(check_fn)` also
measure another version of the audit (the before/after comparison in the audit's history).
"""
from __future__ import annotations

import ast
import tomllib
from pathlib import Path
from typing import Any
from collections.abc import Callable

import pytest

from engine.evaluation.audit import FLAGS, audit_code, check_claim

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "audit_cases"
SHORT = {"reads_skin_tone": "ST", "per_group_metric": "PG", "reweighting": "RW", "upsampling": "UP",
         "filtering": "FI", "pareto_selection": "PA"}
MIN_PRECISION = 0.9
MIN_RECALL = 0.8


def load_labels() -> dict[str, dict[str, Any]]:
    return tomllib.loads((CASES / "labels.toml").read_text(encoding="utf-8"))


def load_claims() -> dict[str, dict[str, Any]]:
    return tomllib.loads((CASES / "claims.toml").read_text(encoding="utf-8"))


def _pr(tp: int, fp: int, fn: int) -> tuple[float, float]:
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    return precision, recall


def score_audit(audit_fn: Callable[[str], Any]) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Per flag: positives, tp, fp, fn, precision, recall; and one line per disagreement."""
    table = {f: {"positive": 0, "tp": 0, "fp": 0, "fn": 0} for f in FLAGS}
    misses: list[str] = []
    for name, label in load_labels().items():
        code = (CASES / label["file"]).read_text(encoding="utf-8")
        flags = audit_fn(code).flags
        for f in FLAGS:
            want, got = bool(label[f]), bool(flags.get(f))
            row = table[f]
            row["positive"] += want
            if want and got:
                row["tp"] += 1
            elif got:
                row["fp"] += 1
                misses.append(f"FP {SHORT[f]} {name}")
            elif want:
                row["fn"] += 1
                misses.append(f"FN {SHORT[f]} {name}")
    for row in table.values():
        row["precision"], row["recall"] = _pr(row["tp"], row["fp"], row["fn"])
    return table, misses


def score_claims(check_fn: Callable[..., dict[str, Any]]) -> tuple[dict[str, Any], list[str]]:
    """The `!` badge: precision / recall of `unsupported` over claims.toml."""
    row = {"positive": 0, "tp": 0, "fp": 0, "fn": 0}
    misses: list[str] = []
    for name, c in load_claims().items():
        got = bool(check_fn(c.get("claimed"), c.get("measured"), ran_ok=c["ran_ok"], output=c["output"])["unsupported"])
        want = bool(c["unsupported"])
        row["positive"] += want
        if want and got:
            row["tp"] += 1
        elif got:
            row["fp"] += 1
            misses.append(f"FP ! {name}")
        elif want:
            row["fn"] += 1
            misses.append(f"FN ! {name}")
    row["precision"], row["recall"] = _pr(row["tp"], row["fp"], row["fn"])
    return row, misses


def format_table(table: dict[str, dict[str, Any]], claims: dict[str, Any] | None = None) -> str:
    out = [f"{'badge':<20} {'positive':>8} {'TP':>4} {'FP':>4} {'FN':>4} {'precision':>9} {'recall':>7}"]
    rows = [(f"{SHORT[f]} {f}", table[f]) for f in FLAGS]
    if claims is not None:
        rows.append(("! unsupported claim", claims))
    for label, r in rows:
        out.append(f"{label:<20} {r['positive']:>8} {r['tp']:>4} {r['fp']:>4} {r['fn']:>4} "
                   f"{r['precision']:>9.2f} {r['recall']:>7.2f}")
    return "\n".join(out)


# --------------------------------------------------------------------------- the fixtures themselves

def test_the_labelled_set_is_complete_and_parses():
    labels = load_labels()
    assert len(labels) >= 60
    files = {p.name for p in CASES.glob("*.py")}
    assert files == {label["file"] for label in labels.values()}, "every case file has labels and vice versa"
    sources = {label["source"].split(" ")[0] for label in labels.values()}
    assert {"AIDE", "offline", "hand-written"} <= sources
    for name, label in labels.items():
        assert set(FLAGS) <= set(label), name
        assert label["why"].strip(), name
        ast.parse((CASES / label["file"]).read_text(encoding="utf-8"))
    for flag in FLAGS:  # every badge has positives and negatives to be measured on
        positives = sum(bool(label[flag]) for label in labels.values())
        assert 8 <= positives <= len(labels) - 8, (flag, positives)


def test_offline_labels_follow_the_components():
    """The offline cases' labels are derived from the components in each file's header."""
    from engine.coders import offline as g

    for name, label in load_labels().items():
        if not name.startswith("offline_"):
            continue
        c = g.components_from_code((CASES / label["file"]).read_text(encoding="utf-8"))
        assert c is not None, name
        assert label["reads_skin_tone"] == g.uses_skin_tone(c), name
        assert label["reweighting"] == (c["fairness"] in ("reweight", "group_balanced")), name
        assert label["upsampling"] == (c["fairness"] == "upsample"), name
        assert label["filtering"] == bool(c["filter_non_neoplastic"]), name
        assert label["pareto_selection"] == (c["selection"] == "minimax"), name


# --------------------------------------------------------------------------- the audit against them

def test_audit_precision_and_recall_on_the_labelled_set(capsys):
    table, misses = score_audit(audit_code)
    claims, claim_misses = score_claims(check_claim)
    with capsys.disabled():
        print("\nstatic audit on tests/fixtures/audit_cases "
              f"({len(load_labels())} pipelines, {len(load_claims())} claims)")
        print(format_table(table, claims))
        for line in misses + claim_misses:
            print("  ", line)
    for f in FLAGS:
        r = table[f]
        assert r["precision"] >= MIN_PRECISION, (f, r, misses)
        assert r["recall"] >= MIN_RECALL, (f, r, misses)
    assert claims["precision"] >= MIN_PRECISION and claims["recall"] >= MIN_RECALL, (claims, claim_misses)


@pytest.mark.parametrize("name", sorted(load_labels()))
def test_every_flag_carries_its_source_line(name):
    label = load_labels()[name]
    code = (CASES / label["file"]).read_text(encoding="utf-8")
    lines = code.splitlines()
    result = audit_code(code)
    assert result.note is None
    assert set(result.evidence) == {f for f in FLAGS if result.flags[f]}
    for flag, evidence in result.evidence.items():
        head, text = evidence.split(": ", 1)
        lineno = int(head.split()[1])
        assert head == f"line {lineno}" and 1 <= lineno <= len(lines), evidence
        assert lines[lineno - 1].strip().startswith(text.removesuffix("...")), (flag, evidence)


def test_offline_coder_drafts_are_audited_from_their_components():
    """Fresh offline-coder drafts at every level: the audit agrees with the grammar's components
    (the offline coder is ground truth for what its code does)."""
    from engine.coders import offline as g
    from engine.coders.offline import OfflineCoder
    from engine.coders.protocol import CoderContext
    from engine.task import LEVELS, METRIC_LINE

    coder = OfflineCoder(failure_rate=0.0)
    disagreements = []
    n = 0
    for level in LEVELS:
        for step in range(15):
            ctx = CoderContext(instruction=LEVELS[level], metric_line=METRIC_LINE, data_preview="", step=step,
                               seed=11, guidance_global=[], guidance_node=[], level=level)
            reply = coder.draft(ctx)
            c = reply.components
            want = {
                "reads_skin_tone": g.uses_skin_tone(c), "per_group_metric": g.uses_skin_tone(c),
                "reweighting": c["fairness"] in ("reweight", "group_balanced"),
                "upsampling": c["fairness"] == "upsample", "filtering": bool(c["filter_non_neoplastic"]),
                "pareto_selection": c["selection"] == "minimax",
            }
            got = audit_code(reply.code).flags
            n += 1
            disagreements += [(level, step, f) for f in FLAGS if got[f] != want[f]]
    assert n >= 60 and not disagreements, disagreements


@pytest.mark.parametrize("name", sorted(load_claims()))
def test_each_claim_case(name):
    c = load_claims()[name]
    got = check_claim(c.get("claimed"), c.get("measured"), ran_ok=c["ran_ok"], output=c["output"])
    assert got["unsupported"] is c["unsupported"], (name, c["why"], got)
    if got["unsupported"]:
        assert got["reason"]
