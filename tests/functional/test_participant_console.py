"""A participant's console offers only what a participant can do (issue 33): no hint names a key
they lack, the published reference rows only where the study shows them to everyone, one step
count on every surface, the paused clock said, a layout that reads, no field chosen before the
participant chooses, the last session's page worded for the last one.

Driven with Pilot on recorded sessions (tests/snapshot/participant_demo.py: the participant's own
app, no worker started); the clock's effect on a real session's time limit is in
test_participant_console_clock.py."""
from __future__ import annotations

import os
import re
import time

import pytest
from textual.app import App, ComposeResult
from textual.command import CommandPalette, SearchIcon

from engine.session import events as ev
from engine.session import views
from engine.session.event_types import parse
from engine.session.heartbeat import Heartbeat
from engine.study import grid, people
from engine.study.people import Position
from engine.study.worker import with_people_settings
from tests.demo_session import write_demo_session
from tests.snapshot.participant_demo import NOW, TS0, participant_console

from befair_tui.app import create_app, frozen_clock
from befair_tui.console.controller import ConsoleController
from befair_tui.format import reflow
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.participant_between import QuestionsScreen
from befair_tui.screens.participant_console import ParticipantConsoleScreen
from befair_tui.screens.participant_profile import ProfileScreen
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.participant_bar import ParticipantBar
from befair_tui.widgets.scatter import Scatter
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.status_bar import StatusBar
from befair_tui.widgets.study_grid import StudyGrid

from .conftest import region_text, screen_text, wait_for


async def _console(app, pilot, store, sid) -> ParticipantConsoleScreen:
    last = store.last_seq(sid)
    await wait_for(pilot, lambda: isinstance(app.screen, ParticipantConsoleScreen)
                   and app.screen.state.last_seq == last, what="the participant's console")
    await pilot.pause(0.2)
    return app.screen


def _messages(app) -> list[str]:
    return [n.message for n in app._notifications]


def _finish(store, sid) -> None:
    store.writer(sid).emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}))


# --------------------------------------------------------------------------- hints


async def test_no_hint_names_a_key_the_participant_lacks(tmp_path, monkeypatch):
    """b (train baselines), u (resume the runner) and r (the summary) are the researcher's: the
    participant's scoreboard, its refusals and its end say none of them; the researcher's console
    on the same kind of session still does."""
    monkeypatch.setattr(ConsoleController, "baseline_workspace", lambda self: str(tmp_path))  # the data is here
    app, spec, store, sid = participant_console(tmp_path)
    async with app.run_test(size=(140, 42)) as pilot:
        console = await _console(app, pilot, store, sid)
        board = console.query_one(Scoreboard)
        assert board.can_baselines and "no expert baseline trained on this session's data" in region_text(app, board)
        assert "train them" not in screen_text(app)
        for key in ("u", "b", "r"):
            await pilot.press(key)
            await pilot.pause(0.1)
        assert app.screen is console and not _messages(app)   # no "Not now – … nothing to resume (u)"
        _finish(store, sid)
        await wait_for(pilot, lambda: console.state.status == "finished", what="the end")
        await pilot.pause(0.2)
        assert _messages(app) == ["This session has ended; the questions follow."]   # no "r shows its summary"

    other = write_demo_session(store, n_nodes=3, ts0=TS0, finished=False, session_id="researchers-view")
    researcher = create_app(tmp_path / "befair.db", start="console", session_id=other, clock=frozen_clock(NOW),
                            poll_interval=0.02)
    async with researcher.run_test(size=(140, 42)) as pilot:
        await wait_for(pilot, lambda: isinstance(researcher.screen, ConsoleScreen)
                       and researcher.screen.state.last_seq == store.last_seq(other), what="the researcher's console")
        await pilot.pause(0.2)
        assert "no expert baseline trained on this session's data · b: train them" in screen_text(researcher)
        await pilot.press("u")
        await pilot.pause(0.1)
        assert any("nothing to resume (u)" in m for m in _messages(researcher))
        _finish(store, other)
        await wait_for(pilot, lambda: any("r shows its summary" in m for m in _messages(researcher)),
                       what="the researcher's summary hint")


# --------------------------------------------------------------------------- references


