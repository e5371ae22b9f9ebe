"""The console's styles for the presentation model: colours and Rich text around what
engine.session.views words (node lines, badges, guidance entries, the running clock, trust
markers). What a figure means and how it is worded is decided there; here it is only drawn."""
from __future__ import annotations

import re
from collections.abc import Mapping

from rich.text import Text

from engine.session import views
from engine.session.state import GuidanceState, NodeState, SessionState

SPINNER = "◐◓◑◒"
_STATUS_STYLE = {"queued": "dim", "running": "bold yellow", "ok": "green", "buggy": "red", "timeout": "red",
                 "interrupted": "magenta"}
STATUS_GLYPH = {status: (views.STATUS_ICONS[status], style) for status, style in _STATUS_STYLE.items()}
BADGE_STYLE = {"!": "bold red", "≠": "bold yellow", "G": "magenta", "?": "bold red"}
FIGURE_STYLE = {"measured": "", "pending": "yellow", "problem": "red", "imported": "dim", "unmeasured": "yellow"}
RUNNING_STYLE = {"head": "bold yellow", "clock": "bold", "note": "dim", "": ""}


def node_label(state: SessionState, node: NodeState, *, best: bool = False, frame: int = 0,
               width: int | None = None, now: float | None = None) -> Text:
    """One line of the search tree: views.NodeSummary.compact(), styled (glyph, id, stage, val
    AUC / gap or what went wrong, ★ best, badges, ⇢ next, ✂ pruned).

    `width`: the cells the line may take. What gives way first: the badges lose their brackets,
    then badges go from the end (… says more are in the node panel's Audit tab), then the words
    after ★ ⇢ ✂, and only then the end of a failure reason; the AUC and the gap are never cut.
    `now`: the clock for the running node's elapsed time against the step limit."""
    summary = views.node_summary(state, node, best=node.node_id if best else None)
    glyph, style = STATUS_GLYPH.get(node.status, ("?", ""))
    if node.status == "running":
        glyph = SPINNER[frame % len(SPINNER)]
    head = Text()
    head.append(glyph + " ", style=style)
    head.append(f"{node.node_id} ", style="bold")
    head.append(summary.stage_text(with_parent=False) + " ")
    figure_style = "bold green" if best and summary.kind == "measured" else FIGURE_STYLE.get(summary.kind, "")
    figures = views.tree_figures(state, node, summary, now)
    label = _fit(head, figures, figure_style, summary, list(summary.badges), width)
    if summary.pruned:
        label.stylize("dim")
    return label


def _fit(head: Text, figures: list[str], figure_style: str, summary: views.NodeSummary, codes: list[str],
         width: int | None) -> Text:
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
    assert width is not None  # with no width the first form was returned
    if summary.kind == "measured":  # the AUC and the gap stay: closer together rather than cut
        figures = [figures[-1].replace(" / ", "/")]
    for shorter in figures:
        text = _line(head, shorter, figure_style, summary, codes, False, False, 0)
        if text.cell_len <= width:
            return text
    if summary.kind == "problem" and text.cell_len > width:  # a long reason: cut its end, never the head
        text.truncate(max(width, head.cell_len + 1), overflow="ellipsis")
    return text


def _line(head: Text, figures: str, figure_style: str, summary: views.NodeSummary, codes: list[str],
          brackets: bool, words: bool, shown: int) -> Text:
    text = head.copy()
    text.append(figures, style=figure_style)
    if summary.best:  # before the badges, so a narrow tree does not clip it
        text.append(_mark("best", words), style="bold yellow")
    if codes:
        text.append(" ")
        for i, code in enumerate(codes[:shown]):
            if not brackets and i:
                text.append("·", style="dim")
            text.append(f"[{code}]" if brackets else code, style=BADGE_STYLE.get(code, "cyan"))
        if shown < len(codes):
            text.append("…", style="dim")
    if summary.next:
        text.append(_mark("next", words), style="bold magenta")
    if summary.pruned:
        text.append(_mark("pruned", words), style="dim")
    return text


def _mark(mark: str, words: bool) -> str:
    in_words, sign = views.LINE_MARKS[mark]
    return " " + (in_words if words else sign)


def running_line(state: SessionState, node: NodeState, now: float) -> Text:
    """The node panel's lines for a running node (views.running_words), styled; a long output line
    ends in … there (the Output tab has it whole)."""
    text = Text()
    for words, role in views.running_words(state, node, now):
        text.append(words, style=RUNNING_STYLE[role])
    text.no_wrap, text.overflow = True, "ellipsis"
    return text


def guidance_label(g: GuidanceState, width: int | None = None) -> Text:
    """A guidance entry in the tree. At `width`, where it took effect shortens first
    (views.guidance_where), then its quoted text (to 8 characters at least)."""
    tails = views.guidance_where(g)
    text_len = len(" ".join(str(g.text).split()))
    tail = tails[0]
    if width is not None and 4 + min(text_len, 20) + sum(map(len, tail)) > width:
        tail = tails[1]  # the words stay longer than the way of saying where it applies
    room = 30 if width is None else max(8, min(30, width - 4 - sum(len(t) for t in tail)))
    text = Text()
    text.append("✎ ", style="bold magenta")
    text.append(f"“{views.short(g.text, room)}”", style="italic magenta")
    text.append(tail[0], style="magenta")
    text.append(tail[1], style="dim")
    return text


# -- trust markers -------------------------------------------------------------------------------
WARNING = "#FEA62B"  # the default theme's $warning; warning_style() follows the current theme


def warning_style(theme: Mapping[str, str] | None = None) -> str:
    """Black on the theme's warning colour: the UNSANDBOXED badge everywhere."""
    colour = (theme or {}).get("warning") or WARNING
    return f"bold black on {colour}"


def unsandboxed_badge(theme: Mapping[str, str] | None = None) -> Text:
    return Text(f" {views.UNSANDBOXED} ", style=warning_style(theme))


# -- a study spec's texts ------------------------------------------------------------------------
_LIST_ITEM = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s")


def reflow(text: str) -> str:
    """A study spec's text (instructions, consent) as the page wraps it: the single line breaks of
    the TOML file's own wrapping become spaces, a blank line stays a paragraph break, and a list's
    lines ("- ", "* ", "1. ") keep theirs. Without this the page wraps the file's lines again
    ("as / malignant / or benign")."""
    paragraphs = re.split(r"\n\s*\n", text.replace("\r\n", "\n").strip())
    return "\n\n".join(_joined(p.split("\n")) for p in paragraphs if p.strip())


def _joined(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        line = line.strip()
        if out and not _LIST_ITEM.match(line):
            out[-1] = f"{out[-1]} {line}"
        else:
            out.append(line)
    return "\n".join(out)
