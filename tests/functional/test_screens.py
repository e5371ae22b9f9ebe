"""Sessions, replay, setup and an imported AIDE run, driven through the real app."""
from __future__ import annotations


import pytest

from tests.demo_session import write_demo_session

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.replay import ReplayScreen
from befair_tui.screens.sessions import SessionsScreen
from befair_tui.screens.setup import SetupScreen

from .conftest import SHARED_AIDE, screen_text, tree_text, wait_for
from tests.settle import reads_done


async def test_sessions_screen_filter_sort_open_export_delete(db, store, tmp_path):
    a = write_demo_session(store, n_nodes=6, seed=1)
    b = write_demo_session(store, n_nodes=4, seed=2, finished=False)
    app = create_app(db, start="sessions")
    async with app.run_test(size=(120, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, SessionsScreen)
        await reads_done(app, pilot)   # the sessions table, read off the UI thread
        table = screen.query_one("DataTable")
        assert table.row_count == 2
        text = screen_text(app)
        assert "fairness-metric" in text and "offline (simulated)" in text
        await pilot.press("slash", *"live")
        await pilot.pause()
        assert table.row_count == 1
        await pilot.press("backspace", "backspace", "backspace", "backspace", "enter")
        await pilot.pause()
        assert table.row_count == 2
        await pilot.press("t")  # sort by the next column
        await pilot.pause()
        assert "sorted by session" in screen_text(app)

        # export the first row to a folder
        await pilot.press("x")
        await pilot.pause()
        out = tmp_path / "export"
        field = app.screen.query_one("#export-path")
        field.value = str(out)
        await pilot.press("enter")
        await wait_for(pilot, lambda: (out / "events.jsonl").exists(), what="export")

        # delete asks first; "n" keeps it
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        assert len(store.sessions()) == 2
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("y")
        await wait_for(pilot, lambda: len(store.sessions()) == 1, what="delete")
        await reads_done(app, pilot)
        assert table.row_count == 1

        # open the remaining one in the console
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConsoleScreen))
        remaining = store.sessions()[0]["id"]
        assert app.screen.session_id == remaining
        await wait_for(pilot, lambda: app.screen.state.last_seq == store.last_seq(remaining))
        assert {a, b} >= {remaining}


async def test_replay_to_the_end_and_back(db, store):
    sid = write_demo_session(store, n_nodes=8, seed=0)
    total = store.last_seq(sid)
    app = create_app(db, start="replay", session_id=sid, replay_speed="max")
    async with app.run_test(size=(120, 34)) as pilot:
        await reads_done(app, pilot)
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        assert screen.timeline.position == 1 and not screen.state.nodes  # the session header only
        assert "pause" not in [b.binding.id for b in screen.active_bindings.values() if b.enabled]
        await pilot.press("right", "right")
        await pilot.pause()
        assert screen.timeline.position == 3
        await pilot.press("left")
        await pilot.pause()
        assert screen.timeline.position == 2
        await pilot.press("space")  # play at max speed to the end
        await wait_for(pilot, lambda: screen.timeline.at_end and not screen.playing, what="end of replay")
        assert screen.state.last_seq == total
        assert screen.state.status == "finished"
        assert "⏸ REPLAY PAUSED  finished" in screen_text(app)  # paused at the end; the session had finished
        assert len(screen.state.nodes) == 8
        assert "★ best" in tree_text(app)

        # jump to the selected node's creation (the newest node, selected while following)
        chosen = screen.selected_node
        await pilot.press("j")
        await pilot.pause()
        assert screen.timeline.current_event.kind == "node_created"
        assert screen.timeline.current_event.payload["node_id"] == chosen
        assert max(screen.state.nodes) == chosen
        # speed cycles 1x -> 10x -> max
        await pilot.press("f")
        await pilot.pause()
        assert screen.speed == "1x"
        # steering keys do nothing in replay
        n_commands = len(store.commands(sid))
        await pilot.press("p", "e", "x")
        await pilot.pause()
        assert len(store.commands(sid)) == n_commands


async def test_replay_steps_node_by_node_both_ways(db, store):
    sid = write_demo_session(store, n_nodes=6, seed=0)
    app = create_app(db, start="replay", session_id=sid, replay_speed="max")
    async with app.run_test(size=(120, 34)) as pilot:
        await reads_done(app, pilot)
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        starts = []
        for _ in range(2):
            await pilot.press("n")
            await pilot.pause()
            starts.append(screen.timeline.position)
            assert screen.timeline.current_event.kind == "node_created"
        await pilot.press("b")  # back to where the first node starts, not the console's baselines key
        await pilot.pause()
        assert screen.timeline.position == starts[0] < starts[1]
        assert not any("Not now" in (n.title or "") for n in app._notifications)


async def test_setup_remembers_choices_and_reports_bad_input(db, tmp_path, monkeypatch):
    started = []
    monkeypatch.setattr("befair_tui.app.BefairApp.start_session", lambda self, c, secrets=None: started.append(c))
    app = create_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, SetupScreen)
        assert "dermatologist" in screen_text(app)  # the chosen level's exact instruction is shown
        screen.query_one("#steps").value = "zero"
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert not started
        assert any("whole number" in n.message for n in app._notifications)
        screen.query_one("#steps").value = "3"
        screen.query_one("#participant").value = "P07"
        screen.query_one("#level-base").value = True
        await pilot.pause()
        assert "I'm a dermatologist" in str(screen.query_one("#level-text").render())
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert started and started[0].steps == 3 and started[0].level == "base"
    app = create_app(db)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.screen.query_one("#participant").value == ""  # per person: never carried over
        assert app.screen.query_one("#steps").value == "3"
        # the LLM coder without configuration says how to configure it
        app.screen.query_one("#coder-openai").value = True
        await pilot.pause()
        assert "OPENAI_API_KEY" in str(app.screen.query_one("#coder-note").render())


async def test_imported_aide_run_opens_and_replays(db, store):
    if not SHARED_AIDE.exists():
        pytest.skip("the AIDE journal example is not present")
    from engine.imports.aide import import_aide

    sid = import_aide(store, SHARED_AIDE)
    n = len(store.state(sid).nodes)
    app = create_app(db, start="console", session_id=sid, poll_interval=0.05)
    async with app.run_test(size=(120, 34)) as pilot:
        await wait_for(pilot, lambda: len(app.screen.state.nodes) == n and n > 0, what="imported nodes")
        assert "(imported)" in tree_text(app)
    app = create_app(db, start="replay", session_id=sid, replay_speed="max", autoplay=True)
    async with app.run_test(size=(120, 34)) as pilot:
        await reads_done(app, pilot)
        await wait_for(pilot, lambda: app.screen.loaded and app.screen.timeline.at_end, what="replay end")
        assert len(app.screen.state.nodes) == n
