"""A study's preregistration: what it was meant to test, recorded before its first session.

`preregister` appends one `preregistered` event to the study's own event log (`study_events`, the
log a study with people keeps its consent and answers in): the spec's SHA-256 (its canonical JSON,
as the `studies` table records it, and the spec file's bytes when given), the hypotheses verbatim,
the primary outcome, the final-choice criterion and the analysis planned for the study's design.
It is refused once a session of the study has started, unless it is recorded as late (the report
then says so). There is one per study: a preregistration is not amended, deviations are listed.

`deviations` compares a report with it: another criterion, sessions left out, the spec changed, an
analysis not planned (the mixed model of the primary outcome not fitted, so the paired analysis
stands in), a late registration. `markdown` exports it, with the deviations when given.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import time
from dataclasses import asdict, dataclass
from typing import Any

from engine.errors import UsageError
from engine.session.store import SessionStore
from engine.study import grid
from engine.study.comparisons import METHOD
from engine.study.spec import StudySpec
from engine.study.within import MODEL_METHOD, PAIRED_METHOD

KIND = "preregistered"
PRIMARY = {"gap": "test_auc_gap", "auc": "test_auc"}
PRIMARY_NAMES = {"test_auc_gap": "the final choice's skin-tone AUC gap on the test set",
                 "test_auc": "the final choice's overall AUC on the test set"}
WITHIN, BETWEEN = "within-participant", "between-runs"


@dataclass(frozen=True)
class Preregistration:
    study: str
    registered_at: float
    spec_sha256: str               # of the spec's canonical JSON (studies.spec_sha256)
    spec_file_sha256: str | None   # of the spec file's bytes, when registered from a file
    hypotheses: str
    primary_outcome: str           # a measure: test_auc_gap | test_auc
    criterion: str                 # the final choice's criterion the report is to use
    design: str                    # within-participant | between-runs
    analysis: str                  # the analysis planned, in words
    late: bool                     # registered after the first session started
    started_before: int            # sessions started when it was registered
    seq: int = 0                   # its place in the study's event log

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def design_of(spec: StudySpec) -> str:
    return WITHIN if spec.people is not None else BETWEEN


def planned_analysis(spec: StudySpec) -> str:

    if spec.people is not None:
        return f"{MODEL_METHOD}; {PAIRED_METHOD} (the paired analysis alone when the model cannot be fitted)"
    return METHOD


def started_sessions(store: SessionStore, name: str) -> list[dict[str, Any]]:
    """The study's cells whose session has started (in any state but queued)."""
    return [r for r in grid.grid_rows(store, name) if r.get("session_status") is not None or r["state"] != grid.QUEUED]


def find(store: SessionStore, name: str) -> Preregistration | None:
    found = store.study_events(name, kinds=(KIND,))
    if not found:
        return None
    event = found[0]
    fields: dict[str, Any] = {k: event.payload.get(k) for k in Preregistration.__dataclass_fields__
                              if k not in ("seq", "study")}
    return Preregistration(study=name, seq=event.seq, **fields)


