"""The session report: what a dermatologist hands to a colleague when a session ends.

One model (`summarise`) rendered three ways: text lines (`befair show`, the console's summary),
Markdown and HTML (`befair report SESSION`, with the plot as an image). It says:
- the final choice by each criterion, with its validation and test figures and their intervals;
- whether that choice can be told apart from the runners-up (the paired comparison recorded);
- what each guidance changed: the first node written under it, its audit badges before and after;
- the labels that apply: unsandboxed, simulated agent, generated data, blinded test figures.
"""
from __future__ import annotations

import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.measures.operating_point import GroupAtPoint, OperatingPoint
from engine.measures.summary import EvaluationSummary
from engine.session import figure_text, selection, views
from engine.session.state import NodeState, SessionState
from engine.study.tradeoff_plot import Point, draw_figure, reference_points

if TYPE_CHECKING:
    from engine.session.store import SessionStore


@dataclass(frozen=True)
class ChoiceSummary:
    """One chosen node and every criterion that chose it."""

    criteria: tuple[str, ...]
    current: bool              # ★ follows one of these criteria
    node_id: int | None
    reasons: tuple[str, ...]
    validation: str            # ".794 (.741–.845) · gap .116 (.031–.251)"
    test: str                  # the same on test, "hidden until …" or "not measured"
    certainty: tuple[str, ...] # can it be told apart from the others (per criterion that says so)?
    too_few: tuple[str, ...]   # groups too few to judge on validation
    points: tuple[tuple[str, OperatingPoint], ...] = ()   # (split, its operating point), the visible splits

    @property
    def words(self) -> str:
        if len(self.criteria) == 1:
            return selection.CRITERION_WORDS[self.criteria[0]]
        return " · ".join(selection.CRITERION_LABEL[c] for c in self.criteria)


@dataclass(frozen=True)
class GuidanceSummary:
    guidance_id: int
    text: str
    scope: str
    by: str
    first_node: int | None      # the first node written under it
    before_node: int | None     # what that node was compared with (its parent, or the node before it)
    badges_before: tuple[str, ...]
    badges_after: tuple[str, ...]
    figures_before: str
    figures_after: str

    @property
    def change(self) -> str:
        if self.first_node is None:
            return "no node was written under it yet"
        added = [b for b in self.badges_after if b not in self.badges_before]
        dropped = [b for b in self.badges_before if b not in self.badges_after]
        parts = ([f"added {' '.join(f'[{b}]' for b in added)}"] if added else []) + (
            [f"dropped {' '.join(f'[{b}]' for b in dropped)}"] if dropped else [])
        return "; ".join(parts) if parts else "no change in what the audit finds in the code"