@pytest.mark.parametrize("references", [None, "everyone"])
async def test_published_rows_reach_a_participant_only_when_the_spec_says_everyone(tmp_path, references):
    extra = f'references = "{references}"' if references else ""
    app, spec, store, sid = participant_console(tmp_path, extra=extra)
    shown = references == "everyone"
    assert people.people_of(spec).participants_see_references is shown
    async with app.run_test(size=(140, 42)) as pilot:
        console = await _console(app, pilot, store, sid)
        board = console.query_one(Scoreboard)
        assert ("Dermatologists (published)" in region_text(app, board)) is shown
        assert bool([r for r in board.rows if r.kind == "published"]) is shown
        assert bool([p for p in console.query_one(Scatter).references if p[3] == "published"]) is shown
        assert ("published" in region_text(app, console.query_one(ComparisonPlot))) is shown
        # with no reference row under them, how sure the ★ is is still said
        assert "node 1 is told apart from every other node" in region_text(app, board)

    researcher = create_app(tmp_path / "befair.db", start="console", session_id=sid, clock=frozen_clock(NOW),
                            poll_interval=0.02)
    async with researcher.run_test(size=(140, 42)) as pilot:
        await wait_for(pilot, lambda: isinstance(researcher.screen, ConsoleScreen)
                       and researcher.screen.state.last_seq == store.last_seq(sid), what="the researcher's console")
        await pilot.pause(0.2)
        assert "Dermatologists (published)" in screen_text(researcher)   # the researcher's console keeps them


# --------------------------------------------------------------------------- one step count


class _Grid(App[None]):
    def __init__(self, rows) -> None:
        super().__init__()
        self.rows = rows

    def compose(self) -> ComposeResult:
        yield StudyGrid(id="grid")

    def on_mount(self) -> None:
        self.query_one(StudyGrid).sync(self.rows)


async def _grid_says(store, study: str, sid: str) -> str:
    """The study grid's line for session `sid`."""
    app = _Grid(grid.grid_rows(store, study))
    async with app.run_test(size=(160, 10)) as pilot:
        await pilot.pause(0.1)
        text = screen_text(app)
    assert "steps taken" in text
    return next(line for line in text.splitlines() if sid in line)


async def test_one_step_count_on_every_surface_while_running_and_after_a_restart(tmp_path):
    """The header once said "step 2/4" while node 1 ran and "step 1/4" paused, and 4/4 where the
    researcher's grid said 3/4 after a restart: now every surface says the steps taken."""
    app, spec, store, sid = participant_console(tmp_path, n_nodes=3, clock=time.time)
    cell = people.participant_cells(spec, "p01")[0]
    store.set_runner_pid(sid, os.getpid())
    with Heartbeat(store.path, sid):   # a live runner: the old header counted the step under way as well
        async with app.run_test(size=(140, 42)) as pilot:
            console = await _console(app, pilot, store, sid)
            await wait_for(pilot, lambda: console.runner == "alive", what="the runner seen alive")
            count = views.step_count(console.state)
            assert (count.taken, count.budget) == (3, 3) and console.state.running_node == 3
            assert "3/3 steps taken" in region_text(app, console.query_one(ParticipantBar))
            assert "step" not in region_text(app, console.query_one(StatusBar))   # said once, in the bar
            writer = store.writer(sid)   # the machine restarts: node 3 interrupted, the session resumed
            writer.emit(parse(ev.NODE_INTERRUPTED, {"node_id": 3, "reason": "interrupted"}))
            writer.emit(parse(ev.SESSION_RESUMED, {"by": "study pc", "interrupted": [3]}))
            await wait_for(pilot, lambda: console.state.last_seq == store.last_seq(sid), what="the restart")
            await pilot.pause(0.6)
            assert "3/3 steps taken" in region_text(app, console.query_one(ParticipantBar))

    researcher = create_app(tmp_path / "befair.db", start="console", session_id=sid, poll_interval=0.02)
    async with researcher.run_test(size=(140, 42)) as pilot:
        await wait_for(pilot, lambda: isinstance(researcher.screen, ConsoleScreen)
                       and researcher.screen.state.last_seq == store.last_seq(sid), what="the researcher's console")
        await pilot.pause(0.2)
        assert " · 3/3 steps · " in region_text(researcher, researcher.screen.query_one(StatusBar))
    assert " 3/3 " in await _grid_says(store, spec.name, cell.session_id)


