"""The presentation model: what a folded session means for a reader, on every surface.

The console (tree, node panel, scoreboard, plot), `befair show` (text and --json), the headless
progress lines and the exports all render from here, so they agree on:

- which node is best by each criterion, and why (pruned and failed nodes are never chosen);
- who may see test metrics: a participant sees a blinded session's test metrics when the session
  ends, unless the session belongs to a study (`study_id` set), which keeps them blind for good;
  a researcher sees them with `unblind=True` (`--unblind`);
- the badges: one spelling, one legend, each with the evidence it came from;
- each node's one-line summary;
- what may be compared with what: test against test (the DDI-format test set next to the
  published DDI rows), validation apart, with a note whenever the data is generated.

Everything is computed from a `SessionState` (the fold of a session's events) and, for the
comparison, the baselines and published rows the caller passes in; nothing else is read.
"""
from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Set
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from engine.evaluation.audit.claims import CLAIM_DIFFERENCE_FLAG
from engine.session import figures, selection
from engine.session.figures import fmt
from engine.session.state import NodeState, SessionState, derived

# -- trust markers ----------------------------------------------------------------------------
# The trust marker of a session that ran agent code on this machine without the sandbox.
UNSANDBOXED = "UNSANDBOXED"
UNSANDBOXED_MEANING = "agent code ran on this machine without the sandbox (--sandbox none)"
SANDBOX_VALUES = ("bwrap", "none", "imported")


def sandbox_mode(state: SessionState) -> str:
    """How the session's agent code ran: "bwrap" (sandboxed), "none" (unsandboxed, or recorded
    before the sandbox existed) or "imported" (ran elsewhere; nothing ran here)."""
    if "import" in str(state.coder.get("name", "")):
        return "imported"
    mode = str(state.config.get("sandbox", "none"))
    return mode if mode in ("bwrap", "none") else "none"


def trust_fields(state: SessionState) -> dict[str, Any]:
    """{"sandbox": bwrap|none|imported, "unsandboxed": bool} for JSON and CSV exports."""
    return {"sandbox": sandbox_mode(state), "unsandboxed": bool(state.unsandboxed)}


def row_state(row: Mapping[str, Any]) -> SessionState:
    """A SessionState carrying just a sessions-table row's config and coder (enough for
    `unsandboxed` and `sandbox_mode` without folding the events)."""
    try:
        config = json.loads(row.get("config") or "{}")
    except (TypeError, ValueError):
        config = {}
    return SessionState(config=config if isinstance(config, dict) else {},
                        coder={"name": row.get("coder") or ""})


# -- badges -----------------------------------------------------------------------------------
# Audit flag -> short badge, in display order.
AUDIT_BADGES: dict[str, str] = {
    "reads_skin_tone": "ST",
    "per_group_metric": "PG",
    "reweighting": "RW",
    "upsampling": "UP",
    "filtering": "FI",
    "pareto_selection": "PA",
}
# Every badge any surface shows (console, CLI, exports), one spelling, with what it means.
BADGE_HELP: dict[str, str] = {
    "ST": "reads the skin-tone column",
    "PG": "computes a per-group (per skin tone) metric",
    "RW": "reweights groups in the loss",
    "UP": "upsamples under-represented groups",
    "FI": "filters training rows (e.g. drops some lesions)",
    "PA": "Pareto / minimax model selection (best worst-group AUC)",
    "!": "reports a metric that no run supports (an unsupported claim)",
    "≠": "its reported metric differs from the measured one by .05 or more",
    "G": "a person's guidance was in force when the agent wrote this node",
    "?": "not audited: its code could not be read, so what it does about skin tone is unknown",
}
NOT_AUDITED = "?"


@dataclass(frozen=True)
class Badge:
    code: str          # one of BADGE_HELP's keys
    meaning: str       # BADGE_HELP[code]
    evidence: str      # the line of code, the claim or the guidance it came from


