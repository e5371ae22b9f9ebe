"""The status line during a slow local model's call, at 80 columns: the model's name, the step and
the call in progress (tokens so far, tokens/s) before what ★ means, the clock and the totals."""
from __future__ import annotations

from textual.app import App, ComposeResult

from befair_tui.widgets.status_bar import StatusBar
from engine.session import events as ev
from engine.session.state import fold

MODEL = "qwen2.5-coder-1.5b-instruct"


def _state():
    started = {"config": {"steps": 6, "level": "fairness-metric", "sandbox": "bwrap"}, "instruction": "x", "data": {},
               "coder": {"name": "openai", "label": f"LLM coder ({MODEL})", "simulated": False, "model": MODEL}}
    items = [(ev.SESSION_STARTED, started),
             (ev.POLICY_DECISION, {"action": "draft", "node_id": None, "reason": "initial drafting", "forced": False})]
    return fold([ev.Event(seq=i + 1, kind=k, payload=p, ts=float(i), session_id="s")
                 for i, (k, p) in enumerate(items)])


class _Bar(App[None]):
    def compose(self) -> ComposeResult:
        yield StatusBar(id="bar")


LIVE = {"role": "draft", "tokens": 1412, "chars": 5000, "tokens_per_s": 6.1}


async def _line(width: int, live: dict | None = LIVE) -> str:
    state = _state()
    state.status = "running"
    app = _Bar()
    async with app.run_test(size=(width, 3)) as pilot:
        bar = app.query_one(StatusBar)
        bar.sync(state, read_only=False, live=live, now=100.0)
        await pilot.pause()
        return str(bar.render())


async def test_the_call_in_progress_stays_on_an_80_column_line():
    line = await _line(80)
    assert "fairness-metric · qwen2.5-cod… · 0/6 steps · draft 1,412 tok 6.1/s" in line, line
    assert "LLM coder (" not in line                      # the label is shortened, not the call
    line = await _line(140)
    assert f"LLM coder ({MODEL})" in line and "★" in line and "draft 1,412 tok 6.1/s" in line, line


async def test_the_step_count_is_the_steps_taken_running_or_paused():
    """One count on every surface (engine.session.views.steps): no node yet, the model writing the
    first: no step taken yet, running or paused (the call in progress says what is under way)."""
    state = _state()
    for status, shown in (("running", "0/6 steps"), ("paused", "0/6 steps")):
        state.status = status
        app = _Bar()
        async with app.run_test(size=(140, 3)) as pilot:
            bar = app.query_one(StatusBar)
            bar.sync(state, read_only=False, live=LIVE, now=100.0)
            await pilot.pause()
            assert f" · {shown} · " in str(bar.render()), (status, str(bar.render()))


async def test_a_model_still_reading_its_prompt_is_said_on_an_80_column_line():
    assert (await _line(80, live={})).endswith("0/6 steps · draft: reading prompt")
    assert "0/6 steps · ★/search validation AUC · draft: reading the prompt" in await _line(140, live={})


async def test_before_the_first_node_the_node_pane_says_where_the_reply_shows(db, store):
    """A slow local model's first draft takes minutes: the empty Node pane says that the reply shows
    in the Conversation tab as it comes, at 80x24."""
    from befair_tui.app import create_app
    from befair_tui.screens.console import ConsoleScreen
    from befair_tui.widgets.node_detail import NodeDetail
    from engine.agent.session_config import SessionConfig
    from engine.session.event_types import parse

    from .conftest import region_text, wait_for

    config = SessionConfig(level="fairness-metric", steps=6, coder="openai", model=MODEL).to_dict()
    w = store.create_session(config, instruction="x", coder={"name": "openai", "label": "LLM coder",
                                                             "simulated": False, "model": MODEL},
                             data={"kind": "synth", "path": "p"}, session_id="slow")
    w.emit(parse(ev.POLICY_DECISION, {"action": "draft", "node_id": None, "reason": "initial drafting",
                                      "forced": False}))
    w.emit(parse(ev.LLM_STREAM, {"role": "draft", "step": 1, "chars": 900, "tokens": 210, "elapsed_s": 60.0,
                                 "first_token_s": 25.0, "tokens_per_s": 6.0, "recent_tokens_per_s": 5.5}))
    app = create_app(db, start="console", session_id="slow", poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        detail = screen.query_one(NodeDetail)
        await wait_for(pilot, lambda: "No node yet" in region_text(app, detail), what="the empty pane's note")
        text = " ".join(region_text(app, detail).replace("│", " ").split())
        assert "No node yet" in text and "Press 7 to watch the reply come in" in text and "first draft" in text, text
        await pilot.press("7")
        await wait_for(pilot, lambda: detail.active_tab == "conversation", what="the Conversation tab")
