"""Text for the console: node labels, badges, numbers, times. Pure functions, no widgets."""
from __future__ import annotations

import json
import time
from typing import Any
from collections.abc import Mapping

from rich.text import Text

from engine.session.state import NodeState, SessionState
from engine.session import figures as figures_module
from engine.session import selection, views
from engine.session.views import (  # noqa: F401 - IMPORTED_UNMEASURED, STATUS_WORD: re-exported for the screens
    AUDIT_BADGES, BADGE_HELP, IMPORTED_UNMEASURED, STATUS_WORD, audit_badges, node_summary,
)

SPINNER = "◐◓◑◒"
_STATUS_STYLE = {"queued": "dim", "running": "bold yellow", "ok": "green", "buggy": "red", "timeout": "red",
                 "interrupted": "magenta"}
STATUS_GLYPH = {status: (views.STATUS_ICONS[status], style) for status, style in _STATUS_STYLE.items()}
# Audit badges: flag -> (badge, meaning)
# One spelling and legend for every surface: engine.session.views decides, the console draws.
BADGES = {flag: (code, BADGE_HELP[code]) for flag, code in AUDIT_BADGES.items()}
BADGE_LEGEND: dict[str, str] = dict(BADGE_HELP)
CRITERION_LABEL = selection.CRITERION_LABEL


def num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "–"
    text = f"{value:.{digits}f}"
    return text[1:] if text.startswith("0.") else text


def coder_label(coder: dict) -> str:
    if not coder:
        return "coder ?"
    if coder.get("simulated"):
        return "offline coder (simulated agent)"
    label = coder.get("label") or coder.get("name") or "coder"
    model = coder.get("model")
    return f"{label} · {model}" if model and model not in label else label


def clock(seconds: float | None) -> str:
    if seconds is None or seconds < 0:
        return "--:--"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def date(ts: float | None) -> str:
    if not ts:
        return "–"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def badge_codes(node: NodeState) -> list[str]:
    """The node's badges, in BADGE_LEGEND's order and spelling."""
    return audit_badges(node)


BADGE_STYLE = {"!": "bold red", "≠": "bold yellow", "G": "magenta", "?": "bold red"}


def badges(node: NodeState) -> Text:
    text = Text()
    for code in badge_codes(node):
        text.append(f"[{code}]", style=BADGE_STYLE.get(code, "cyan"))
    return text


FIGURE_STYLE = {"measured": "", "pending": "yellow", "problem": "red", "imported": "dim", "unmeasured": "yellow"}


def node_label(state: SessionState, node: NodeState, *, best: bool = False, frame: int = 0,
               width: int | None = None, now: float | None = None) -> Text:
    """One line of the search tree: views.NodeSummary.compact(), styled (glyph, id, stage, val
    AUC / gap or what went wrong, ★ best, badges, ⇢ next, ✂ pruned).

    `width`: the cells the line may take. What gives way first: the badges lose their brackets,
    then badges go from the end (… says more are in the node panel's Audit tab), then the words
    after ★ ⇢ ✂, and only then the end of a failure reason; the AUC and the gap are never cut.
    `now`: the clock for the running node's elapsed time against the step limit."""
    summary = node_summary(state, node, best=node.node_id if best else None)
    glyph, style = STATUS_GLYPH.get(node.status, ("?", ""))
    if node.status == "running":
        glyph = SPINNER[frame % len(SPINNER)]
    head = Text()
    head.append(glyph + " ", style=style)
    head.append(f"{node.node_id} ", style="bold")
    head.append(summary.stage_text(with_parent=False) + " ")
    figure_style = "bold green" if best and summary.kind == "measured" else FIGURE_STYLE.get(summary.kind, "")
    figures = [summary.figures]
    if summary.kind == "measured" and node.validation and figures_module.has_intervals(node.validation):
        # narrower: the intervals go first (the node panel's Groups tab has them), then the badges
        auc, gap = node.validation.get("auc"), node.validation.get("auc_gap")
        figures += [f"{num(auc)} · gap {num(gap)}", f"{num(auc)} / {num(gap)}"]
    if node.status == "running" and now is not None:
        ran = running_clock(state, node, now)
        figures = [f"running {ran}", f"running {ran.split('/')[0]}", ran.split("/")[0]]
    codes = badge_codes(node)
    label = _fit(head, figures, figure_style, summary, codes, width)
    if summary.pruned:
        label.stylize("dim")
    return label