def badges(node: NodeState) -> list[Badge]:
    """The node's badges in BADGE_HELP's order, each with its evidence."""
    out = [Badge(code, BADGE_HELP[code], node.audit_evidence.get(flag, ""))
           for flag, code in AUDIT_BADGES.items() if node.audit_flags.get(flag)]
    if node.audit_note:  # its flags are unknown, not "no": say so before anything else
        out.insert(0, Badge(NOT_AUDITED, BADGE_HELP[NOT_AUDITED], node.audit_note))
    claim = node.claim or {}
    if claim.get("unsupported"):
        out.append(Badge("!", BADGE_HELP["!"], str(claim.get("reason") or
                                                     f"claimed {fmt(claim.get('claimed'), 4)}, no measurement")))
    elif claim.get("difference") is not None and abs(claim["difference"]) >= CLAIM_DIFFERENCE_FLAG:
        out.append(Badge("≠", BADGE_HELP["≠"], f"claimed {fmt(claim.get('claimed'), 4)}, measured "
                                               f"{fmt(claim.get('measured'), 4)} ({claim['difference']:+.3f})"))
    if node.guidance_ids:
        out.append(Badge("G", BADGE_HELP["G"], "guidance " + ", ".join(f"#{g}" for g in node.guidance_ids)))
    return out


def audit_badges(node: NodeState) -> list[str]:
    return [b.code for b in badges(node)]


def simulated_failure(node: NodeState) -> str | None:
    """"simulated agent: this node was made to …" when the offline coder (a simulated agent) made
    this node fail on purpose, so that the debug path runs; None otherwise."""
    from engine.agent.offline.grammar import injected_failure

    return injected_failure(node.components) if node.components else None


# -- who sees test metrics, and when ----------------------------------------------------------
ENDED = ("finished", "stopped", "failed")
BLINDED_NOTE = "test metrics hidden until the session ends"
STUDY_BLINDED_NOTE = "test metrics blinded for this study"


def ended(state: SessionState) -> bool:
    return state.status in ENDED


def kept_blind(state: SessionState) -> bool:
    """A study's session keeps its blinded test metrics blind after the end (researchers unblind)."""
    return bool(state.config.get("study_id"))


def blinds_test(state: SessionState) -> bool:
    """Does the session blind test metrics at all (its setting, or a node evaluated blinded)?"""
    return bool(state.config.get("blind_test")) or derived(
        state, "test_blinded", lambda: any(n.test_blinded for n in state.nodes.values()))


def test_revealed(state: SessionState) -> bool:
    """Blinded test metrics are revealed to participants once the session ends, unless a study
    keeps them blind."""
    return ended(state) and not kept_blind(state)


def test_visible(state: SessionState, node: NodeState, unblind: bool = False) -> bool:
    """May this reader see the node's test metrics? `unblind`: a researcher's explicit request."""
    if unblind or not (node.test_blinded or state.config.get("blind_test")):
        return True
    return test_revealed(state)


def test_hidden(state: SessionState, unblind: bool = False) -> bool:
    """Does this session hide test metrics from this reader right now?"""
    return not unblind and blinds_test(state) and not test_revealed(state)


def blinded_note(state: SessionState) -> str:
    return STUDY_BLINDED_NOTE if kept_blind(state) else BLINDED_NOTE


def visible_test(state: SessionState, node: NodeState, unblind: bool = False) -> dict[str, Any] | None:
    """The node's test summary when this reader may see it, else None."""
    return node.test if test_visible(state, node, unblind) else None


def test_withheld(state: SessionState, node: NodeState, unblind: bool = False) -> bool:
    """The node was measured on test but this reader may not see it (or it is sealed)."""
    measured = node.test is not None or node.eval_verdicts.get("test") == "ok"
    return measured and (not test_visible(state, node, unblind) or node.test is None)


def visibility(state: SessionState, unblind: bool = False) -> dict[str, Any]:
    """What this reader sees of the test metrics, for JSON."""
    hidden = test_hidden(state, unblind)
    return {"audience": "researcher" if unblind else "participant", "blinds_test": blinds_test(state),
            "kept_blind": kept_blind(state), "revealed": test_revealed(state), "test_hidden": hidden,
            "note": blinded_note(state) if hidden else None}


# -- the best node by each criterion (decided in engine.session.selection) --------------------
CRITERIA = selection.CRITERIA
CRITERION_WORDS = selection.CRITERION_WORDS