# --------------------------------------------------------------------------- the paused clock


def _paused_session(paused_for: float):
    """A study session as its worker records it (its config from the spec), paused `paused_for`
    seconds ago after 40 s of running."""
    def record(store, spec, cell) -> None:
        config = with_people_settings(spec.session_config(cell), spec).to_dict()
        start = time.time() - 40 - paused_for
        writer = store.create_session(config, instruction="x", coder={"name": "fast", "label": "fast"},
                                      data={"kind": "synth"}, session_id=cell.session_id, ts=start)
        writer.emit(parse(ev.PAUSED, {"by": "participant p01"}), ts=start + 40)
        store.set_runner_pid(cell.session_id, os.getpid())
    return record


@pytest.mark.parametrize("runs", [True, False])
async def test_the_participant_is_told_whether_a_paused_sessions_clock_runs(tmp_path, runs):
    app, spec, store, sid = participant_console(tmp_path, extra=f"clock_runs_when_paused = {str(runs).lower()}",
                                                record=_paused_session(100), clock=time.time)
    with Heartbeat(store.path, sid):
        async with app.run_test(size=(140, 42)) as pilot:
            console = await _console(app, pilot, store, sid)
            await wait_for(pilot, lambda: console.runner == "alive", what="the runner seen alive")
            await pilot.pause(0.6)
            status = region_text(app, console.query_one(StatusBar))
            words = "the clock keeps running" if runs else "clock stopped"
            assert f" PAUSED  · {words} · fairness-metric" in status   # then the level, after a separator
            assert not re.search(r"\d\d:\d\d", status)   # no time since the start beside it: the bar has the time left
            bar = region_text(app, console.query_one(ParticipantBar))
            # 600 s of time limit: 40 s ran, then 100 s paused, which count only when the clock runs
            minutes, seconds = re.search(r"time left (\d\d):(\d\d)", bar).groups()
            left = int(minutes) * 60 + int(seconds)
            assert (440 <= left <= 460) if runs else left == 560, bar


# --------------------------------------------------------------------------- layout


def _blind_session(store, spec, cell) -> None:
    config = with_people_settings(spec.session_config(cell), spec).to_dict()
    writer = store.create_session(config, instruction="x", coder={"name": "fast", "label": "fast"},
                                  data={"kind": "synth"}, session_id=cell.session_id, ts=TS0)
    for nid, (val, test) in enumerate([((0.80, 0.05), (0.66, 0.12)), ((0.70, 0.20), (0.61, 0.25))], start=1):
        writer.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": None, "step": nid, "stage": "draft",
                                            "plan": "p", "guidance_ids": [], "origin": "agent"}), ts=TS0 + nid)
        writer.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": "ok", "exit_code": 0, "exec_time": 1.0,
                                             "exc_type": None, "output_head": "", "output_tail": "",
                                             "truncated": False}), ts=TS0 + nid)
        for split, (auc, gap) in (("validation", val), ("test", test)):
            summary = {"auc": auc, "auc_gap": gap, "worst_auc": auc - gap / 2, "n": 90,
                       "group_auc": {"group_0": auc + gap / 2, "group_1": auc - gap / 2}}
            writer.emit(parse(ev.EVALUATED, {"node_id": nid, "split": split, "ok": True, "verdict": "ok",
                                             "reason": None, "summary": summary, "medfair": {},
                                             "blinded": split == "test"}), ts=TS0 + nid)


@pytest.mark.parametrize("size", [(80, 24), (140, 42)])
async def test_hidden_columns_stay_apart_and_a_criterion_is_never_split(tmp_path, size):
    app, spec, store, sid = participant_console(tmp_path, blind=True, record=_blind_session)
    async with app.run_test(size=size) as pilot:
        console = await _console(app, pilot, store, sid)
        board = console.query_one(Scoreboard)
        lines = [line.plain for line in board.lines]
        assert any(re.search(r"hidden +hidden", line) for line in lines), lines
        assert not any("hiddenhidden" in line for line in lines), lines
        await pilot.press("v")   # validation: a node row named by every criterion it is best by
        await pilot.pause(0.2)
        names = [line.plain.rstrip() for line in board.lines]
        assert "worst group" in " ".join(names), names
        # never "…worst low / end": a criterion's name is whole on its line
        assert not [line for line in names if line.endswith(("worst", "worst low"))], names
        assert "published" not in " ".join(names)   # no note about rows this reader does not see


