"""The report of a study with people: by expertise group × instruction level.

One row per session (`session_rows`, also the long CSV): who steered it (participant, role,
years of experience in dermatology and in machine learning), where it came in their order, the
outcome (the final choice's test AUC and skin-tone AUC gap, each with the interval its
evaluation recorded when there is one), how they steered (pauses, guidance count and length,
prunes, expands, refused commands, and a researcher's interventions apart), the active time to the
first measured node and in all, and their answers to the spec's questions.

Per expertise group (the participant's role) × level (`by_expertise`): n, the mean outcome with
its spread over sessions (mean ± std, mean ∓ 1.96·std/√n as engine.study.aggregate), the mean
steering counts, the median time to the first measured node, and each question's mean (scale) or
the answers (text), and the mixed model's estimate for the group × level of each measure
(engine.study.within). Figure 2 split by expertise (`expertise_points`): one point per group × level.

The long CSV for R or pandas (`write_long_csv`): one row per participant × session × measure, with
a Markdown codebook beside it that names every column and every measure (`codebook`).

Steering counts are read from each session's events: an action counts for the participant when
its event names their participant_id (every command a participant issues carries it).
"""
from __future__ import annotations

import csv
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.measures.summary import EvaluationSummary
from engine.session import events as ev
from engine.session import figure_text
from engine.session import participants as log
from engine.session.active_time import active_seconds
from engine.session.sealed import unsealed_events
from engine.session.state import apply, new_state
from engine.session.store import SessionNotFound, SessionStore
from engine.study import grid
from engine.study.aggregate import AUC_GAP, CI95_HI, CI95_LO, MEAN, OVERALL_AUC, STD, describe
from engine.study.choice import choice_metrics
from engine.study.people import participant_cells, people_of
from engine.study.spec import StudySpec
from engine.study.tradeoff_plot import Point
from engine.study.within import analyse

NO_PROFILE = "(no profile)"
DARK_GROUP = "group_2"   # FST V–VI (DDI's 56) in an evaluated summary
NO_INTERVAL = "no interval"
STEERING = ("pauses", "guidance", "guidance_chars", "prunes", "expands", "refused")
STEERING_KINDS = {ev.PAUSED: "pauses", ev.GUIDANCE: "guidance", ev.PRUNED: "prunes", ev.EXPAND_REQUESTED: "expands"}
SESSION_COLUMNS = [
    "study", "cell", "session_id", "participant", "role", "years_dermatology", "years_ml", "level",
    "instruction_level", "agent", "repeat", "position", "status", "finish_reason", "node_id", "test_auc",
    "test_auc_ci_lo", "test_auc_ci_hi", "test_auc_gap", "test_auc_gap_ci_lo", "test_auc_gap_ci_hi",
    "test_sensitivity_dark", "test_sensitivity_dark_ci_lo", "test_sensitivity_dark_ci_hi", "excluded",
    "pauses", "guidance", "guidance_chars", "guidance_mean_chars", "prunes", "expands", "refused",
    "researcher_actions", "steps", "nodes", "seconds_to_first_measured", "active_seconds", "answered_at",
]