@dataclass(frozen=True)
class BestChoice:
    criterion: str
    node_id: int | None
    reason: str
    recorded: bool     # the engine's recorded final choice (True) or computed from the state so far
    ties: tuple[int, ...] | None = None   # nodes that cannot be told apart from it; None: not compared

    @property
    def uncertainty(self) -> str:
        """How sure the choice is, in words ("" when nothing was compared)."""
        if self.node_id is None or self.ties is None:
            return "" if self.criterion != "claimed" or self.node_id is None else NO_INTERVAL_CLAIM
        return tie_sentence(self.node_id, self.ties)


NO_INTERVAL_CLAIM = "an agent's own score has no interval: it was not measured here"


def tie_sentence(leader: int, ties: Iterable[int], split: str = "validation") -> str:
    others = sorted(set(ties) - {leader})
    if not others:
        return f"node {leader} is told apart from every other node on {split} (paired bootstrap, 95 %)"
    ids = [leader, *others]
    names = ", ".join(str(n) for n in ids[:-1]) + f" and {ids[-1]}"
    return f"nodes {names} cannot be told apart on {split} (paired bootstrap, 95 %)"


def session_criterion(state: SessionState) -> str:
    return selection.current_criterion(state)


def _not_considered(state: SessionState) -> str:
    """Why nodes are out of the running: pruned (it or an ancestor) or not working."""
    return derived(state, "not_considered", lambda: _count_not_considered(state))


def _count_not_considered(state: SessionState) -> str:
    pruned = state.pruned_ids()
    failed = sum(1 for n in state.nodes.values() if n.node_id not in pruned and selection.is_failed(n))
    parts = [f"{len(pruned)} pruned"] if pruned else []
    if failed:
        parts.append(f"{failed} failed")
    return f"; not considered: {', '.join(parts)}" if parts else ""


def _computed_reason(state: SessionState, criterion: str, node_id: int | None) -> str:
    node = state.nodes.get(node_id) if node_id is not None else None
    return selection.reason(node, criterion) + _not_considered(state)


def best_choice(state: SessionState, criterion: str | None = None) -> BestChoice:
    """The best node by one criterion (default: the one ★ follows now). After the end it is the
    engine's recorded final choice; before, the same rule on the state so far."""
    criterion = criterion or session_criterion(state)
    node_id = selection.choice(state, criterion)
    recorded = state.final_choice or {}
    if f"by_{criterion}" in recorded:
        reason = str((recorded.get("reasons") or {}).get(criterion) or "the engine's final choice")
        tied = (recorded.get("ties") or {}).get(criterion)
        if not isinstance(tied, list):
            tied = selection.ties(state, criterion)
        return BestChoice(criterion, node_id, reason, True, tuple(int(n) for n in tied) if tied is not None else None)
    ties_now = selection.ties(state, criterion)
    return BestChoice(criterion, node_id, _computed_reason(state, criterion, node_id), False,
                      tuple(ties_now) if ties_now is not None else None)


def best_by_criterion(state: SessionState) -> dict[str, BestChoice]:
    return {c: best_choice(state, c) for c in CRITERIA}


def best_id(state: SessionState, criterion: str | None = None) -> int | None:
    """The ★ node (best_choice(...).node_id without the reason: the console asks after every batch)."""
    return selection.choice(state, criterion)


def final_choices(state: SessionState) -> dict[str, int | None]:
    """Best node id by each criterion (recorded final choice where there is one, else computed)."""
    return selection.choices(state)


# -- a node's one-line summary ----------------------------------------------------------------
STATUS_ICONS = {"queued": "○", "running": "◐", "ok": "●", "buggy": "✗", "timeout": "⧖", "interrupted": "◌"}
STATUS_WORD = {
    "queued": "queued", "running": "running…", "ok": "ok", "buggy": "bug",
    "timeout": "timeout", "interrupted": "interrupted",
}
IMPORTED_UNMEASURED = "imported (not measured here)"
SHORT_REASON = 32  # characters of a failure reason the tree shows


