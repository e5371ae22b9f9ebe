"""The console against a real session database, with the runner's side played by a SessionWriter:
nodes arrive live, steering keys store commands, consumed commands show up as events."""
from __future__ import annotations

from engine.agent.session_config import SessionConfig
from engine.session import events as ev

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen

from .conftest import screen_text, tree_text, wait_for
from engine.session.event_types import parse

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}


def new_session(store, sid="s-live"):
    config = SessionConfig(level="fairness-hint", steps=4, best="validation").to_dict()
    return store.create_session(config, instruction="x", coder=CODER, data={"kind": "synth", "path": "p"},
                                session_id=sid)


def add_node(w, nid, parent=None, stage="draft", guidance=(), auc=0.7, gap=0.1):
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": parent, "step": nid, "stage": stage,
                             "plan": f"plan {nid}", "guidance_ids": list(guidance), "origin": "agent"}))
    w.emit(parse(ev.CODE, {"node_id": nid, "code": f"print('node {nid}')\n"}))
    w.emit(parse(ev.EXEC_STARTED, {"node_id": nid, "workdir": "w"}))
    w.emit(parse(ev.OUTPUT, {"node_id": nid, "text": f"training node {nid}\n", "stream": "stdout"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": "ok", "exit_code": 0, "exec_time": 1.0,
                              "exc_type": None, "output_head": f"training node {nid}\n", "output_tail": "",
                              "truncated": False}))
    w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": "validation", "ok": True, "verdict": "ok", "reason": None,
                          "summary": {"auc": auc, "auc_gap": gap, "worst_auc": auc - gap / 2,
                                      "group_auc": {"group_0": auc, "group_1": auc, "group_2": auc - gap},
                                      "n": 90},
                          "medfair": {}, "blinded": False}))
    w.emit(parse(ev.AUDITED, {"node_id": nid, "flags": {"reads_skin_tone": True, "reweighting": nid % 2 == 0},
                        "evidence": {"reads_skin_tone": "df['skin_tone']"}, "claim": None}))


def consume(store, w, kind, event_kind, payload):
    (cmd,) = [c for c in store.pending_commands(w.session_id) if c["kind"] == kind]
    w.emit(parse(event_kind, {**payload, "by": "console", "command_id": cmd["id"]}), consumes=cmd)
    return cmd