@dataclass(frozen=True)
class SessionReport:
    session_id: str
    heading: str
    labels: tuple[str, ...]
    choices: tuple[ChoiceSummary, ...]
    guidance: tuple[GuidanceSummary, ...]
    notes: tuple[str, ...] = field(default=())
    settings: str = ""          # what the agent was told and what its search followed (views.settings_line)

    def lines(self) -> list[str]:
        out = [f"Session summary · {self.heading}"] + ([f"  Agent settings: {self.settings}"] if self.settings else [])
        out += [f"  ⚠ {label}" for label in self.labels]
        out.append("  Final choice by each criterion (validation · test, 95 % intervals):")
        for c in self.choices:
            mark = "★" if c.current else " "
            node = f"node {c.node_id}" if c.node_id is not None else "no node"
            out.append(f"  {mark} {node}, best by {c.words}")
            if c.node_id is not None:
                out.append(f"      validation {c.validation}")
                out.append(f"      test       {c.test}")
                out += [f"      {sentence}" for sentence in c.certainty]
                if c.too_few:
                    out.append(f"      {figure_text.TOO_FEW} on validation: "
                               + ", ".join(figure_text.GROUP_WORDS.get(g, g) for g in c.too_few))
                for split, point in c.points:
                    out += [f"      {split}: {point_heading(point)}"]
                    out += [f"        {who}: {figures_}" for who, figures_ in _point_rows(point)]
        if self.guidance:
            out.append("  What each guidance changed:")
            for g in self.guidance:
                out.append(f"    #{g.guidance_id} {g.text!r} ({g.scope}, by {g.by}): {_guidance_where(g)}")
                out.append(f"       {g.change}")
        out += [f"  {note}" for note in self.notes]
        return out

    def markdown(self, figure: str | None = None) -> str:
        out = [f"# befair session {self.session_id}", "", f"{self.heading}", ""]
        out += [f"Agent settings: {self.settings}", ""] if self.settings else []
        out += [f"> ⚠ {label}" for label in self.labels] + ([""] if self.labels else [])
        out += ["## Final choice by each criterion", "",
                "| node | best by | validation AUC · gap (95 % interval) | test AUC · gap (95 % interval) "
                "| can it be told apart? |", "|---|---|---|---|---|"]
        for c in self.choices:
            star = " ★" if c.current else ""
            node = str(c.node_id) if c.node_id is not None else "–"
            out.append(f"| {node}{star} | {c.words} | {c.validation} | {c.test} | {'; '.join(c.certainty) or '–'} |")
        out.append("")
        out += self._points_markdown()
        if figure:
            out += [f"![Test AUC against the skin-tone AUC gap]({figure})", ""]
        if self.guidance:
            out += ["## What each guidance changed", ""]
            for g in self.guidance:
                out.append(f"- **#{g.guidance_id}** “{g.text}” ({g.scope}, by {g.by}): {_guidance_where(g)}; "
                           f"{g.change}.")
            out.append("")
        out += [f"_{note}_" for note in self.notes]
        return "\n".join(out) + "\n"

    def _points_markdown(self) -> list[str]:
        shown = [(c, split, point) for c in self.choices if c.node_id is not None for split, point in c.points]
        if not shown:
            return []
        out = ["## Per skin-tone group at the operating point", "", POINT_HELP, "",
               "| node | split · cut-off | skin tone | sensitivity (95 %) · caught | specificity (95 %) · cleared "
               "| melanomas missed per 100 (95 %) · missed | calibration (95 %) |", "|---|---|---|---|---|---|---|"]
        for c, split, point in shown:
            for g in (*point.groups, point.overall):
                out.append(f"| {c.node_id} | {split} · {_cut_off(point)} | {group_name(g)} | {sensitivity_text(g)} | "
                           f"{specificity_text(g)} | {missed_per_100_text(g)} | {calibration_text(g)} |")
        return [*out, ""]

    def _points_html(self) -> str:
        e = html.escape
        rows = "".join(
            f"<tr><td>{c.node_id}</td><td>{e(split)} · {e(_cut_off(point))}</td><td>{e(group_name(g))}</td>"
            f"<td>{e(sensitivity_text(g))}</td><td>{e(specificity_text(g))}</td><td>{e(missed_per_100_text(g))}</td>"
            f"<td>{e(calibration_text(g))}</td></tr>"
            for c in self.choices if c.node_id is not None for split, point in c.points
            for g in (*point.groups, point.overall))
        if not rows:
            return ""
        return ("<h2>Per skin-tone group at the operating point</h2>"
                f"<p>{e(POINT_HELP)}</p><table><tr><th>node</th><th>split · cut-off</th><th>skin tone</th>"
                "<th>sensitivity (95 %) · caught</th><th>specificity (95 %) · cleared</th>"
                "<th>melanomas missed per 100 (95 %) · missed</th><th>calibration (95 %)</th></tr>"
                f"{rows}</table>")

    def html(self, figure_svg: str | None = None) -> str:
        e = html.escape
        rows = "".join(
            f"<tr><td>{c.node_id if c.node_id is not None else '–'}{' ★' if c.current else ''}</td><td>{e(c.words)}"
            f"</td><td>{e(c.validation)}</td><td>{e(c.test)}</td><td>{e('; '.join(c.certainty) or '–')}</td></tr>"
            for c in self.choices)
        labels = "".join(f"<p class='warn'>⚠ {e(label)}</p>" for label in self.labels)
        guidance = "".join(f"<li><b>#{g.guidance_id}</b> “{e(g.text)}” ({e(g.scope)}, by {e(g.by)}): "
                           f"{e(_guidance_where(g))}; {e(g.change)}.</li>" for g in self.guidance)
        notes = "".join(f"<p class='note'>{e(note)}</p>" for note in self.notes)
        return (f"<!doctype html><html><head><meta charset='utf-8'><title>befair session {e(self.session_id)}"
                f"</title><style>{_CSS}</style></head><body><h1>befair session {e(self.session_id)}</h1>"
                f"<p>{e(self.heading)}</p><p>Agent settings: {e(self.settings)}</p>{labels}"
                "<h2>Final choice by each criterion</h2><table><tr>"
                "<th>node</th><th>best by</th><th>validation AUC · gap (95 % interval)</th>"
                "<th>test AUC · gap (95 % interval)</th><th>can it be told apart?</th></tr>"
                f"{rows}</table>{self._points_html()}{figure_svg or ''}"
                + (f"<h2>What each guidance changed</h2><ul>{guidance}</ul>" if guidance else "")
                + f"{notes}</body></html>\n")