def short(text: str, width: int = SHORT_REASON) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class NodeSummary:
    """Everything a node's line says; `line()` for text surfaces, `compact()` for the tree."""

    node_id: int
    status: str
    glyph: str
    stage: str                 # draft | improve | debug | human
    parent_id: int | None
    imported: bool
    kind: str                  # measured | pending | problem | imported | unmeasured: how to style `figures`
    figures: str               # ".812 / .052" (validation AUC / gap), "running…", "bug: KeyError" …
    test: str                  # "test .790 / .061", "test hidden" or ""
    badges: tuple[str, ...]
    best: bool                 # the best node by the session's criterion (★)
    pruned: bool
    next: bool                 # a person asked to expand it next
    reason: str = ""           # the full failure reason (figures holds it shortened)

    def stage_text(self, *, with_parent: bool) -> str:
        of = f" of {self.parent_id}" if with_parent and self.parent_id is not None else ""
        imported = " (imported)" if self.imported and self.kind != "imported" else ""
        return f"{self.stage}{of}{imported}"

    def head(self, *, with_parent: bool) -> str:
        return f"{self.glyph} {self.node_id} {self.stage_text(with_parent=with_parent)}"

    def tail(self) -> list[str]:
        parts = ["★ best"] if self.best else []
        if self.badges:
            parts.append("".join(f"[{b}]" for b in self.badges))
        if self.next:
            parts.append("⇢ next")
        if self.pruned:
            parts.append("✂ pruned")
        return parts

    def line(self) -> str:
        """The text surfaces' line: `befair show`, the headless progress, exports."""
        figures = self.figures
        if self.kind == "measured":
            figures = f"val {figures}"
        elif self.kind == "problem" and self.reason and self.reason.strip().lower() != self.figures:
            figures = f"{STATUS_WORD.get(self.status, self.status)}: {self.reason}"
        parts = [self.head(with_parent=True), figures] + ([self.test] if self.test else []) + self.tail()
        return "  ".join(parts)

    def compact(self) -> str:
        """The tree's line: no parent (the tree shows it), no test figures, reasons shortened."""
        return " ".join([self.head(with_parent=False), self.figures, *self.tail()])


def _figures(state: SessionState, node: NodeState) -> tuple[str, str]:
    """(kind, compact figures) of a node (see NodeSummary)."""
    reason = node.failure_reason
    published = node.eval_sources.get("test")
    if published and node.val_auc is None and node.test and node.test.get("auc") is not None:
        # an imported run's final node: its published predictions, scored by this product
        return "imported", f"test {fmt(node.test.get('auc'))} / {fmt(node.test.get('auc_gap'))} · {published}"
    if node.origin == "import" and node.status == "ok" and not reason and node.val_auc is None \
            and not node.eval_verdicts:
        # ran elsewhere (an AIDE journal): its only figure is the one the run reported
        if node.claimed_metric is not None:
            return "imported", f"{IMPORTED_UNMEASURED} · reported {fmt(node.claimed_metric, 4)}"
        return "imported", IMPORTED_UNMEASURED
    if node.status == "ok" and node.val_auc is not None:
        return "measured", figures.compact(node.validation or {})
    if node.status in ("queued", "running"):
        return "pending", STATUS_WORD[node.status]
    if node.status == "ok" and not reason:
        if "validation" in node.eval_verdicts:
            return "unmeasured", "ok · no AUC"
        return ("unmeasured", "ran ok · not measured") if ended(state) else ("pending", "ran ok · measuring…")
    word = STATUS_WORD.get(node.status, node.status)
    if not reason or reason.strip().lower() == word:  # "interrupted", not "interrupted: interrupted"
        return "problem", word
    if node.status == "timeout" and node.exec_time is not None:  # "timeout: timed out after 600 s", shorter
        return "problem", f"{word} · {node.exec_time:.0f} s"
    return "problem", f"{word}: {short(reason)}"


def _test_part(state: SessionState, node: NodeState, unblind: bool) -> str:
    if test_withheld(state, node, unblind):
        return "test hidden"
    test = visible_test(state, node, unblind)
    if test and test.get("auc") is not None:
        return f"test {figures.compact(test)}"
    return ""