def _fit(head: Text, figures: list[str], figure_style: str, summary, codes: list[str], width: int | None) -> Text:
    """The first of ever shorter forms of a tree line that fits `width` (see node_label);
    `figures`: what the line says about the node, then shorter ways to say it. The badges lose
    their brackets first, then the figures their intervals, then badges go from the end."""
    n = len(codes)
    forms = [(0, True, True, n), (0, False, True, n)]
    if len(figures) > 1:
        forms += [(1, False, True, n)]
    last = 1 if len(figures) > 1 else 0
    forms += [(last, False, True, k) for k in range(n - 1, -1, -1)] + [(last, False, False, 0)]
    for i, brackets, words, shown in forms:
        text = _line(head, figures[i], figure_style, summary, codes, brackets, words, shown)
        if width is None or text.cell_len <= width:
            return text
    if summary.kind == "measured":  # the AUC and the gap stay: closer together rather than cut
        figures = [figures[-1].replace(" / ", "/")]
    for shorter in figures:
        text = _line(head, shorter, figure_style, summary, codes, False, False, 0)
        if text.cell_len <= width:
            return text
    if summary.kind == "problem" and text.cell_len > width:  # a long reason: cut its end, never the head
        text.truncate(max(width, head.cell_len + 1), overflow="ellipsis")
    return text


def _line(head: Text, figures: str, figure_style: str, summary, codes: list[str], brackets: bool, words: bool,
          shown: int) -> Text:
    text = head.copy()
    text.append(figures, style=figure_style)
    if summary.best:  # before the badges, so a narrow tree does not clip it
        text.append(" ★ best" if words else " ★", style="bold yellow")
    if codes:
        text.append(" ")
        for i, code in enumerate(codes[:shown]):
            if not brackets and i:
                text.append("·", style="dim")
            text.append(f"[{code}]" if brackets else code, style=BADGE_STYLE.get(code, "cyan"))
        if shown < len(codes):
            text.append("…", style="dim")
    if summary.next:
        text.append(" ⇢ next" if words else " ⇢", style="bold magenta")
    if summary.pruned:
        text.append(" ✂ pruned" if words else " ✂", style="dim")
    return text


def running_clock(state: SessionState, node: NodeState, now: float) -> str:
    """"01:32/10:00": how long the running node has run, against the session's step limit."""
    started = node.exec_started_ts or node.created_ts
    limit = state.config.get("step_timeout")
    ran = clock(max(0.0, now - started)) if started else "--:--"
    return f"{ran}/{clock(float(limit))}" if limit else ran


def latest_output_line(node: NodeState) -> str:
    """The last line the node's run printed (the live output), or ""."""
    for line in reversed(node.live_tail.splitlines() or node.live_head.splitlines()):
        if line.strip():
            return line.strip()
    return ""