_CSS = ("body{font-family:sans-serif;max-width:60em;margin:2em auto;color:#222}table{border-collapse:collapse}"
        "td,th{border:1px solid #bbb;padding:.3em .6em;text-align:left}.warn{color:#9c4221}.note{color:#555}"
        "svg{max-width:100%;height:auto}")


def _guidance_where(g: GuidanceSummary) -> str:
    if g.first_node is None:
        return "no node was written under it yet"
    before = f"node {g.before_node} ({g.figures_before})" if g.before_node is not None else "no earlier node"
    return f"first used by node {g.first_node} ({g.figures_after}), compared with {before}"


def split_figures(summary: EvaluationSummary | None) -> str:
    """`.794 (.741–.845) · gap .116 (.031–.251)`, or the point figures with a note."""
    if summary is None or summary.auc is None:
        return "not measured"
    auc = figure_text.with_interval(summary.auc, figure_text.interval(summary, "auc"))
    gap = figure_text.with_interval(summary.auc_gap, figure_text.interval(summary, "auc_gap"))
    text = f"{auc} · gap {gap}"
    return text if figure_text.has_intervals(summary) else f"{text} ({figure_text.NO_INTERVAL})"


# --------------------------------------------------------------------------- the operating point


def point_heading(point: OperatingPoint) -> str:
    """`cut-off .412: the cut-off that catches 90 % …`, or why there is none."""
    if point.threshold is None:
        return f"no cut-off: {point.reason or 'none was chosen'}"
    return f"cut-off {figure_text.fmt(point.threshold)}, {point.words}"


Parts = tuple[str, str]   # (the figure with its interval, the counts it rests on)


def _share_parts(count: int | None, of: int, share: tuple[float | None, list[float] | None], what: str,
                 none: str) -> Parts:
    value, ci = share
    if value is None or count is None:
        return none, ""
    return figure_text.with_interval(value, ci, 2), f"{count}/{of} {what}"


def sensitivity_parts(g: GroupAtPoint) -> Parts:
    """(`.88 (.76–.94)`, `44/50 caught`): malignant lesions called malignant."""
    return _share_parts(g.caught, g.malignant, g.sensitivity, "caught",
                        "no malignant images" if not g.malignant else "–")


def specificity_parts(g: GroupAtPoint) -> Parts:
    """(`.61 (.54–.68)`, `96/158 cleared`): benign lesions called benign."""
    return _share_parts(g.cleared, g.benign, g.specificity, "cleared", "no benign images" if not g.benign else "–")


def missed_per_100_parts(g: GroupAtPoint) -> Parts:
    """(`12 (6–24)`, `6/50 missed`): melanomas missed per 100 malignant lesions."""
    value, ci = g.missed_per_100
    if value is None or g.missed is None:
        return ("no malignant images" if not g.malignant else "–"), ""
    return f"{value:.0f}" + (f" ({ci[0]:.0f}–{ci[1]:.0f})" if ci else ""), f"{g.missed}/{g.malignant} missed"


def calibration_parts(g: GroupAtPoint) -> tuple[str, str, str]:
    """(`.18 (.15–.21)` Brier score, `.55 (.38–.72)` calibration slope, `n 208`)."""
    if not g.n:
        return "no images", "–", ""
    brier = figure_text.with_interval(g.brier[0], g.brier[1:], 2) if g.brier else "–"
    return brier, _slope_text(g.slope), f"n {g.n}"


def _slope_text(slope: list[float] | None) -> str:
    """`.55 (.38–.72)`; `-.05 (-.22 to .12)` where a bound is negative (a dash would read as a minus)."""
    if slope is None:
        return "none (one class, or separated)"
    if slope[1] < 0:
        return f"{figure_text.fmt(slope[0], 2)} ({figure_text.fmt(slope[1], 2)} to {figure_text.fmt(slope[2], 2)})"
    return figure_text.with_interval(slope[0], slope[1:], 2)