def node_summary(state: SessionState, node: NodeState, *, best: int | None, unblind: bool = False,
                 pruned: Set[int] | None = None) -> NodeSummary:
    """`best`: the ★ node, `best_id(state)` (the caller finds it once: it is O(nodes));
    `pruned`: `state.pruned_ids()` when the caller has it."""
    kind, figures = _figures(state, node)
    is_pruned = node.node_id in pruned if pruned is not None else state.is_pruned(node.node_id)
    return NodeSummary(
        node_id=node.node_id, status=node.status, glyph=STATUS_ICONS.get(node.status, "?"), stage=node.stage,
        parent_id=node.parent_id, imported=node.origin == "import", kind=kind, figures=figures,
        test=_test_part(state, node, unblind) if kind == "measured" else "",
        badges=tuple(audit_badges(node)), best=best == node.node_id, pruned=is_pruned,
        next=node.node_id in state.pending_expand, reason=node.failure_reason or "")


def node_line(state: SessionState, node: NodeState, *, unblind: bool = False) -> str:
    """One line per node: icon, id, stage (of parent), val AUC / gap, test, ★, badges, pruned."""
    return node_summary(state, node, unblind=unblind, best=best_id(state)).line()


def tree_order(state: SessionState) -> list[tuple[NodeState, int]]:
    """Nodes depth-first in creation order, with their depth (roots at 0)."""
    out: list[tuple[NodeState, int]] = []
    seen: set[int] = set()

    def visit(node: NodeState, depth: int) -> None:
        if node.node_id in seen:
            return
        seen.add(node.node_id)
        out.append((node, depth))
        for child in sorted(state.children(node.node_id), key=lambda n: n.created_seq):
            visit(child, depth + 1)

    for root in _roots(state):
        visit(root, 0)
    return out


def _roots(state: SessionState) -> list[NodeState]:
    roots = [n for n in state.nodes.values() if n.parent_id is None or n.parent_id not in state.nodes]
    return sorted(roots, key=lambda n: n.created_seq)


def guidance_by_node(state: SessionState) -> dict[int, list[int]]:
    """node_id -> guidance ids that first took effect at that node."""
    out: dict[int, list[int]] = {}
    for g in state.guidance.values():
        for nid in g.used_by[:1] if g.scope == "global" else g.used_by:
            out.setdefault(nid, []).append(g.guidance_id)
    return out


def tree_lines(state: SessionState, *, unblind: bool = False) -> list[str]:
    """The search tree as text lines (├/└ connectors), with guidance where it took effect."""
    by_node = guidance_by_node(state)
    star, pruned = best_id(state), state.pruned_ids()
    lines: list[str] = []

    def visit(node: NodeState, prefix: str, last: bool, root: bool) -> None:
        connector = "" if root else ("└ " if last else "├ ")
        summary = node_summary(state, node, unblind=unblind, best=star, pruned=pruned)
        lines.append(prefix + connector + summary.line())
        child_prefix = prefix if root else prefix + ("  " if last else "│ ")
        for gid in by_node.get(node.node_id, []):
            g = state.guidance[gid]
            where = "global" if g.scope == "global" else f"for node {g.node_id}"
            lines.append(f"{child_prefix}  ✎ guidance #{gid} ({where}): {g.text!r}")
        kids = sorted(state.children(node.node_id), key=lambda n: n.created_seq)
        for i, child in enumerate(kids):
            visit(child, child_prefix, i == len(kids) - 1, False)

    for root in _roots(state):
        visit(root, "", True, True)
    return lines


# -- like with like: what the scoreboard and the plot may put side by side ---------------------
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
    test = visible_test(state, node, unblind) or {}
    return test.get("auc"), test.get("auc_gap")


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
        return f"{figures.plus_minus(self.auc, self.auc_ci)} · gap {figures.plus_minus(self.gap, self.gap_ci)}"


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