def test_a_spec_text_is_reflowed_into_its_paragraphs():
    spec_text = ("Steer the agent towards a pipeline that classifies each lesion as\nmalignant or benign.\n\n"
                 "Before you start:\n- read the instruction\n- pause it when you want\n  to think\n")
    assert reflow(spec_text) == ("Steer the agent towards a pipeline that classifies each lesion as malignant or "
                                 "benign.\n\nBefore you start:\n- read the instruction\n- pause it when you want to "
                                 "think")


async def test_the_running_clock_has_a_glyph_every_font_has_and_toasts_leave_the_bars_free(tmp_path):
    app, spec, store, sid = participant_console(tmp_path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        console = await _console(app, pilot, store, sid)
        text = screen_text(app)
        assert "◐ running 06:15" in text and "⏱" not in text
        console.notify("A long notification about steering that takes three or four lines of the screen.",
                       title="Steering", timeout=30)
        await pilot.pause(0.5)
        bottom = screen_text(app).splitlines()[-3:]
        assert bottom[0].startswith(" guidance for the agent") and bottom[1].startswith(" Session 1 of 2")
        assert bottom[2].startswith("p Pause")
        assert "Steering" in screen_text(app)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="the palette")
        await pilot.pause(0.3)
        assert not app.screen.query_one(SearchIcon).display and "🔎" not in screen_text(app)


# --------------------------------------------------------------------------- no default choice


class _Pages(App[None]):
    CSS_PATH = str(__import__("befair_tui").__path__[0] + "/befair.tcss")


async def test_no_role_and_no_scale_value_looks_chosen_until_chosen(tmp_path):
    app, spec, store, sid = participant_console(tmp_path)
    p = people.people_of(spec)
    pages = _Pages()
    async with pages.run_test(size=(100, 40)) as pilot:
        await pages.push_screen(ProfileScreen(p))
        await pilot.pause(0.3)
        roles = pages.screen.query_one("#field-role")
        assert roles.has_focus and roles.pressed_button is None and roles._selected is None
        assert not pages.screen.query(".-selected") and "●" not in screen_text(pages)
        await pilot.click("#role-1")
        await pilot.pause(0.2)
        assert str(roles.pressed_button.label) == "data scientist" and "●" in screen_text(pages)

        cells = people.participant_cells(spec, "p01")
        last = Position(people.QUESTIONS, cells, len(cells) - 1, {"id": cells[-1].session_id, "status": "finished"})
        await pages.push_screen(QuestionsScreen(spec, last))
        await pilot.pause(0.3)
        scale = pages.screen.query_one("#q-fair_dark")
        assert scale.pressed_button is None and scale._selected is None and "●" not in screen_text(pages)
        text = screen_text(pages)
        assert "before you finish" in text and "before the next session" not in text   # the last session
        assert "Save and finish" in text
        await pilot.press("right")
        await pilot.pause(0.1)
        assert scale._selected == 0 and scale.pressed_button is None   # the cursor shows; still nothing chosen


async def test_the_questions_after_a_session_that_is_not_the_last_say_the_next_one_comes(tmp_path):
    app, spec, store, sid = participant_console(tmp_path)
    cells = people.participant_cells(spec, "p01")
    first = Position(people.QUESTIONS, cells, 0, {"id": cells[0].session_id, "status": "finished"})
    pages = _Pages()
    async with pages.run_test(size=(100, 40)) as pilot:
        await pages.push_screen(QuestionsScreen(spec, first))
        await pilot.pause(0.3)
        text = screen_text(pages)
        assert "before the next session" in text and "Save and go on to the next session" in text


async def test_the_participants_help_says_what_the_bar_counts_and_what_the_clock_does():
    from befair_tui.screens.participant_help import ParticipantHelp

    pages = _Pages()
    async with pages.run_test(size=(100, 40)) as pilot:
        await pages.push_screen(ParticipantHelp())
        await pilot.pause(0.3)
        text = " ".join(line.strip("│ ") for line in screen_text(pages).splitlines())
        assert "steps taken of the budget" in text and "whether its clock keeps running" in text
        assert "r " not in [line.strip()[:2] for line in screen_text(pages).splitlines()]   # no summary key
