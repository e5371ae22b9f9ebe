"""The Conversation tab (key 7): per node, the LLM calls from `llm_call` events (messages, raw
reply, parsed plan/code, tokens, latency), where the instruction level's text and each guidance
appear (or that a guidance did not reach the call), large repeated prompt texts shown once, the
streamed reply live from `llm_stream` events; and a long guidance shown once in the plans."""
from __future__ import annotations

import io

from rich.console import Console
from textual.widgets import Static

from engine.agent.session_config import SessionConfig
from engine.session import events as ev

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.widgets.conversation import ConversationView
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.text_pane import TextPane
from befair_tui.widgets.search_tree import SearchTree

from .conftest import screen_text, wait_for
from engine.session.event_types import parse

CODER = {"name": "openai", "label": "LLM coder", "simulated": False, "model": "m-1"}
SYSTEM = "[system prompt] " + "You are an expert machine-learning engineer. " * 20   # ~900 characters, every call
DATA = "# Data overview\n\n" + "train.csv: image, label, skin_tone (1-6)\n" * 30   # ~1,200, every call
GUIDANCE = ("Weight the loss by inverse skin-tone frequency and report per-group AUC. " * 70).strip()  # ~5,000


def user_message(instruction: str, guidance: str | None) -> str:
    parts = [f"# Task description\n\n{instruction}\n"]
    if guidance:
        parts.append(f'# Guidance from the domain expert\n\n- "{guidance}"\n')
    return "\n".join(parts + [DATA])


def node_with_call(w, nid, stage, *, instruction, guidance, plan, parent=None, gids=()):
    code = f"def predict(folder):\n    return {nid}\n"
    reply = f"{plan}\n\n```python\n{code}```"
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": parent, "step": nid, "stage": stage, "plan": plan,
                             "guidance_ids": list(gids), "components": None, "origin": "agent"}))
    w.emit(parse(ev.LLM_CALL, {"node_id": nid, "role": stage, "model": "m-1", "tokens_in": 1234 + nid,
                               "tokens_out": 567,
                         "latency_s": 2.25, "cost": 0.0012, "ok": True, "error": None, "tokens_estimated": False,
                         "messages": [{"role": "system", "content": SYSTEM},
                                      {"role": "user", "content": user_message(instruction, guidance)}],
                         "reply": reply}))
    w.emit(parse(ev.CODE, {"node_id": nid, "code": code}))


async def select(pilot, screen, node_id: int) -> None:
    """Put the tree's cursor on a node (as the arrow keys do) and wait until the panel shows it."""
    tree = screen.query_one(SearchTree)
    tree.focus()
    # the console first puts the cursor on the newest node itself (after a refresh): let it
    await wait_for(pilot, lambda: tree.cursor_line >= 0 and tree.cursor_node is tree.item_for(screen.selected_node),
                   what="the cursor placed")
    delta = tree.item_for(node_id).line - tree.cursor_line
    for _ in range(abs(delta)):
        await pilot.press("down" if delta > 0 else "up")
    await wait_for(pilot, lambda: screen.query_one(NodeDetail).node_id == node_id, what=f"node {node_id} shown")
    await pilot.pause(0.1)


def body_text(app) -> str:
    view = app.screen.query_one(ConversationView)
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(view.query_one("#conversation-body", Static).content)
    return console.file.getvalue()


def plan_text(app) -> str:
    console = Console(width=200, file=io.StringIO(), color_system=None)
    console.print(app.screen.query_one("#plan", TextPane).renderable)
    return console.file.getvalue()