def best_nodes(state: SessionState) -> dict[int, list[str]]:
    """node id -> the criteria it is best by (claimed, validation, minimax), in criteria order."""
    out: dict[int, list[str]] = {}
    for criterion, choice in best_by_criterion(state).items():
        if choice.node_id is not None and choice.node_id in state.nodes:
            out.setdefault(choice.node_id, []).append(criterion)
    return out


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
        summary = (node.validation if split == "validation" else visible_test(state, node, unblind)) or {}
        measured = figures.has_intervals(summary)
        rows.append(Row(name=f"node {node_id} · best {'/'.join(CRITERION_SHORT[c] for c in crits)}", auc=auc,
                        gap=gap, source=source, kind="node", node_id=node_id, criteria=crits,
                        chosen=chosen in crits, hidden=hidden, note=note, explain=explain,
                        auc_ci=figures.interval(summary, "auc"), gap_ci=figures.interval(summary, "auc_gap"),
                        interval=INTERVAL_MEASURED if measured else (figures.NO_INTERVAL if auc is not None else "")))
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
    if split != "test":
        return [PUBLISHED_NOTE]
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


# -- JSON -------------------------------------------------------------------------------------
def node_json(state: SessionState, node: NodeState, *, unblind: bool = False, best: int | None = None,
              pruned: Set[int] | None = None) -> dict[str, Any]:
    summary = node_summary(state, node, unblind=unblind, best=best, pruned=pruned)
    show_test = test_visible(state, node, unblind) and node.test is not None
    return {
        "node_id": node.node_id,
        "parent_id": node.parent_id,
        "step": node.step,
        "stage": node.stage,
        "status": node.status,
        "origin": node.origin,
        "pruned": summary.pruned,
        "best": summary.best,
        "summary": summary.line(),
        "plan": node.plan,
        "exec_time": node.exec_time,
        "exc_type": node.exc_type,
        "failure": node.failure_reason,
        "claimed_metric": node.claimed_metric,
        "validation": figures.public(node.validation),
        "validation_verdict": node.eval_verdicts.get("validation"),
        "test": figures.public(node.test) if show_test else None,
        "test_verdict": node.eval_verdicts.get("test"),
        "test_blinded": test_withheld(state, node, unblind) or not test_visible(state, node, unblind),
        "simulated_failure": simulated_failure(node),
        "audit": {
            "audited": not node.audit_note,
            "note": node.audit_note,
            "flags": dict(node.audit_flags),
            "claim": node.claim,
            "badges": [b.code for b in badges(node)],
            "evidence": [asdict(b) for b in badges(node)],
        },
        "guidance_ids": list(node.guidance_ids),
        "tokens_in": node.tokens_in,
        "tokens_out": node.tokens_out,
        "cost": round(node.cost, 10),
        "children": list(node.children),
    }


def session_json(state: SessionState, *, unblind: bool = False,
                 comparisons: Mapping[str, Comparison] | None = None) -> dict[str, Any]:
    criterion = session_criterion(state)
    choices = best_by_criterion(state)
    star, pruned = choices[criterion].node_id, state.pruned_ids()
    out = {
        "session_id": state.session_id,
        "status": state.status,
        "level": state.level,
        "instruction": state.instruction,
        "coder": state.coder,
        "simulated": state.simulated,
        **trust_fields(state),
        "data": data_kind(state),
        "participant_id": state.config.get("participant_id"),
        "study_id": state.config.get("study_id"),
        "repeat_index": state.config.get("repeat_index"),
        "steps": state.agent_steps,
        "budget": state.budget,
        "best_criterion": criterion,
        "best_node": star,
        "final_choice": {c: b.node_id for c, b in choices.items()},
        "best": {c: {**asdict(b), "uncertainty": b.uncertainty} for c, b in choices.items()},
        "visibility": visibility(state, unblind),
        "tokens_in": state.tokens_in,
        "tokens_out": state.tokens_out,
        "cost": round(state.cost, 10),
        "started_ts": state.started_ts,
        "last_ts": state.last_ts,
        "finished_ts": state.finished_ts,
        "finish_reason": state.finish_reason,
        "guidance": [
            {"guidance_id": g.guidance_id, "text": g.text, "scope": g.scope, "node_id": g.node_id,
             "by": g.by, "used_by": list(g.used_by)}
            for g in sorted(state.guidance.values(), key=lambda g: g.guidance_id)
        ],
        "errors": list(state.errors),
        "badge_legend": dict(BADGE_HELP),
        "nodes": [node_json(state, n, unblind=unblind, best=star, pruned=pruned) for n, _ in tree_order(state)],
    }
    if comparisons is not None:
        out["comparison"] = {split: c.to_json() for split, c in comparisons.items()}
    return out
