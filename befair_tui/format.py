"""Text for the console: node labels, badges, numbers, times. Pure functions, no widgets."""
from __future__ import annotations

import json
import time
from typing import Any
from collections.abc import Mapping

from rich.text import Text

from engine.session.state import NodeState, SessionState
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


BADGE_STYLE = {"!": "bold red", "≠": "bold yellow", "G": "magenta"}


def badges(node: NodeState) -> Text:
    text = Text()
    for code in badge_codes(node):
        text.append(f"[{code}]", style=BADGE_STYLE.get(code, "cyan"))
    return text


FIGURE_STYLE = {"measured": "", "pending": "yellow", "problem": "red", "imported": "dim", "unmeasured": "yellow"}


def node_label(state: SessionState, node: NodeState, *, best: bool = False, frame: int = 0) -> Text:
    """One line of the search tree: views.NodeSummary.compact(), styled (glyph, id, stage, val
    AUC / gap or what went wrong, ★ best, badges, ⇢ next, ✂ pruned)."""
    summary = node_summary(state, node, best=node.node_id if best else None)
    glyph, style = STATUS_GLYPH.get(node.status, ("?", ""))
    if node.status == "running":
        glyph = SPINNER[frame % len(SPINNER)]
    text = Text()
    text.append(glyph + " ", style=style)
    text.append(f"{node.node_id} ", style="bold")
    text.append(summary.stage_text(with_parent=False) + " ")
    figure_style = "bold green" if best and summary.kind == "measured" else FIGURE_STYLE.get(summary.kind, "")
    text.append(summary.figures, style=figure_style)
    if summary.best:  # before the badges, so a narrow tree does not clip it
        text.append(" ★ best", style="bold yellow")
    b = badges(node)
    if b:
        text.append(" ")
        text.append_text(b)
    if summary.next:
        text.append(" ⇢ next", style="bold magenta")
    if summary.pruned:
        text.append(" ✂ pruned", style="dim")
        text.stylize("dim")
    return text


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


def guidance_label(g, state: SessionState) -> Text:
    text = Text()
    text.append("✎ ", style="bold magenta")
    text.append(f"“{_short(g.text, 30)}”", style="italic magenta")
    where = "global" if g.scope == "global" else f"node {g.node_id}"
    text.append(f" · {where}", style="magenta")
    if g.used_by:
        more = "…" if len(g.used_by) > 4 else ""
        text.append(f" → node {', '.join(str(n) for n in g.used_by[:4])}{more}", style="dim")
    else:
        text.append(" · pending", style="dim")
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