def _joined(parts: tuple[str, ...]) -> str:
    return " · ".join(p for p in parts if p)


def sensitivity_text(g: GroupAtPoint) -> str:
    return _joined(sensitivity_parts(g))


def specificity_text(g: GroupAtPoint) -> str:
    return _joined(specificity_parts(g))


def missed_per_100_text(g: GroupAtPoint) -> str:
    return _joined(missed_per_100_parts(g))


def calibration_text(g: GroupAtPoint) -> str:
    """`Brier .18 (.15–.21) · slope .55 (.38–.72) · n 208`."""
    brier, slope, n = calibration_parts(g)
    return _joined((f"Brier {brier}", f"slope {slope}", n)) if g.n else brier


POINT_HELP = ("Operating point: one cut-off for all skin tones, chosen on the validation images; a lesion at or "
              "above it is called malignant. Sensitivity: malignant lesions caught; specificity: benign lesions "
              "cleared; intervals: Wilson. On validation all groups together reach the target by construction; "
              "test says what the cut-off does on new images. Calibration: Brier score (0 is perfect; normal "
              "interval) and the calibration slope (1: the probabilities can be taken at their word; below 1: too "
              "extreme; logistic regression on logit(probability), Wald interval).")


def group_name(g: GroupAtPoint) -> str:
    """FST I–II (light) …, or "all groups" for the pool."""
    return "all groups" if g.name == "overall" else figure_text.GROUP_WORDS.get(figure_text.group_key(g.name), g.name)


def _cut_off(point: OperatingPoint) -> str:
    return f"cut-off {figure_text.fmt(point.threshold)}" if point.threshold is not None else "no cut-off"


def _point_rows(point: OperatingPoint) -> list[tuple[str, str]]:
    """(skin tone, its figures at the operating point in one line), each group and then all pooled."""
    return [(group_name(g), f"sensitivity {sensitivity_text(g)}; specificity {specificity_text(g)}; missed per 100 "
                      f"malignant {missed_per_100_text(g)}; {calibration_text(g)}")
            for g in (*point.groups, point.overall)]


def _points(state: SessionState, node: NodeState, unblind: bool) -> tuple[tuple[str, OperatingPoint], ...]:
    """The operating point of each split whose figures a reader may see."""
    found = [("validation", _point(node.validation))]
    if not views.test_withheld(state, node, unblind):
        found.append(("test", _point(views.visible_test(state, node, unblind))))
    return tuple((split, point) for split, point in found if point is not None)


def _point(summary: EvaluationSummary | None) -> OperatingPoint | None:
    return summary.operating_point if summary is not None else None


def _test_text(state: SessionState, node: NodeState, unblind: bool) -> str:
    if views.test_withheld(state, node, unblind):
        return f"hidden ({views.blinded_note(state)})"
    return split_figures(views.visible_test(state, node, unblind))


def _choices(state: SessionState, unblind: bool) -> list[ChoiceSummary]:
    """The final choices, criteria that chose the same node together (in criteria order)."""
    current = views.session_criterion(state)
    by_node: dict[int | None, list[views.BestChoice]] = {}
    for choice in views.best_by_criterion(state).values():
        by_node.setdefault(choice.node_id, []).append(choice)
    out = []
    for node_id, chosen in by_node.items():
        node = state.nodes.get(node_id) if node_id is not None else None
        certainty = [f"{selection.CRITERION_SHORT[c.criterion]}: {c.uncertainty}" if len(chosen) > 1
                     else c.uncertainty for c in chosen if c.uncertainty]
        out.append(ChoiceSummary(
            criteria=tuple(c.criterion for c in chosen), current=any(c.criterion == current for c in chosen),
            node_id=node_id, reasons=tuple(c.reason for c in chosen),
            validation=split_figures(node.validation) if node else "",
            test=_test_text(state, node, unblind) if node else "", certainty=tuple(dict.fromkeys(certainty)),
            too_few=tuple(figure_text.too_few_groups(node.validation)) if node else (),
            points=_points(state, node, unblind) if node else ()))
    return out


def _before(state: SessionState, first: NodeState) -> NodeState | None:
    if first.parent_id is not None:
        return state.nodes.get(first.parent_id)
    earlier = [n for n in state.nodes.values() if n.node_id < first.node_id and n.finished]
    return max(earlier, key=lambda n: n.node_id) if earlier else None