def running_line(state: SessionState, node: NodeState, now: float) -> Text:
    """The node panel's lines for a running node: its time against the step limit, then the last
    line it printed (a long line ends in … there; the Output tab has it whole)."""
    started = node.exec_started_ts or node.created_ts
    limit = state.config.get("step_timeout")
    text = Text()
    text.append("⏱ running ", style="bold yellow")
    text.append(clock(max(0.0, now - started)) if started else "--:--", style="bold")
    if limit:
        text.append(f" of the {clock(float(limit))} step limit")
    last = latest_output_line(node)
    text.append("\nlatest output: " if last else "\nno output yet", style="dim")
    if last:
        text.append(last)
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def components_words(node: NodeState) -> list[str]:
    """A node's recorded pipeline choice in words, for the Plan tab ([] when its plan already says
    it). The offline coder's choices read as its plans do (engine.agent.offline.grammar.describe); other
    coders' are listed as "name: value" with no internal spelling (no None, True or {…})."""
    from engine.agent.offline import grammar

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
        lines.append(f"{num(node.val_auc)} / {num(node.val_gap)}: validation AUC / skin-tone AUC gap, measured "
                     "here on the held-out validation split (test figures: scoreboard, Groups tab).")
    elif node.origin == "import" and node.status == "ok" and not node.eval_verdicts:
        lines.append("Imported from an AIDE run: it ran elsewhere and was not measured here; its only figure "
                     "is the one that run reported.")
    if node.claimed_metric is not None:
        lines.append(f"The agent claimed {num(node.claimed_metric, 4)} (its own report, not a measurement).")
    if node.failure_reason:
        lines.append(f"Problem: {node.failure_reason}")
    for badge in views.badges(node):
        lines.append(f"[{badge.code}] {badge.meaning}" + (f": {badge.evidence}" if badge.evidence else ""))
    if state.is_pruned(node.node_id):
        lines.append("✂ pruned: the search will not expand it or its subtree, and it is never chosen best.")
    return "\n".join(lines)


def guidance_label(g, state: SessionState, width: int | None = None) -> Text:
    """A guidance entry in the tree. At `width`, where it took effect shortens first
    ("→ node 4, 7" to "→ 4,7", "· pending" to "⏳"), then its quoted text (to 8 characters at least)."""
    where = "global" if g.scope == "global" else f"node {g.node_id}"
    shown = g.used_by[:4]
    more = "…" if len(g.used_by) > 4 else ""
    tails = [(f" · {where}", f" → node {', '.join(map(str, shown))}{more}" if shown else " · pending"),
             (f" · {where}", f" →{','.join(map(str, shown))}{more}" if shown else " ⏳")]
    text_len = len(" ".join(str(g.text).split()))
    tail = tails[0]
    if width is not None and 4 + min(text_len, 20) + sum(map(len, tail)) > width:
        tail = tails[1]  # the words stay longer than the way of saying where it applies
    room = 30 if width is None else max(8, min(30, width - 4 - sum(len(t) for t in tail)))
    text = Text()
    text.append("✎ ", style="bold magenta")
    text.append(f"“{_short(g.text, room)}”", style="italic magenta")
    text.append(tail[0], style="magenta")
    text.append(tail[1], style="dim")
    return text


def _short(text: str, width: int = 32) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def elapsed(state: SessionState, *, read_only: bool, now: float | None = None) -> float | None:
    """Elapsed session time. Read-only views use event timestamps only (deterministic)."""
    if state.started_ts is None:
        return None
    if state.finished_ts is not None:
        return state.finished_ts - state.started_ts
    if read_only or now is None:
        return (state.last_ts or state.started_ts) - state.started_ts
    return now - state.started_ts


# -- trust markers -------------------------------------------------------------------------------
UNSANDBOXED = "UNSANDBOXED"
UNSANDBOXED_MEANING = "agent code ran on this machine without the sandbox (--sandbox none)"
RUNNER_STOPPED = "RUNNER STOPPED"
WARNING = "#FEA62B"  # the default theme's $warning; warning_style() follows the current theme


def warning_style(theme: Mapping[str, str] | None = None) -> str:
    """Black on the theme's warning colour: the UNSANDBOXED badge everywhere."""
    colour = (theme or {}).get("warning") or WARNING
    return f"bold black on {colour}"


def unsandboxed_badge(theme: Mapping[str, str] | None = None) -> Text:
    return Text(f" {UNSANDBOXED} ", style=warning_style(theme))


def row_unsandboxed(row: Mapping[str, Any]) -> bool:
    """SessionState.unsandboxed for a row of the sessions table (its config JSON, coder name)."""
    try:
        config = json.loads(row.get("config") or "{}")
    except (TypeError, ValueError):
        config = {}
    state = SessionState(config=config if isinstance(config, dict) else {},
                         coder={"name": row.get("coder") or ""})
    return state.unsandboxed
