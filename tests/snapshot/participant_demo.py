"""A participant's console on a recorded session, deterministic (fixed timestamps, a frozen clock,
no worker started): for the participant console's Pilot tests and its snapshots.

The study spec is a small one with people; the recorded demo session stands in for the
participant's first cell. The app is the participant's own (ParticipantApp), with one change:
it never starts a worker, so what the screen shows comes from the recorded events only.
"""
from __future__ import annotations

from pathlib import Path
from collections.abc import Callable
from typing import Any

from textual import events

from tests.demo_session import write_demo_session
from engine.session.store import SessionStore
from engine.study import grid, people
from engine.study.spec import Cell, StudySpec, load_spec

import befair_tui
from befair_tui.app import frozen_clock
from befair_tui.participant_app import ParticipantApp
from befair_tui.screens.participant_console import ParticipantConsoleScreen

TS0 = 1_700_000_000.0
NOW = TS0 + 400.0

SPEC = '''
name = "{name}"
levels = ["fairness-metric", "base"]
participants = ["p01", "p02"]
steps = 4
seed = 1
time_limit = 600
blind_test = {blind}

[people]
instructions = """Steer the agent towards a pipeline that classifies each lesion as
malignant or benign, as well on dark skin as on light skin.

Pause it when you want to think."""
consent = "I agree that my steering and answers are recorded."
roles = ["dermatologist", "data scientist"]
guidance_budget = 3
{extra}

[[people.questions]]
id = "fair_dark"
text = "How sure are you that the chosen pipeline is fair to dark skin?"
scale = [1, 7]

[coder]
factory = "tests.unit.test_study_pool:fast_coder"
label = "fast"
'''


def write_spec(path: Path, name: str = "pc", *, extra: str = "", blind: bool = False) -> Path:
    path.write_text(SPEC.format(name=name, extra=extra, blind=str(blind).lower()))
    return path


class RecordedParticipantApp(ParticipantApp):
    """The participant's app, its session's worker never started (the recorded events stand in)."""

    CSS_PATH = str(Path(befair_tui.__file__).parent / "befair.tcss")

    def ensure_runner(self) -> bool:
        return False

    opening: tuple[SessionStore, StudySpec, str, str] | None = None   # store, spec, participant, session

    def on_mount(self, event: events.Mount) -> None:
        event.prevent_default()   # not the participant app's own way in (its id, its link's code)
        assert self.opening is not None
        store, spec, participant, sid = self.opening
        self.participant = participant
        self.position = position = people.where(store, spec, participant)
        self.push_screen(ParticipantConsoleScreen(store, sid, position=position, spec=spec, participant=participant,
                                                  poll_interval=0.02, clock=self.clock))

    def advance(self) -> None:
        self.advanced = getattr(self, "advanced", 0) + 1


def participant_console(tmp_path: Path, *, n_nodes: int = 3, finished: bool = False, extra: str = "",
                        participant: str = "p01", clock: Any = None, blind: bool = False,
                        record: Callable[[SessionStore, StudySpec, Cell], None] | None = None,
                        ) -> tuple[RecordedParticipantApp, StudySpec, SessionStore, str]:
    """The app with a ParticipantConsoleScreen on `participant`'s first cell, recorded: its
    session's events are the demo session's, from TS0, or what `record(store, spec, cell)` writes."""
    db = tmp_path / "befair.db"
    store = SessionStore(db)
    spec = load_spec(write_spec(tmp_path / "spec.toml", extra=extra, blind=blind))
    grid.ensure_study(store, spec)
    people.consent(store, spec, participant)
    people.give_profile(store, spec, participant, {"role": "dermatologist", "years_dermatology": 9, "years_ml": 0})
    cell = people.participant_cells(spec, participant)[0]
    if record is not None:
        record(store, spec, cell)
    else:
        write_demo_session(store, n_nodes=n_nodes, ts0=TS0, finished=finished, session_id=cell.session_id)
    grid.link_session(store, spec.name, cell.index, cell.session_id)
    app = RecordedParticipantApp(db, spec.name, participant=participant, poll_interval=0.02,
                                 clock=clock or frozen_clock(NOW))
    app.opening = (store, spec, participant, cell.session_id)
    return app, spec, store, cell.session_id