async def test_conversation_tab_shows_calls_marks_and_repeats_once(db, store):
    config = SessionConfig(level="fairness-metric", steps=5, coder="openai", model="m-1", best="validation").to_dict()
    instruction = SessionConfig(level="fairness-metric").instruction
    w = store.create_session(config, instruction=instruction, coder=CODER, data={"kind": "synth", "path": "p"},
                             session_id="conv")
    w.emit(parse(ev.GUIDANCE, {"guidance_id": 1, "text": GUIDANCE, "scope": "global", "node_id": None, "by": "u",
                         "command_id": None}))
    node_with_call(w, 1, "draft", instruction=instruction, guidance=GUIDANCE, gids=[1],
                   plan=f'Following guidance: "{GUIDANCE}". A small CNN.')
    node_with_call(w, 2, "improve", parent=1, instruction=instruction, guidance=GUIDANCE, gids=[1],
                   plan=f'Following guidance: "{GUIDANCE}". Add colour constancy.')
    node_with_call(w, 3, "improve", parent=1, instruction=instruction, guidance=None, gids=[1],
                   plan="Add augmentation.")   # the guidance was in force but never reached the model

    app = create_app(db, start="console", session_id="conv", poll_interval=0.05)
    async with app.run_test(size=(160, 60)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await wait_for(pilot, lambda: len(screen.state.nodes) == 3 and screen.state.nodes[3].code, what="nodes")
        await select(pilot, screen, 1)
        await pilot.press("7")
        await pilot.pause(0.2)
        assert "call 1 · draft · node 1" in screen_text(app)  # on screen, in the tab
        first = body_text(app)
        assert "1,235 → 567 tokens" in first and "2.2 s" in first and "$0.0012" in first
        assert "✓ instruction (fairness-metric): message 2 (user)" in first
        assert "✓ guidance #1: message 2 (user)" in first
        assert first.count("[system prompt]") == 1 and GUIDANCE[:80] in first  # the first call shows all
        assert "reply (raw)" in first and "parsed plan" in first and "the code block of the reply above" in first

        await select(pilot, screen, 2)
        second = body_text(app)
        assert "call 2 · improve · node 2" in second
        assert "↺ same as call 1 (node 1 · draft), message 1" in second  # the system message, once
        assert "same as call 1 (node 1 · draft), message 2" in second    # the data overview section
        assert "[system prompt]" not in second and "train.csv: image" not in second
        assert "✓ guidance #1: message 2 (user)" in second  # marked even where its text is a reference
        assert len(second) < len(first) / 2

        await select(pilot, screen, 3)
        third = body_text(app)
        assert "✗ guidance #1: not in this call's messages" in third
        assert "✓ instruction (fairness-metric)" in third

        # the plan tab: the 5,000-character guidance in full at node 1 only, a reference in later plans
        await pilot.press("1")
        await select(pilot, screen, 2)
        plan = plan_text(app)
        assert GUIDANCE not in plan.replace("\n", "")
        assert "guidance #1, shown in full at node 1 (" in plan and len(plan) < 1_000
        await select(pilot, screen, 1)
        assert GUIDANCE.replace(" ", "") in plan_text(app).replace("\n", "").replace(" ", "")

        # a reply being written streams into the tab
        await pilot.press("7")
        for delta in ("I will draft ", "a gradient-boosting model ", "on colour histograms."):
            w.emit(parse(ev.LLM_STREAM, {"role": "draft", "step": 4, "delta": delta}))
        await wait_for(pilot, lambda: "on colour histograms." in screen_text(app), what="the live reply")
        text = screen_text(app)
        assert "the model is writing: draft · step 4" in text
        assert "I will draft a gradient-boosting model on colour histograms." in text
        w.emit(parse(ev.NODE_CREATED, {"node_id": 4, "parent_id": None, "step": 4, "stage": "draft", "plan": "p",
                                 "guidance_ids": [1], "components": None, "origin": "agent"}))
        w.emit(parse(ev.LLM_CALL, {"node_id": 4, "role": "draft", "model": "m-1", "tokens_in": 1, "tokens_out": 1,
                             "latency_s": 0.5, "cost": 0.0, "ok": True, "error": None, "messages": [],
                             "reply": "I will draft a gradient-boosting model on colour histograms."}))
        await wait_for(pilot, lambda: "the model is writing" not in screen_text(app), what="the live reply done")
        assert screen.query_one(NodeDetail).query_one(ConversationView).display


async def test_a_node_without_calls_says_so(db, store):
    from tests.demo_session import write_demo_session

    write_demo_session(store, n_nodes=3)
    app = create_app(db, start="console", session_id="demo-0-3", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: len(screen.state.nodes) == 3, what="nodes")
        await select(pilot, screen, 1)
        await pilot.press("7")
        await pilot.pause(0.2)
        text = body_text(app)
        # the demo's draft call is recorded without a node, just before node 1: shown, and said so
        assert "call 1 · draft" in text and "recorded without a node" in text
        assert "call 2 · review · node 1" in text and "parsed review" in text
