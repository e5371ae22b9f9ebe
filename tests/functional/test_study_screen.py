"""The Study screen, opened from the sessions screen: the grid with each session's state, live,
the aggregate so far and Figure 2 in the terminal; Enter opens a session."""
from __future__ import annotations

from tests.demo_session import write_demo_session
from engine.study import grid
from engine.study.aggregate import OVERALL_AUC, statistic
from engine.study.report import build_report
from engine.study.spec import parse_spec

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.study import StudyScreen
from befair_tui.widgets.study_grid import StudyGrid
from befair_tui.widgets.study_plot import StudyPlot

from .conftest import screen_text, wait_for


def _study(store):
    spec = parse_spec({"name": "screen-demo", "levels": ["base", "fairness-methods"], "repeats": 2, "steps": 4,
                       "data": {"synth": {"n_train": 60, "n_test": 40, "size": 16}}})
    grid.ensure_study(store, spec)
    return spec, spec.cells()


def _record(store, spec, cell, *, finished=True):
    sid = write_demo_session(store, n_nodes=4, seed=cell.index + 1, finished=finished, session_id=cell.session_id)
    grid.link_session(store, spec.name, cell.index, sid)
    return sid


async def test_study_screen_shows_the_grid_live_and_opens_a_session(db, store):
    write_demo_session(store, n_nodes=3, seed=9)                  # a session outside any study
    spec, cells = _study(store)
    for cell in cells[:2]:
        _record(store, spec, cell)
    _record(store, spec, cells[2], finished=False)                # this process "runs" it: alive
    app = create_app(db, start="sessions")
    async with app.run_test(size=(170, 40)) as pilot:
        sessions = app.screen
        table = sessions.query_one("DataTable")
        ids = [str(k.value) for k in table.rows]
        table.move_cursor(row=ids.index(cells[0].session_id))
        await pilot.press("s")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, StudyScreen) and screen.study == "screen-demo"
        states = [r["state"] for r in screen.rows]
        assert states == ["finished", "finished", "running", "queued"]
        text = screen_text(app)
        assert "Study screen-demo" in text and "2/4 finished · 1 running · 1 queued" in text
        mean = statistic(build_report(store, "screen-demo").table, "offline", "base", "mean", OVERALL_AUC)
        assert f"offline · base  n=2  AUC {mean:.3f} ± " in text
        assert "generated data (SynthDerm): not comparable" in text
        plot = screen.query_one(StudyPlot)
        assert [(p.group, p.level) for p in plot.points] == [("offline", "base")]
        assert {r.group for r in plot.references} == {"expert", "human"}

        _record(store, spec, cells[3])                            # a session finishes meanwhile
        await wait_for(pilot, lambda: "3/4 finished" in screen_text(app), what="the refresher")
        assert [(p.group, p.level) for p in plot.points] == [("offline", "base"), ("offline", "fairness-methods")]

        grid_widget = screen.query_one(StudyGrid)
        grid_widget.move_cursor(row=1)
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, ConsoleScreen) and app.screen.session_id == cells[1].session_id


async def test_study_screen_without_studies_and_a_queued_cell(db, store):
    app = create_app(db, start="sessions")
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(app.screen, StudyScreen)
        text = screen_text(app)  # what a study is and how to start one, not a chart of published points only
        assert "none yet" in text and "No study in this database yet." in text and "befair study run" in text
        assert "several instruction levels" in " ".join(text.split()) and "-empty" in app.screen.classes
        assert not app.screen.query_one(StudyPlot).region.height  # no plot drawn without a study
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, StudyScreen)

    _study(store)
    app = create_app(db, start="sessions")
    async with app.run_test(size=(120, 30)) as pilot:
        await pilot.press("s")
        await pilot.pause()
        assert app.screen.study == "screen-demo"                  # no session selected: the newest study
        await pilot.press("enter")                                # a queued cell has no session to open
        await pilot.pause()
        assert isinstance(app.screen, StudyScreen)
        assert "0/4 finished" in screen_text(app) and "no finished session yet" in screen_text(app)
