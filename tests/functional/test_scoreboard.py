"""Baselines trained into the session database reach the console's scoreboard, labelled apart from
the study's published rows and from the nodes measured here; baselines trained on other data say so."""
from __future__ import annotations

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.widgets.scoreboard import Scoreboard

from .conftest import screen_text, wait_for
from .test_console_events import add_node, new_session
from tests.settle import reads_done


async def test_scoreboard_shows_trained_baselines_next_to_published_rows(db, store):
    # the session's data is the folder "p" (new_session); a baseline trained on "p" compares
    for seed, auc, gap in ((11, 0.80, 0.10), (22, 0.76, 0.06)):
        store.add_baseline({"variant": "medfair-dedup", "seed": seed, "dataset": "p", "test_auc": auc,
                            "test_gap": gap, "val_auc": auc - 0.1, "val_gap": gap})
    store.add_baseline({"variant": "medfair", "seed": 1, "dataset": "/elsewhere/fitz17k", "test_auc": 0.7,
                        "test_gap": 0.2})
    w = new_session(store)
    add_node(w, 1, auc=0.71, gap=0.09)
    app = create_app(db, start="console", session_id="s-live", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await wait_for(pilot, lambda: 1 in screen.state.nodes and screen.state.nodes[1].val_auc is not None)
        await reads_done(app, pilot)   # the reference rows, read off the UI thread
        board = screen.query_one(Scoreboard)
        names = [(b["name"], b["n"], b["same_data"]) for b in board.baselines]
        assert names == [("medfair", 1, False), ("medfair-dedup", 2, True)]
        dedup = board.baselines[1]
        assert abs(dedup["auc"] - 0.78) < 1e-9 and abs(dedup["gap"] - 0.08) < 1e-9
        text = screen_text(app)
        assert "medfair-dedup (n=2)" in text and ".780" in text and "trained here" in text
        assert "medfair (n=1) · other data" in text
        assert "Dermatologists (published)" in text and "MEDFAIR (published)" in text
        assert "measured here" in text
        # the trained-elsewhere baseline is not plotted; the same-data one is, as ■
        from befair_tui.widgets.scatter import Scatter

        refs = screen.query_one(Scatter).references
        assert ("medfair-dedup", 0.08, 0.78) in [(n, round(g, 9), round(a, 9)) for n, g, a, _k in refs]
        assert not [r for r in refs if r[0] == "medfair"]
