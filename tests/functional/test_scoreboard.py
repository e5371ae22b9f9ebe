"""Baselines trained into the session database reach the console's scoreboard, labelled apart from
the study's published rows and from the nodes measured here."""
from __future__ import annotations

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.widgets.scoreboard import Scoreboard

from .conftest import screen_text, wait_for
from .test_console_events import add_node, new_session


async def test_scoreboard_shows_trained_baselines_next_to_published_rows(db, store):
    for seed, auc, gap in ((11, 0.80, 0.10), (22, 0.76, 0.06)):
        store.add_baseline({"variant": "medfair-dedup", "seed": seed, "dataset": "synth", "test_auc": auc,
                            "test_gap": gap})
    w = new_session(store)
    add_node(w, 1, auc=0.71, gap=0.09)
    app = create_app(db, start="console", session_id="s-live", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await wait_for(pilot, lambda: 1 in screen.state.nodes and screen.state.nodes[1].val_auc is not None)
        board = screen.query_one(Scoreboard)
        assert [(b["name"], b["n"]) for b in board.baselines] == [("medfair-dedup", 2)]
        assert abs(board.baselines[0]["auc"] - 0.78) < 1e-9 and abs(board.baselines[0]["gap"] - 0.08) < 1e-9
        text = screen_text(app)
        assert "medfair-dedup (n=2)" in text and ".780" in text and "baseline (trained here)" in text
        assert "Dermatologists" in text and "published" in text
        assert "measured here" in text
