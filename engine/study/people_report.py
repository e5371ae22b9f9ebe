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
the answers (text). Figure 2 split by expertise (`expertise_points`): one point per group × level.

Steering counts are read from each session's events: an action counts for the participant when
its event names their participant_id (every command a participant issues carries it).
"""
from __future__ import annotations

import csv
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.session import figures
from engine.session import events as ev
from engine.session import participants as log
from engine.session.sealed import unsealed_events
from engine.session.state import apply, new_state
from engine.session.store import SessionNotFound, SessionStore
from engine.session.timing import active_seconds
from engine.study import grid
from engine.study.aggregate import AUC_GAP, CI95_HI, CI95_LO, MEAN, OVERALL_AUC, STD, describe
from engine.study.figure import Point
from engine.study.people import participant_cells, people_of
from engine.study.report import choice_metrics
from engine.study.spec import StudySpec

NO_PROFILE = "(no profile)"
NO_INTERVAL = "no interval"
STEERING = ("pauses", "guidance", "guidance_chars", "prunes", "expands", "refused")
STEERING_KINDS = {ev.PAUSED: "pauses", ev.GUIDANCE: "guidance", ev.PRUNED: "prunes", ev.EXPAND_REQUESTED: "expands"}
SESSION_COLUMNS = [
    "study", "cell", "session_id", "participant", "role", "years_dermatology", "years_ml", "level",
    "instruction_level", "agent", "repeat", "position", "status", "finish_reason", "node_id", "test_auc",
    "test_auc_ci_lo", "test_auc_ci_hi", "test_auc_gap", "test_auc_gap_ci_lo", "test_auc_gap_ci_hi", "excluded",
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
    test = (node.test or {}) if node is not None and not why else {}
    out: dict[str, Any] = {
        "finish_reason": state.finish_reason, "node_id": node_id, "excluded": why,
        "test_auc": metrics.get(OVERALL_AUC), "test_auc_gap": metrics.get(AUC_GAP),
        "steps": state.agent_steps, "nodes": len(state.nodes),
        "active_seconds": round(active_seconds(events), 3),
        "seconds_to_first_measured": _to_first_measured(events),
    }
    for name, key in (("test_auc", "auc"), ("test_auc_gap", "auc_gap")):
        lo, hi = _interval(figures.interval(test, key))
        out[f"{name}_ci_lo"], out[f"{name}_ci_hi"] = lo, hi
    out.update(steering_counts(events, participant))
    return out


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


def by_expertise(spec: StudySpec, rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One entry per expertise group × level with at least one session (see the module docstring)."""
    out = []
    questions = people_of(spec).questions
    for group in groups(spec, rows):
        for level in [lv.label for lv in spec.levels]:
            members = [r for r in rows if r["role"] == group and r["level"] == level]
            if not members:
                continue
            done = [r for r in members if not r.get("excluded")]
            entry: dict[str, Any] = {"group": group, "level": level, "sessions": len(members), "n": len(done),
                                     "participants": sorted({r["participant"] for r in members})}
            for column in ("test_auc", "test_auc_gap"):
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
            out.append(entry)
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

