"""Node detail: plan, code (highlighted), output (live while running), per-group metrics,
audit (flags, evidence, claimed vs measured), the diff against the parent and the conversation
with the model (widgets/conversation.py)."""
from __future__ import annotations

import difflib
from typing import Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Log, Static, TabbedContent, TabPane

from engine.measures.operating_point import OperatingPoint
from engine.measures.summary import EvaluationSummary
from engine.session import views
from engine.session import figure_text
from engine.study import session_report as report
from engine.session.conversation import guidance_reference, plan_without_repeats
from engine.session.state import NodeState, SessionState
from engine.session.views import group_tests

from befair_tui.format import running_line
from befair_tui.widgets.conversation import ConversationView
from befair_tui.widgets.text_pane import TextPane

OUTPUT_LINES = 2_000
TABS = ("plan", "code", "output", "groups", "audit", "diff", "conversation")
GUIDANCE_INLINE = 200  # characters: a longer guidance is shown in full only at the first node it shaped


def _syntax(code: str, lexer: str) -> Syntax:
    return Syntax(code or " ", lexer, line_numbers=lexer == "python", word_wrap=False,
                  theme="ansi_dark", background_color="default")


class NodeDetail(Vertical):
    DEFAULT_CSS = """
    NodeDetail { border: round $primary-darken-1; }
    NodeDetail Log { height: 1fr; }
    NodeDetail #node-running { height: 2; padding: 0 1; display: none; }
    NodeDetail.-narrow Tab { padding: 0 0; margin-right: 1; }
    """
    NARROW_BELOW = 56  # columns: the tabs lose their padding and "Conversation" reads "Chat", so all 7 show

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.node_id: int | None = None
        self._output_node: int | None = None
        self._state: SessionState | None = None
        self._stale: set[str] = set()  # tabs not yet drawn for the node shown
        self.border_title = "Node"
        self.border_subtitle = "keys 1–7: tabs"

    def on_resize(self) -> None:
        narrow = self.size.width < self.NARROW_BELOW
        if narrow != self.has_class("-narrow"):
            self.set_class(narrow, "-narrow")
            tab = self.query_one("#node-tabs", TabbedContent).get_tab("tab-conversation")
            tab.label = "Chat" if narrow else "Conversation"

    def show_tab(self, tab: str) -> None:
        self.query_one("#node-tabs", TabbedContent).active = f"tab-{tab}"
        self._render_tab(tab)

    def compose(self) -> ComposeResult:
        # the running node's time against the step limit and its latest output line
        yield Static("", id="node-running")
        with TabbedContent(id="node-tabs"):
            with TabPane("Plan", id="tab-plan"):
                yield TextPane(id="plan")
            with TabPane("Code", id="tab-code"):
                yield TextPane(id="code")
            with TabPane("Output", id="tab-output"):
                yield Log(id="output", max_lines=OUTPUT_LINES, auto_scroll=True)
            with TabPane("Groups", id="tab-groups"):
                yield TextPane(id="groups")
            with TabPane("Audit", id="tab-audit"):
                yield TextPane(id="audit")
            with TabPane("Diff", id="tab-diff"):
                yield TextPane(id="diff")
            with TabPane("Conversation", id="tab-conversation"):
                yield ConversationView(id="conversation")

    def show(self, state: SessionState, node_id: int | None) -> None:
        """Show a node. Only the tab in view is drawn now; the others when they are opened, so a
        live session that moves to each new node redraws one tab, not seven."""
        self._state = state
        self.node_id = node_id
        self._stale = set(TABS)
        node = state.nodes.get(node_id) if node_id is not None else None
        if node is None:
            self.border_title = "Node"
        else:
            parent = f" of {node.parent_id}" if node.parent_id is not None else ""
            status = views.STATUS_WORD.get(node.status, node.status)
            if state.is_pruned(node.node_id):
                status += " · pruned"
            self.border_title = f"Node {node.node_id} · {node.stage}{parent} · {status}"
        self._render_tab(self.active_tab)
        self.sync_running(state, self._running_now)

    _running_now: float | None = None

    def sync_running(self, state: SessionState, now: float | None) -> None:
        """Show (or hide) the line that says how long the shown node has been running, against
        the step limit, and the last line it printed: a long step does not look stuck."""
        self._running_now = now
        node = state.nodes.get(self.node_id) if self.node_id is not None else None
        running = node is not None and node.status == "running" and now is not None
        if not running and not self._running_shown:
            return
        box = self.query_one("#node-running", Static)
        if running:
            assert node is not None and now is not None  # what `running` says
            line = running_line(state, node, now)
            if line.plain != self._running_text:
                self._running_text = line.plain
                box.update(line)
        if box.display != running:
            box.display = running
        self._running_shown = running

    _running_shown = False
    _running_text = ""

    @property
    def active_tab(self) -> str:
        return self.query_one("#node-tabs", TabbedContent).active.removeprefix("tab-")

    def on_tabbed_content_tab_activated(self, event: TabbedContent.TabActivated) -> None:
        self._render_tab(event.pane.id.removeprefix("tab-") if event.pane.id else "")

    def _render_tab(self, tab: str) -> None:
        if tab not in self._stale or self._state is None:
            return
        self._stale.discard(tab)
        state = self._state
        node = state.nodes.get(self.node_id) if self.node_id is not None else None
        if tab == "output":
            self._reset_output(node)
        elif tab == "conversation":
            self.query_one(ConversationView).show(state, node.node_id if node else None)
        elif node is None:
            self.query_one(f"#{tab}", TextPane).update(_no_node(state, self._live(state)) if tab == "plan" else "")
        else:
            self.query_one(f"#{tab}", TextPane).update(self._renderable(tab, state, node))

    def _renderable(self, tab: str, state: SessionState, node: NodeState) -> RenderableType:
        if tab == "plan":
            return self._plan(state, node)
        if tab == "code":
            return _syntax(node.code or "# no code yet", "python")
        if tab == "groups":
            return self._groups(state, node)
        if tab == "audit":
            return self._audit(node)
        return self._diff(state, node)

    # -- output ---------------------------------------------------------------------------
    def _reset_output(self, node: NodeState | None) -> None:
        log = self.query_one("#output", Log)
        log.clear()
        self._output_node = node.node_id if node is not None else None
        if node is None:
            return
        if node.finished:
            text = node.stored_output
            if not text.strip():
                text = node.live_output
        else:
            text = node.live_output
        if text:
            log.write(text)
        if node.failure_reason:
            injected = views.simulated_failure(node)
            log.write_line(f"\n[{node.status}] {node.failure_reason}" + (f" ({injected})" if injected else ""))

    def append_output(self, node_id: int, text: str) -> None:
        if node_id == self._output_node and text and "output" not in self._stale:
            self.query_one("#output", Log).write(text)

    # -- renderables ----------------------------------------------------------------------
    def sync_live(self, state: SessionState) -> None:
        """A streamed reply arrived (llm_stream): the Conversation tab shows it live (when open)."""
        if "conversation" not in self._stale:
            self.query_one(ConversationView).sync_live(state)
        if self.node_id is None and self.active_tab == "plan":
            self.query_one("#plan", TextPane).update(_no_node(state, self._live(state)))

    def _live(self, state: SessionState) -> dict[str, Any] | None:
        """The reply being written (the screen's live source, else what the state holds)."""
        source = self.query_one(ConversationView).live_source
        return source(state) if source is not None else state.live_reply

    def _plan(self, state: SessionState, node: NodeState) -> Group:
        # a long guidance is shown in full once, at the first node it shaped; later plans refer to it
        parts: list[RenderableType] = []
        injected = views.simulated_failure(node)
        if injected:  # a failure the simulated agent made on purpose, said first and as such
            parts += [Text(f"{injected}.", style="bold magenta"), Text("")]
        parts.append(Text(plan_without_repeats(state, node) or "(no plan)"))
        if node.guidance_ids:
            parts.append(Text(""))
            for gid in node.guidance_ids:
                g = state.guidance.get(gid)
                if g is None:
                    continue
                ref = guidance_reference(state, node, gid)
                text = f"“{g.text}”" if ref is None or len(g.text) <= GUIDANCE_INLINE else f"“{g.text[:60]}…” ({ref})"
                parts.append(Text(f"✎ guidance #{gid} in force: {text} ({g.scope})", style="magenta"))
        words = views.components_words(node)
        if words:
            parts.append(Text("\nWhat the pipeline does:", style="dim"))
            parts.extend(Text(f"- {line}", style="dim") for line in words)
        if node.review_summary:
            parts.append(Text(f"\nreview: {node.review_summary}", style="italic"))
        if node.failure_reason:
            parts.append(Text(f"\nfailed: {node.failure_reason}", style="bold red"))
        if node.tokens_in or node.tokens_out:
            parts.append(Text(f"\n{node.tokens_in + node.tokens_out} tokens · ${node.cost:.4f}", style="dim"))
        return Group(*parts)

    def _groups(self, state: SessionState, node: NodeState) -> Group:
        """Each skin-tone group's AUC with its 95 % interval, on validation and (when visible) on
        test, and at the session's operating point its sensitivity, specificity, melanomas missed per
        100 and calibration (a summary recorded before operating points: missed cases at 0.5); a
        group with too few malignant cases says so instead of a bare number."""
        parts: list[RenderableType] = []
        blinded = views.test_withheld(state, node)
        for split, summary in (("validation", node.validation), ("test", None if blinded else node.test)):
            if split == "test" and blinded:
                parts.append(Text(f"\ntest: hidden ({views.blinded_note(state)})", style="dim italic"))
                continue
            parts.append(_split_groups(split, summary, node.eval_verdicts.get(split), node.eval_reasons.get(split)))
            parts += [Text(said, style="dim")] if (said := group_tests.words(summary)) else []
        parts.append(Text(f"\n{figure_text.INTERVAL_HELP} {figure_text.TOO_FEW_HELP}", style="dim"))
        if any(s is not None and s.operating_point is not None for s in (node.validation, node.test)):
            parts.append(Text(report.POINT_HELP, style="dim"))
        parts.append(Text("validation: held-out split of the training data · test: DDI-format test set; "
                          "both measured here", style="dim"))
        return Group(*parts)

    def _audit(self, node: NodeState) -> Group:
        if not node.audit_flags and node.claim is None and not node.audit_note:
            return Group(Text("Not audited yet.", style="dim"))
        parts: list[RenderableType] = []
        table = Table(box=None, pad_edge=False)
        table.add_column("")
        table.add_column("check")
        table.add_column("evidence", overflow="fold")
        if node.audit_note:  # unknown, not "no": every check says so
            parts += [Text(f"⚠ {node.audit_note[0].upper() + node.audit_note[1:]}.", style="bold red"),
                      Text("What this code does about skin tone is unknown: none of these checks could be "
                           "made.", style="dim")]
            for badge in views.AUDIT_BADGES.values():
                table.add_row(Text(f"[{badge}]", style="dim"), Text(f"? {views.BADGE_HELP[badge]}", style="dim"),
                              "not audited")
        else:
            for flag, badge in views.AUDIT_BADGES.items():
                on, meaning = bool(node.audit_flags.get(flag)), views.BADGE_HELP[badge]
                table.add_row(Text(f"[{badge}]", style="cyan" if on else "dim"),
                              Text(("✓ " if on else "· ") + meaning, style="" if on else "dim"),
                              node.audit_evidence.get(flag, "") if on else "")
        parts.append(table)
        claim = node.claim or {}
        if claim:
            line = Text("\nclaimed vs measured: ")
            claimed, measured = figure_text.fmt(claim.get("claimed")), figure_text.fmt(claim.get("measured"))
            line.append(f"claimed {claimed}, measured {measured}")
            if claim.get("difference") is not None:
                line.append(f" (difference {claim['difference']:+.3f})")
            parts.append(line)
            if claim.get("unsupported"):
                parts.append(Text(f"⚠ unsupported claim: {claim.get('reason') or 'no measurement backs it'}",
                                  style="bold red"))
        return Group(*parts)

    def _diff(self, state: SessionState, node: NodeState) -> Text | Syntax:
        if node.parent_id is None or node.parent_id not in state.nodes:
            return Text("A draft: no parent to compare with.", style="dim")
        parent = state.nodes[node.parent_id]
        diff = "".join(difflib.unified_diff(
            parent.code.splitlines(keepends=True), node.code.splitlines(keepends=True),
            fromfile=f"node {parent.node_id}", tofile=f"node {node.node_id}", n=2))
        return _syntax(diff or "(no change)", "diff")