async def test_live_events_and_steering(db, store):
    w = new_session(store)
    app = create_app(db, start="console", session_id="s-live", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await wait_for(pilot, lambda: screen.state.status == "running", what="session_started")
        assert "simulated agent" in screen_text(app)

        add_node(w, 1, auc=0.70, gap=0.12)
        await wait_for(pilot, lambda: 1 in screen.state.nodes and screen.state.nodes[1].status == "ok")
        assert "1 draft .700 / .120" in tree_text(app)
        assert "[ST]" in tree_text(app)

        # pause: a command is stored; the runner consumes it with a `paused` event
        await pilot.press("p")
        await pilot.pause()
        assert [c["kind"] for c in store.pending_commands("s-live")] == ["pause"]
        consume(store, w, "pause", ev.PAUSED, {})
        await wait_for(pilot, lambda: screen.state.status == "paused")
        assert "PAUSED" in screen_text(app)
        assert store.pending_commands("s-live") == []

        # guidance (global): typed, stored as a command, consumed, then shown in the tree
        await pilot.press("g")
        await pilot.press(*"reweight dark skin")
        await pilot.press("enter")
        await pilot.pause()
        (cmd,) = store.pending_commands("s-live")
        assert cmd["kind"] == "guide" and cmd["payload"] == {"text": "reweight dark skin"}
        w.emit(parse(ev.GUIDANCE, {"guidance_id": 1, "text": "reweight dark skin", "scope": "global",
                             "node_id": None, "by": "console", "command_id": cmd["id"]}), consumes=cmd)
        await wait_for(pilot, lambda: "reweight dark skin" in tree_text(app), what="guidance in tree")

        # node-scoped guidance with Ctrl+N for the selected node
        await pilot.press("g")
        await pilot.press(*"try upsampling")
        await pilot.press("ctrl+n")
        await pilot.pause()
        (cmd,) = store.pending_commands("s-live")
        assert cmd["payload"] == {"text": "try upsampling", "node_id": 1}
        consume(store, w, "guide", ev.GUIDANCE, {"guidance_id": 2, "text": "try upsampling", "scope": "node",
                                                  "node_id": 1})

        # expand and prune the selected node
        await pilot.press("e")
        await pilot.pause()
        assert store.pending_commands("s-live")[-1]["payload"] == {"node_id": 1}
        consume(store, w, "expand", ev.EXPAND_REQUESTED, {"node_id": 1})
        await wait_for(pilot, lambda: "⇢ next" in tree_text(app), what="expand marker")

        # resume; the next node carries both guidance entries and takes effect where it shows
        await pilot.press("p")
        await pilot.pause()
        consume(store, w, "resume", ev.RESUMED, {})
        add_node(w, 2, parent=1, stage="improve", guidance=(1, 2), auc=0.74, gap=0.06)
        await wait_for(pilot, lambda: 2 in screen.state.nodes and screen.state.nodes[2].status == "ok")
        text = tree_text(app)
        assert "→ node 2" in text and "★ best" in text
        assert text.index("reweight dark skin") < text.index("2 improve")
        assert "⇢ next" not in text

        for _ in range(4):  # choose node 1 by hand (past the guidance entries), then prune it
            await pilot.press("up")
            await pilot.pause()
            if screen.selected_node == 1:
                break
        tree = screen.query_one("SearchTree")
        assert screen.selected_node == 1, (app.focused, tree.cursor_node, tree.cursor_line)
        sel = screen.selected_node
        await pilot.press("x")  # asks first
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        consume(store, w, "prune", ev.PRUNED, {"node_id": sel})
        await wait_for(pilot, lambda: "✂ pruned" in tree_text(app), what="pruned marker")

        await pilot.press("plus")  # asks how many; Enter takes the default, 5
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert store.pending_commands("s-live")[-1] == {**store.pending_commands("s-live")[-1],
                                                        "kind": "set_budget", "payload": {"steps": 9}}

        w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}))
        await wait_for(pilot, lambda: screen.state.status == "finished")
        assert "FINISHED" in screen_text(app)
        assert not screen.live


async def test_output_streams_into_the_open_node(db, store):
    w = new_session(store, "s-out")
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "p",
                             "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_STARTED, {"node_id": 1, "workdir": "w"}))
    app = create_app(db, start="console", session_id="s-out", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.selected_node == 1)
        for i in range(25):  # while the Plan tab is open: kept, drawn when the Output tab opens
            w.emit(parse(ev.OUTPUT, {"node_id": 1, "text": f"epoch {i}\n", "stream": "stdout"}))
        await wait_for(pilot, lambda: "epoch 24" in screen.state.nodes[1].live_output, what="output folded")
        from textual.widgets import Log

        log = screen.query_one("#output", Log)
        assert not log.lines
        await pilot.press("3")
        await wait_for(pilot, lambda: "epoch 24" in "\n".join(log.lines), what="output so far")
        for i in range(25, 50):  # with the Output tab open: streamed in as it comes
            w.emit(parse(ev.OUTPUT, {"node_id": 1, "text": f"epoch {i}\n", "stream": "stdout"}))
        await wait_for(pilot, lambda: "epoch 49" in "\n".join(log.lines), what="streamed output")
        assert [line for line in log.lines if line.startswith("epoch")] == [f"epoch {i}" for i in range(50)]
        assert "running" in tree_text(app)