def session_rows(store: SessionStore, spec: StudySpec, *, criterion: str | None = None,
                 unblind: bool = False) -> list[dict[str, Any]]:
    """One row per cell of every participant (SESSION_COLUMNS, then q_<question id>)."""
    people = people_of(spec)
    criterion = criterion or spec.best
    profiles = {p["participant_id"]: p for p in log.participants(store, spec.name)}
    answers = {e.cell: e for e in log.events(store, spec.name, kinds=(log.ANSWERS,))}
    states = {r["cell"]: r for r in grid.grid_rows(store, spec.name)}
    rows = []
    for participant in spec.participants:
        assert participant is not None  # a study with people lists its participants
        profile = profiles.get(participant) or {}
        for position, cell in enumerate(participant_cells(spec, participant), start=1):
            row: dict[str, Any] = {
                "study": spec.name, "cell": cell.index, "session_id": cell.session_id, "participant": participant,
                "role": profile.get("role") or NO_PROFILE, "years_dermatology": profile.get("years_dermatology"),
                "years_ml": profile.get("years_ml"), "level": cell.level.label,
                "instruction_level": cell.level.level, "agent": cell.coder.label, "repeat": cell.repeat,
                "position": position, "status": (states.get(cell.index) or {}).get("state", grid.QUEUED)}
            row.update(_session_part(store, cell.session_id, participant, criterion, unblind))
            given = answers.get(cell.index)
            row["answered_at"] = given.ts if given else None
            for q in people.questions:
                row[f"q_{q.id}"] = (given.payload.get("answers") or {}).get(q.id) if given else None
            rows.append(row)
    return rows


def _session_part(store: SessionStore, session_id: str, participant: str, criterion: str,
                  unblind: bool) -> dict[str, Any]:
    try:
        store.session(session_id)
    except SessionNotFound:
        return {"excluded": "no session yet", **dict.fromkeys(STEERING, 0)}
    events = store.events(session_id)
    state = new_state(session_id)
    for event in unsealed_events(store, session_id, events) if unblind else events:
        apply(state, event)
    node_id, metrics, why = choice_metrics(state, criterion)
    node = state.nodes.get(node_id) if node_id is not None else None
    test = node.test if node is not None and not why else None
    out: dict[str, Any] = {
        "finish_reason": state.finish_reason, "node_id": node_id, "excluded": why,
        "test_auc": metrics.get(OVERALL_AUC), "test_auc_gap": metrics.get(AUC_GAP),
        "steps": state.agent_steps, "nodes": len(state.nodes),
        "active_seconds": round(active_seconds(events), 3),
        "seconds_to_first_measured": _to_first_measured(events),
    }
    for name, key in (("test_auc", "auc"), ("test_auc_gap", "auc_gap")):
        lo, hi = _interval(figure_text.interval(test, key))
        out[f"{name}_ci_lo"], out[f"{name}_ci_hi"] = lo, hi
    out.update(_dark_sensitivity(test))
    out.update(steering_counts(events, participant))
    return out


def _dark_sensitivity(test: EvaluationSummary | None) -> dict[str, Any]:
    """Sensitivity on dark skin (FST V–VI) at the session's operating point on test, with its Wilson
    interval (engine.measures.operating_point); empty for a node measured before operating points."""
    point = test.operating_point if test is not None else None
    dark = point.group(DARK_GROUP) if point is not None else None
    value, ci = dark.sensitivity if dark is not None else (None, None)
    lo, hi = _interval(ci)
    return {"test_sensitivity_dark": value, "test_sensitivity_dark_ci_lo": lo, "test_sensitivity_dark_ci_hi": hi}


def _interval(value: Any) -> tuple[float | None, float | None]:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(isinstance(x, (int, float)) for x in value):
        return float(value[0]), float(value[1])
    return None, None


def _to_first_measured(events: Sequence[ev.Event]) -> float | None:
    """Active seconds from the session's start to its first node measured on validation."""
    for i, event in enumerate(events):
        if event.kind == ev.EVALUATED and event.payload.get("split") == "validation" and event.payload.get("ok"):
            return round(active_seconds(events[: i + 1]), 3)
    return None


def steering_counts(events: Sequence[ev.Event], participant: str) -> dict[str, Any]:
    """How the participant steered (events naming their participant_id), and how often anyone else did."""
    counts: dict[str, Any] = dict.fromkeys(STEERING, 0)
    others = 0
    for event in events:
        p = event.payload
        human = event.kind in STEERING_KINDS or event.kind in (ev.BUDGET_SET, ev.STOP_REQUESTED)
        if p.get("participant_id") == participant:
            if event.kind in STEERING_KINDS:
                counts[STEERING_KINDS[event.kind]] += 1
                if event.kind == ev.GUIDANCE:
                    counts["guidance_chars"] += len(str(p.get("text") or ""))
            elif event.kind == ev.ERROR and p.get("where") == "command":
                counts["refused"] += 1
        elif human and p.get("command_id") is not None and p.get("by") != "engine":
            others += 1
    given = counts["guidance"]
    counts["guidance_mean_chars"] = round(counts["guidance_chars"] / given, 1) if given else None
    counts["researcher_actions"] = others
    return counts