def _audit_codes(node: NodeState | None) -> tuple[str, ...]:
    return tuple(b for b in views.audit_badges(node) if b != "G") if node is not None else ()


def _node_figures(node: NodeState | None) -> str:
    if node is None or node.validation is None:
        return "no validation figure" if node is not None else ""
    return f"validation {figure_text.compact(node.validation)}"


def _guidance(state: SessionState) -> list[GuidanceSummary]:
    out = []
    for g in sorted(state.guidance.values(), key=lambda g: g.guidance_id):
        first = state.nodes.get(min(g.used_by)) if g.used_by else None
        before = _before(state, first) if first is not None else None
        out.append(GuidanceSummary(
            guidance_id=g.guidance_id, text=g.text, scope=g.scope, by=g.by,
            first_node=first.node_id if first else None, before_node=before.node_id if before else None,
            badges_before=_audit_codes(before), badges_after=_audit_codes(first),
            figures_before=_node_figures(before), figures_after=_node_figures(first)))
    return out


def labels(state: SessionState, unblind: bool = False) -> list[str]:
    """The warnings a reader of any figure of this session must see."""
    out = []
    if state.unsandboxed:
        out.append(f"{views.UNSANDBOXED}: {views.UNSANDBOXED_MEANING}")
    if state.simulated:
        out.append("simulated agent: the offline coder writes real pipelines from a fixed menu of parts; "
                   "no language model was asked")
    if views.synth(state):
        out.append(views.SYNTH_NOTE)
    if views.test_hidden(state, unblind):
        out.append(views.blinded_note(state))
    return out


def summarise(state: SessionState, *, unblind: bool = False) -> SessionReport:
    status = state.status.upper()
    coder = str(state.coder.get("label") or state.coder.get("name") or "")
    heading = (f"{state.level} · {coder} · {state.agent_steps}/{state.budget} steps · {status}"
               f" · ★ follows {selection.CRITERION_WORDS[views.session_criterion(state)]}")
    notes = [figure_text.INTERVAL_HELP]
    return SessionReport(session_id=state.session_id, heading=heading, labels=tuple(labels(state, unblind)),
                         choices=tuple(_choices(state, unblind)), guidance=tuple(_guidance(state)),
                         notes=tuple(notes), settings=views.settings_line(state))


def figure_points(state: SessionState, *, unblind: bool = False) -> list[Any]:
    """The session's measured, visible test points (with their intervals) for the report's plot."""
    out = []
    for node_id, gap, auc in views.plot_points(state, "test", unblind):
        test = views.visible_test(state, state.nodes[node_id], unblind)
        out.append(Point(label=f"node {node_id}", auc=auc, gap=gap, group="this session", level=f"node {node_id}",
                         auc_ci=_pair(figure_text.interval(test, "auc")),
                         gap_ci=_pair(figure_text.interval(test, "auc_gap"))))
    return out


def _pair(ci: Any) -> tuple[float, float] | None:
    return (float(ci[0]), float(ci[1])) if isinstance(ci, list) and len(ci) == 2 else None


def write_report(store: SessionStore, state: SessionState, report: SessionReport, out: Path, *,
                 unblind: bool = False) -> list[Path]:
    """Write the report (Markdown or HTML, by `out`'s suffix) and its plot (SVG beside a Markdown
    file, inline in HTML); returns the files written."""
    out.parent.mkdir(parents=True, exist_ok=True)
    points = figure_points(state, unblind=unblind)
    references = reference_points(views.published_points(store.reference_rows(), state.level))
    written: list[Path] = []
    figure: Path | None = None
    if points:
        figure = out.with_suffix(".svg")
        draw_figure(figure, points, references, title=f"befair session {state.session_id}: test AUC and skin-tone gap",
                    synthetic=views.synth(state), bars="error bars: 95 % intervals (this session's nodes); "
                    "published rows have none known")
    if out.suffix.lower() == ".md":
        out.write_text(report.markdown(figure.name if figure else None), encoding="utf-8")
        written += [out] + ([figure] if figure else [])
    else:
        svg = figure.read_text(encoding="utf-8") if figure else None
        if figure:
            figure.unlink()
        out.write_text(report.html(svg[svg.find("<svg"):] if svg else None), encoding="utf-8")
        written.append(out)
    return written

