"""What the agent is shown and what the search follows are named on the setup screen and in the
console's header, and the expert's live switch of the feedback is a recorded steering command."""
from __future__ import annotations

from textual.widgets import Select

from engine.agent.commands import apply_command
from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from engine.session import feedback

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.feedback import FeedbackModal
from befair_tui.screens.setup import SetupScreen
from befair_tui.widgets.status_bar import StatusBar
from tests.command_sink import WriterSink

from .conftest import screen_text, wait_for

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}


async def test_the_setup_screen_names_each_setting_and_records_the_choice(db, monkeypatch, tmp_path):
    started = []
    monkeypatch.setattr("befair_tui.app.BefairApp.start_session", lambda self, c, secrets=None: started.append(c))
    app = create_app(db)
    async with app.run_test(size=(140, 60)) as pilot:
        screen = app.screen
        assert isinstance(screen, SetupScreen)
        text = screen_text(app)
        for words in ("★ and the search follow", "validation AUC", "The agent is shown", "measured AUC"):
            assert words in text, words
        assert "two levels differ in their instruction alone" in " ".join(text.split())
        screen.query_one("#feedback", Select).value = "groups"
        await pilot.pause()
        await pilot.press("ctrl+s")
        await pilot.pause()
    (choices,) = started
    assert choices.feedback == "groups" and choices.best == "validation"
    assert choices.session_config().feedback == "groups"


async def test_the_header_names_the_settings_and_a_live_switch_is_recorded(db, store):
    writer = store.create_session(SessionConfig(level="base", steps=6).to_dict(), instruction="x", coder=CODER,
                                  data={"kind": "synth", "path": "p"}, session_id="s-set")
    app = create_app(db, start="console", session_id="s-set", poll_interval=0.05)
    async with app.run_test(size=(160, 42)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        header = lambda: str(screen.query_one(StatusBar).render())  # noqa: E731
        await wait_for(pilot, lambda: "agent sees" in header(), what="the settings in the header")
        assert "★/search validation AUC" in header() and "agent sees AUC" in header()
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, FeedbackModal), what="the feedback choice")
        await pilot.press("down", "enter")       # auc -> groups
        await wait_for(pilot, lambda: bool(store.pending_commands("s-set")), what="the set_feedback command")
        (cmd,) = store.pending_commands("s-set")
        assert (cmd["kind"], cmd["payload"]) == ("set_feedback", {"feedback": "groups"})
        apply_command(WriterSink(writer), cmd)       # the runner consumes it between steps
        await wait_for(pilot, lambda: "agent sees AUC+groups" in header(), what="the header follows")
    assert feedback.current_feedback(store.state("s-set")) == "groups"
    assert [e.kind for e in store.events("s-set")][-1] == ev.FEEDBACK_SET