# --------------------------------------------------------------------------- by expertise × level


def groups(spec: StudySpec, rows: Sequence[dict[str, Any]]) -> list[str]:
    """Expertise groups in the spec's order of roles, then any other, then no profile."""
    present = list(dict.fromkeys(r["role"] for r in rows))
    ordered = [r for r in people_of(spec).roles if r in present]
    return ordered + [r for r in present if r not in ordered and r != NO_PROFILE] + \
        ([NO_PROFILE] if NO_PROFILE in present else [])


def scale_questions(spec: StudySpec) -> list[str]:
    return [q.id for q in people_of(spec).questions if q.kind != "text"]


def within_analysis(spec: StudySpec, rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The mixed model and the paired differences of every measure (engine.study.within)."""
    return analyse(rows, level_order=[lv.label for lv in spec.levels], group_order=groups(spec, rows),
                   scale_questions=scale_questions(spec))


def by_expertise(spec: StudySpec, rows: Sequence[dict[str, Any]],
                 within: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """One entry per expertise group × level with at least one session (see the module docstring)."""
    out = []
    questions = people_of(spec).questions
    within = within if within is not None else within_analysis(spec, rows)
    for group in groups(spec, rows):
        for level in [lv.label for lv in spec.levels]:
            members = [r for r in rows if r["role"] == group and r["level"] == level]
            if not members:
                continue
            done = [r for r in members if not r.get("excluded")]
            entry: dict[str, Any] = {"group": group, "level": level, "sessions": len(members), "n": len(done),
                                     "participants": sorted({r["participant"] for r in members})}
            for column in ("test_auc", "test_auc_gap", "test_sensitivity_dark"):
                entry[column] = describe([float(r[column]) for r in done if r.get(column) is not None])
                entry[f"{column}_session_intervals"] = sum(1 for r in done if r.get(f"{column}_ci_lo") is not None)
            for column in (*STEERING, "researcher_actions"):
                values = [float(r.get(column) or 0) for r in members if r.get("session_id") and r.get("status")
                          != grid.QUEUED]
                entry[column] = statistics.fmean(values) if values else None
            times = [float(r["seconds_to_first_measured"]) for r in members if r.get("seconds_to_first_measured")
                     is not None]
            entry["seconds_to_first_measured_median"] = statistics.median(times) if times else None
            entry["answers"] = {q.id: _answers(q.kind, [r.get(f"q_{q.id}") for r in members]) for q in questions}
            entry["model"] = _model_cells(within, group, level)
            out.append(entry)
    return out


def _model_cells(within: dict[str, Any], group: str, level: str) -> dict[str, Any]:
    """measure -> the model's estimate and 95 % interval for this group × level (None: no model)."""
    out: dict[str, Any] = {}
    for m in within["measures"]:
        found = [c for c in m["model"]["cells"] if c["group"] == group and c["level"] == level]
        out[m["measure"]] = found[0] if found and m["model"]["fitted"] else None
    return out


def _answers(kind: str, values: list[Any]) -> dict[str, Any]:
    given = [v for v in values if v is not None and v != ""]
    if kind == "text":
        return {"n": len(given), "texts": [str(v) for v in given]}
    numbers = [float(v) for v in given]
    return {"n": len(numbers), "mean": statistics.fmean(numbers) if numbers else None,
            "median": statistics.median(numbers) if numbers else None}


def expertise_points(entries: Sequence[dict[str, Any]]) -> list[Point]:
    """Figure 2 split by expertise: a point per group × level (colour: group; marker: level)."""
    points = []
    for e in entries:
        auc, gap = e["test_auc"], e["test_auc_gap"]
        if auc[MEAN] is None or gap[MEAN] is None:
            continue
        points.append(Point(label=e["level"], auc=float(auc[MEAN]), gap=float(gap[MEAN]), auc_std=auc[STD],
                            gap_std=gap[STD], group=e["group"], level=e["level"]))
    return points


def fmt_outcome(stats: dict[str, Any]) -> str:
    """mean ± std [95 % interval], or what is missing."""
    mean, std = stats.get(MEAN), stats.get(STD)
    if mean is None:
        return "-"
    if std is None:
        return f"{mean:.3f} (one session: {NO_INTERVAL})"
    return f"{mean:.3f} ± {std:.3f} [{stats[CI95_LO]:.3f}, {stats[CI95_HI]:.3f}]"


def write_sessions_csv(rows: Sequence[dict[str, Any]], path: str | Path) -> Path:
    """The long CSV: one row per session, SESSION_COLUMNS then the answers (q_<id>)."""
    target = Path(path)
    header = list(SESSION_COLUMNS) + sorted({k for r in rows for k in r if k.startswith("q_")})
    with target.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow(["" if row.get(c) is None else repr(row[c]) if isinstance(row[c], float) else str(row[c])
                             for c in header])
    return target



# --------------------------------------------------------------------------- the long CSV and its codebook

LONG_COLUMNS: list[tuple[str, str, str]] = [
    ("study", "text", "the study's name"),
    ("participant", "text", "the participant's id (the random effect of the mixed model)"),
    ("role", "text", f"the participant's expertise group (their role; `{NO_PROFILE}` when they gave none)"),
    ("years_dermatology", "number", "years of experience in dermatology (empty: not asked or not given)"),
    ("years_ml", "number", "years of experience in machine learning (empty: not asked or not given)"),
    ("session_id", "text", "the session (one cell of the participant's order)"),
    ("cell", "integer", "the cell's index in the study's grid"),
    ("level", "text", "the arm's label (the instruction level, or a level × setting arm)"),
    ("instruction_level", "text", "the instruction level given to the agent"),
    ("agent", "text", "the agent's label"),
    ("repeat", "integer", "the repeat index (0-based)"),
    ("position", "integer", "the session's place in the participant's order (1-based, Latin square)"),
    ("status", "text", "the cell's state: queued, running, finished, failed, interrupted"),
    ("included", "integer", "1 when the report's statistics use this row's value, else 0"),
    ("excluded", "text", "why the session's outcomes are left out of the statistics (empty: kept)"),
    ("measure", "text", "what `value` is: one of the measures below"),
    ("value", "number", "the measure's value (empty: not measured)"),
    ("ci_lo", "number", "the lower bound of the value's own 95 % interval, when it has one (outcomes only)"),
    ("ci_hi", "number", "the upper bound of that interval"),
]
OUTCOME_MEASURES = {
    "test_auc": ("AUC, 0–1", "the final choice's overall AUC on the test set (its evaluation's 95 % bootstrap "
                 "interval in ci_lo, ci_hi)"),
    "test_auc_gap": ("AUC, 0–1", "the final choice's skin-tone AUC gap on the test set: the largest minus the "
                     "smallest AUC of the groups FST I–II, III–IV, V–VI (MEDFAIR)"),
    "test_sensitivity_dark": ("share, 0–1", "the final choice's sensitivity on dark skin (FST V–VI) on the test set "
                              "at the session's operating point (the cut-off chosen on validation; its Wilson "
                              "interval in ci_lo, ci_hi); empty for a session measured before operating points"),
}
STEERING_MEASURES = {
    "pauses": ("count", "pauses the participant made"),
    "guidance": ("count", "guidance messages the participant sent"),
    "guidance_chars": ("characters", "characters of guidance in all"),
    "prunes": ("count", "nodes the participant pruned"),
    "expands": ("count", "nodes the participant asked to expand next"),
    "refused": ("count", "the participant's commands the engine refused"),
    "researcher_actions": ("count", "steering by anyone else (a researcher), counted apart"),
    "steps": ("count", "steps the agent took"),
    "nodes": ("count", "nodes in the session's search tree"),
    "seconds_to_first_measured": ("seconds", "active time from the start to the first node measured on validation"),
    "active_seconds": ("seconds", "the session's active time"),
}


def long_measures(questions: Sequence[Any]) -> dict[str, tuple[str, str]]:
    """measure -> (unit, meaning): the outcomes, the steering, and each scale question's answer."""
    out = {**OUTCOME_MEASURES, **STEERING_MEASURES}
    for q in questions:
        if q.kind != "text":
            out[f"q_{q.id}"] = (f"scale {q.low}–{q.high}", f"the answer to: {q.text}")
    return out


def long_rows(rows: Sequence[dict[str, Any]], questions: Sequence[Any]) -> list[dict[str, Any]]:
    """One row per participant × session × measure (LONG_COLUMNS)."""
    out = []
    keys = ("study", "participant", "role", "years_dermatology", "years_ml", "session_id", "cell", "level",
            "instruction_level", "agent", "repeat", "position", "status", "excluded")
    for r in rows:
        started = r.get("excluded") != "no session yet"
        for measure in long_measures(questions):
            value = r.get(measure) if started or measure.startswith("q_") else None
            if measure in OUTCOME_MEASURES:
                used = value is not None and not r.get("excluded")
                lo, hi = r.get(f"{measure}_ci_lo"), r.get(f"{measure}_ci_hi")
            else:
                used, lo, hi = value is not None, None, None
            out.append({**{k: r.get(k) for k in keys}, "included": int(used), "measure": measure, "value": value,
                        "ci_lo": lo, "ci_hi": hi})
    return out


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return repr(value) if isinstance(value, float) else str(value)


def write_long_csv(rows: Sequence[dict[str, Any]], path: str | Path, questions: Sequence[Any],
                   *, study: str = "") -> tuple[Path, Path]:
    """The long CSV and its codebook (`<stem>.codebook.md` beside it); both paths."""
    target = Path(path)
    header = [c for c, _, _ in LONG_COLUMNS]
    with target.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(header)
        for row in long_rows(rows, questions):
            writer.writerow([_cell(row.get(c)) for c in header])
    book = target.with_name(target.stem + ".codebook.md")
    book.write_text(codebook(questions, csv_name=target.name, study=study), encoding="utf-8")
    return target, book


def codebook(questions: Sequence[Any], *, csv_name: str = "the long CSV", study: str = "") -> str:
    """The codebook (Markdown): every column, then every measure with its unit."""
    lines = [f"# Codebook: {csv_name}" + (f" (study {study})" if study else ""), "",
             "One row per participant × session × measure. Comma-separated, UTF-8, a header row; an empty "
             "field is a missing value (NA in R's `read.csv`, NaN in pandas' `read_csv`). Numbers use a "
             "dot for decimals.", "",
             "```r", f'd <- read.csv("{csv_name}")', "kept <- subset(d, included == 1 & measure == \"test_auc_gap\")",
             "```", "", "## Columns", "", "| column | type | meaning |", "|---|---|---|"]
    lines += [f"| `{c}` | {t} | {m} |" for c, t, m in LONG_COLUMNS]
    lines += ["", "## Measures (the `measure` column)", "", "| measure | unit | meaning |", "|---|---|---|"]
    lines += [f"| `{k}` | {unit} | {meaning} |" for k, (unit, meaning) in long_measures(questions).items()]
    lines += ["", "Answers to text questions are not here (they are not numbers): `--sessions-csv` has them.", ""]
    return "\n".join(lines)