def _no_node(state: SessionState, live: dict[str, Any] | None) -> str:
    if state.nodes:
        return "Select a node in the search tree."
    if live is None:   # no call in progress ({} is a call whose model still reads its prompt)
        return ""
    return ("No node yet: the agent's model is at work on its first draft (the top bar says whether it "
            "still reads its prompt, and how many tokens it has written, how fast). Press 7 to watch the "
            "reply come in.")


def _split_groups(split: str, summary: EvaluationSummary | None, verdict: str | None, reason: str | None) -> Group:
    if summary is None:
        why = f"{verdict}: {reason}" if verdict and verdict != "ok" else "not measured"
        return Group(Text(f"\n{split}: {why}", style="red" if verdict and verdict != "ok" else "dim"))
    n, malignant = summary.n, sum(g.malignant or 0 for g in figure_text.groups(summary))
    head = Text(f"\n{split}", style="bold")
    head.append(f" · {n} images" + (f", {malignant} malignant" if malignant else ""), style="dim")
    if not figure_text.has_intervals(summary):
        head.append(f" · {figure_text.NO_INTERVAL}", style="yellow")
    point = summary.operating_point
    table = Table(expand=True, box=None, pad_edge=False)
    columns = ("skin tone · malignant", "AUC (95 %)") + (() if point else ("missed malignant (at 0.5)",))
    for column in columns:
        table.add_column(column, justify="left", ratio=1)
    for g in figure_text.groups(summary):
        auc = Text(g.auc_text(), style="yellow" if g.too_few else "")
        who = Text(g.words)
        if g.malignant is not None:
            who.append(f"\n{g.malignant} of {g.n} images", style="dim")
        table.add_row(who, auc, *(() if point else (g.missed_text() if g.malignant is not None else "–",)))
    for label, key, value in (("overall", "auc", summary.auc), ("worst group", "worst_auc", summary.worst_auc),
                              ("gap (best − worst)", "auc_gap", summary.auc_gap)):
        table.add_row(label, figure_text.with_interval(value, figure_text.interval(summary, key)),
                      *(() if point else ("",)))
    return Group(head, table, *(_point_tables(point) if point else ()))