async def test_failed_node_shows_its_reason(db, store):
    w = new_session(store, "s-bug")
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "p",
                             "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": 1, "status": "buggy", "exit_code": 1, "exec_time": 1.0,
                              "exc_type": "KeyError", "output_head": "Traceback...\nKeyError: 'label'\n",
                              "output_tail": "", "truncated": False}))
    app = create_app(db, start="console", session_id="s-bug", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: 1 in app.screen.state.nodes)
        await pilot.pause(0.1)
        assert "bug: KeyError" in tree_text(app)


async def test_palette_lists_every_binding(db, store):
    new_session(store, "s-pal")
    app = create_app(db, start="console", session_id="s-pal", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.status == "running")
        commands = {c.title: c.help for c in app.get_system_commands(app.screen)}
        for title, key in (("Pause", "p"), ("Stop", "s"), ("Guide", "g"), ("Expand", "e"), ("Prune", "x"),
                           ("Steps", "+")):
            assert commands.get(title) == f"key {key}", title  # the key in words, no internal id
        for binding in ConsoleScreen.BINDINGS:
            assert binding.id


async def test_quit_during_live_session_asks(db, store):
    new_session(store, "s-quit")
    app = create_app(db, start="console", session_id="s-quit", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.status == "running")
        await pilot.press("q")
        await pilot.pause()
        from befair_tui.screens.confirm import QuitModal

        assert isinstance(app.screen, QuitModal)
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ConsoleScreen)
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("s")
        await pilot.pause()
    assert [c["kind"] for c in store.pending_commands("s-quit")] == ["stop"]


async def test_stop_needs_confirmation(db, store):
    new_session(store, "s-stop")
    app = create_app(db, start="console", session_id="s-stop", poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: app.screen.state.status == "running")
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause()
        assert store.pending_commands("s-stop") == []
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert store.pending_commands("s-stop")[0]["payload"] == {"interrupt": True}


async def test_open_unknown_session_shows_reason(db, store):
    app = create_app(db, start="console", session_id="nope")
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        assert "nope" in screen_text(app)
        assert "Traceback" not in screen_text(app)


async def test_a_session_process_that_dies_is_reported(db, store):
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"])
    app = create_app(db, start="console", session_id="ghost", proc=proc, poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: any("exited (code 3)" in n.message for n in app._notifications),
                       what="exit notification")
        assert "Traceback" not in screen_text(app)


async def test_each_tab_shows_the_node_followed_when_it_is_opened(db, store):
    """Only the open tab is redrawn as the console follows new nodes; every other tab is drawn for
    the node shown when it is opened, never for the node it last drew."""
    from befair_tui.widgets.text_pane import TextPane

    w = new_session(store, "s-tabs")
    add_node(w, 1)
    app = create_app(db, start="console", session_id="s-tabs", poll_interval=0.05)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: screen.selected_node == 1)
        await pilot.press("2")
        code = screen.query_one("#code", TextPane)
        await wait_for(pilot, lambda: "print('node 1')" in code.plain, what="node 1's code")
        add_node(w, 2, parent=1, stage="improve")  # with the Code tab open: redrawn at once
        await wait_for(pilot, lambda: "print('node 2')" in code.plain, what="node 2's code")
        await pilot.press("1")
        plan = screen.query_one("#plan", TextPane)
        await wait_for(pilot, lambda: "plan 2" in plan.plain, what="node 2's plan")
        add_node(w, 3, parent=1, stage="improve")  # the Code and Diff tabs are closed meanwhile
        await wait_for(pilot, lambda: "plan 3" in plan.plain, what="node 3's plan")
        assert "print('node 2')" in code.plain  # not redrawn while closed...
        await pilot.press("2")
        await wait_for(pilot, lambda: "print('node 3')" in code.plain, what="node 3's code on opening")
        await pilot.press("6")
        diff = screen.query_one("#diff", TextPane)
        await wait_for(pilot, lambda: "node 1" in diff.plain and "node 3" in diff.plain, what="diff 1 → 3")
        assert "-print('node 1')" in diff.plain and "+print('node 3')" in diff.plain
