"""A node in words: its one-line summary (text surfaces and the tree), the tree as text lines, and
what the console says about a node beside its line (tooltip, running clock, pipeline choice)."""
from __future__ import annotations

from collections.abc import Set
from dataclasses import dataclass

from engine import offline_grammar as grammar
from engine.session import figure_text
from engine.session.figure_text import fmt
from engine.session.state import GuidanceState, NodeState, SessionState
from engine.session.views.badges import audit_badges, node_badges
from engine.session.views.best import best_id
from engine.session.views.blinding import ended, test_withheld, visible_test
from engine.session.views.words import clock

STATUS_ICONS = {"queued": "○", "running": "◐", "ok": "●", "buggy": "✗", "timeout": "⧖", "interrupted": "◌"}
STATUS_WORD = {
    "queued": "queued", "running": "running…", "ok": "ok", "buggy": "bug",
    "timeout": "timeout", "interrupted": "interrupted",
}
IMPORTED_UNMEASURED = "imported (not measured here)"
SHORT_REASON = 32  # characters of a failure reason the tree shows
# A line's markers after its figures: in words, and as the bare sign a narrow tree keeps.
LINE_MARKS = {"best": ("★ best", "★"), "next": ("⇢ next", "⇢"), "pruned": ("✂ pruned", "✂")}


def short(text: str, width: int = SHORT_REASON) -> str:
    """The text on one line, at most `width` characters (… where it was cut)."""
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
        parts = [LINE_MARKS["best"][0]] if self.best else []
        if self.badges:
            parts.append("".join(f"[{b}]" for b in self.badges))
        if self.next:
            parts.append(LINE_MARKS["next"][0])
        if self.pruned:
            parts.append(LINE_MARKS["pruned"][0])
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
    if published and node.val_auc is None and node.test is not None and node.test.auc is not None:
        # an imported run's final node: its published predictions, scored by this product
        return "imported", f"test {fmt(node.test.auc)} / {fmt(node.test.auc_gap)} · {published}"
    if node.origin == "import" and node.status == "ok" and not reason and node.val_auc is None \
            and not node.eval_verdicts:
        # ran elsewhere (an AIDE journal): its only figure is the one the run reported
        if node.claimed_metric is not None:
            return "imported", f"{IMPORTED_UNMEASURED} · reported {fmt(node.claimed_metric, 4)}"
        return "imported", IMPORTED_UNMEASURED
    if node.status == "ok" and node.val_auc is not None:
        return "measured", figure_text.compact(node.validation)
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
    if test is not None and test.auc is not None:
        return f"test {figure_text.compact(test)}"
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




# -- what the console says about a node beside its line ---------------------------------------
def tree_figures(state: SessionState, node: NodeState, summary: NodeSummary, now: float | None = None) -> list[str]:
    """What the tree line says about the node (summary.figures), then ever shorter ways to say it:
    a measured node's intervals go first (the node panel's Groups tab has them); a running node
    shows its time against the step limit (`now`: the clock)."""
    forms = [summary.figures]
    if summary.kind == "measured" and node.validation is not None and figure_text.has_intervals(node.validation):
        auc, gap = node.validation.auc, node.validation.auc_gap
        forms += [f"{fmt(auc)} · gap {fmt(gap)}", f"{fmt(auc)} / {fmt(gap)}"]
    if node.status == "running" and now is not None:
        ran = running_clock(state, node, now)
        forms = [f"running {ran}", f"running {ran.split('/')[0]}", ran.split("/")[0]]
    return forms


def _ran(node: NodeState, now: float) -> str:
    started = node.exec_started_ts or node.created_ts
    return clock(max(0.0, now - started)) if started else "--:--"


def running_clock(state: SessionState, node: NodeState, now: float) -> str:
    """"01:32/10:00": how long the running node has run, against the session's step limit."""
    limit = state.config.get("step_timeout")
    ran = _ran(node, now)
    return f"{ran}/{clock(float(limit))}" if limit else ran


def latest_output_line(node: NodeState) -> str:
    """The last line the node's run printed (the live output), or ""."""
    for line in reversed(node.live_tail.splitlines() or node.live_head.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def running_words(state: SessionState, node: NodeState, now: float) -> list[tuple[str, str]]:
    """The node panel's words for a running node, each with its role ("head", "clock", "note" or
    ""): its time against the step limit, then the last line it printed."""
    limit = state.config.get("step_timeout")
    words = [("◐ running ", "head"), (_ran(node, now), "clock")]
    if limit:
        words.append((f" of the {clock(float(limit))} step limit", ""))
    last = latest_output_line(node)
    words.append(("\nlatest output: " if last else "\nno output yet", "note"))
    if last:
        words.append((last, ""))
    return words


def components_words(node: NodeState) -> list[str]:
    """A node's recorded pipeline choice in words, for the Plan tab ([] when its plan already says
    it). The offline coder's choices read as its plans do (engine.offline_grammar.describe); other
    coders' are listed as "name: value" with no internal spelling (no None, True or {…})."""
    c = node.components or {}
    if not c:
        return []
    if c.get("model") in grammar.MODELS and "fairness" in c:
        lines = grammar.describe(grammar.normalise(c))
        return [] if lines[0] in node.plan else lines
    out = []
    for key, value in c.items():
        if value is None or value is False or key == "bug":
            continue
        if value is True:
            value = "yes"
        elif isinstance(value, dict):
            value = ", ".join(f"{k} {v}" for k, v in value.items())
        out.append(f"{str(key).replace('_', ' ')}: {value}")
    return out


def node_tooltip(state: SessionState, node: NodeState) -> str:
    """What a tree line says, in words: where its numbers come from and what its badges mean."""
    parent = f" of node {node.parent_id}" if node.parent_id is not None else ""
    lines = [f"Node {node.node_id}: {node.stage}{parent} · {STATUS_WORD.get(node.status, node.status)}"]
    if node.val_auc is not None:
        lines.append(f"{fmt(node.val_auc)} / {fmt(node.val_gap)}: validation AUC / skin-tone AUC gap, measured "
                     "here on the held-out validation split (test figures: scoreboard, Groups tab).")
    elif node.origin == "import" and node.status == "ok" and not node.eval_verdicts:
        lines.append("Imported from an AIDE run: it ran elsewhere and was not measured here; its only figure "
                     "is the one that run reported.")
    if node.claimed_metric is not None:
        lines.append(f"The agent claimed {fmt(node.claimed_metric, 4)} (its own report, not a measurement).")
    if node.failure_reason:
        lines.append(f"Problem: {node.failure_reason}")
    for badge in node_badges(node):
        lines.append(f"[{badge.code}] {badge.meaning}" + (f": {badge.evidence}" if badge.evidence else ""))
    if state.is_pruned(node.node_id):
        lines.append("✂ pruned: the search will not expand it or its subtree, and it is never chosen best.")
    return "\n".join(lines)


def guidance_where(g: GuidanceState) -> list[tuple[str, str]]:
    """(where a guidance entry applies, where it took effect), then a shorter way to say both:
    "→ node 4, 7" becomes "→4,7" and "· pending" "⏳"."""
    where = "global" if g.scope == "global" else f"node {g.node_id}"
    shown = g.used_by[:4]
    more = "…" if len(g.used_by) > 4 else ""
    return [(f" · {where}", f" → node {', '.join(map(str, shown))}{more}" if shown else " · pending"),
            (f" · {where}", f" →{','.join(map(str, shown))}{more}" if shown else " ⏳")]