def _point_tables(point: OperatingPoint) -> list[RenderableType]:
    """At the operating point: each group's sensitivity, specificity and melanomas missed per 100,
    then its calibration; each figure with its 95 % interval and, below it, the counts it rests on."""
    head = Text(f"\nat the operating point · {report.point_heading(point)} · 95 % intervals",
                style="yellow" if point.threshold is None else "")
    rows = [*point.groups, point.overall]
    names = [report.group_name(g) for g in rows]
    parts: list[RenderableType] = [head]
    if point.threshold is not None:
        parts.append(_table(("skin tone", "sensitivity", "specificity", "missed per 100 malignant"), [
            (name, report.sensitivity_parts(g), report.specificity_parts(g), report.missed_per_100_parts(g))
            for name, g in zip(names, rows, strict=True)]))
    calibration = [(name, *report.calibration_parts(g)) for name, g in zip(names, rows, strict=True)]
    parts.append(Text(""))
    parts.append(_table(("skin tone", "Brier score", "calibration slope"),
                        [(name, (brier, n), (slope, "")) for name, brier, slope, n in calibration]))
    return parts


def _table(columns: tuple[str, ...], rows: list[tuple[str, *tuple[tuple[str, str], ...]]]) -> Table:
    """A table whose cells are a figure and, dimmed below it, what it rests on."""
    table = Table(expand=True, box=None, pad_edge=False)
    table.add_column(columns[0], justify="left", no_wrap=True)
    for column in columns[1:]:
        table.add_column(column, justify="left", ratio=1)
    for name, *cells in rows:
        shown = []
        for figure, counts in cells:
            cell = Text(figure)
            if counts:
                cell.append(f"\n{counts}", style="dim")
            shown.append(cell)
        table.add_row(name, *shown)
    return table