def preregister(store: SessionStore, spec: StudySpec, *, hypotheses: str, primary_outcome: str = "gap",
                analysis: str | None = None, late: bool = False, spec_file: bytes | None = None,
                source: str | None = None) -> Preregistration:
    """Record the preregistration (the study and its grid too, when new); UsageError when it is
    too late (unless `late`), already recorded, or says nothing."""
    if not hypotheses.strip():
        raise UsageError("the hypotheses file is empty: write what the study is to test, before it runs")
    if primary_outcome not in PRIMARY:
        raise UsageError(f"--primary-outcome must be one of {', '.join(PRIMARY)}, not {primary_outcome!r}")
    grid.ensure_study(store, spec, source=source)
    before = find(store, spec.name)
    if before is not None:
        raise UsageError(f"study {spec.name} was preregistered on {iso(before.registered_at)}; a preregistration "
                         "is not amended (the report lists every deviation from it)")
    started = started_sessions(store, spec.name)
    if started and not late:
        first = started[0]
        raise UsageError(f"study {spec.name}: {len(started)} session(s) already started (first: cell {first['cell']}, "
                         f"{first['session_id'] or first['level']}); a preregistration records the plan before the "
                         "data. --late records it anyway, marked late, and the report says so")
    prereg = Preregistration(
        study=spec.name, registered_at=time.time(), spec_sha256=spec.digest,
        spec_file_sha256=hashlib.sha256(spec_file).hexdigest() if spec_file is not None else None,
        hypotheses=hypotheses.strip(), primary_outcome=PRIMARY[primary_outcome], criterion=spec.best,
        design=design_of(spec), analysis=(analysis or "").strip() or planned_analysis(spec), late=bool(started),
        started_before=len(started))
    payload = {k: v for k, v in prereg.to_json().items() if k not in ("seq", "study")}
    with store.transaction():
        event = store.insert_study_event(spec.name, KIND, ts=prereg.registered_at, participant_id=None,
                                         session_id=None, cell=None, payload=payload)
    return Preregistration(**{**prereg.to_json(), "seq": event.seq})


def iso(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------- the report against it


def deviations(prereg: Preregistration, *, criterion: str, excluded: list[dict[str, Any]], spec_sha256: str | None,
               within: dict[str, Any] | None) -> list[str]:
    """Every way the report departs from the preregistration, in words."""
    out = []
    if prereg.late:
        out.append(f"preregistered late: {prereg.started_before} session(s) had started when it was recorded")
    if spec_sha256 is not None and spec_sha256 != prereg.spec_sha256:
        out.append(f"the spec changed: SHA-256 {spec_sha256[:12]}… now, {prereg.spec_sha256[:12]}… preregistered")
    if criterion != prereg.criterion:
        out.append(f"another criterion: final choices by {criterion}, preregistered {prereg.criterion}")
    for e in excluded:
        who = f"{e['participant']} · " if e.get("participant") else ""
        out.append(f"session left out: cell {e['cell']} ({who}{e['prompt']} r{e['repeat']}): {e['reason']}")
    if prereg.design == WITHIN and within is None:
        out.append("an analysis not planned: the within-participant analysis was preregistered, the report compares "
                   "sessions as independent runs")
    if within is not None:
        primary = [m for m in within["measures"] if m["measure"] == prereg.primary_outcome]
        if prereg.design == BETWEEN:
            out.append("an analysis not planned: a within-participant analysis (the study has people), "
                       "preregistered between runs")
        elif primary and not primary[0]["model"]["fitted"]:
            out.append(f"an analysis not planned: the mixed model of the primary outcome ({prereg.primary_outcome}) "
                       f"was not fitted ({primary[0]['model']['why']}); the paired analysis stands in")
    return out


def markdown(prereg: Preregistration, found: list[str] | None = None) -> str:
    """The preregistration as Markdown; with `found`, the deviations the report lists."""
    lines = [f"# Preregistration: study {prereg.study}", "",
             f"- Recorded: {iso(prereg.registered_at)} (event {prereg.seq} of the study's event log)"
             + (f", **late**: {prereg.started_before} session(s) had started" if prereg.late else
                ", before the first session"),
             f"- Spec SHA-256 (canonical JSON): `{prereg.spec_sha256}`"]
    if prereg.spec_file_sha256:
        lines.append(f"- Spec file SHA-256: `{prereg.spec_file_sha256}`")
    lines += [f"- Design: {prereg.design}",
              f"- Primary outcome: `{prereg.primary_outcome}` ({PRIMARY_NAMES.get(prereg.primary_outcome, '')})",
              f"- Final choice by: {prereg.criterion}",
              f"- Analysis: {prereg.analysis}", "", "## Hypotheses", "", prereg.hypotheses, ""]
    if found is not None:
        lines += ["## Deviations", ""] + ([f"- {d}" for d in found] or ["None."]) + [""]
    return "\n".join(lines)
