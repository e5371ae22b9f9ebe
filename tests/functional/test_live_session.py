"""A real short offline session started from the setup screen (a detached `befair run --headless`
subprocess), watched, paused, guided, expanded, pruned and resumed to the end."""
from __future__ import annotations

import importlib.util
import os
import signal

import pytest

from engine.session import events as ev

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen

from .conftest import tree_text, wait_for

def _cli_ready() -> bool:
    """`befair run` needs every area's CLI module importable (the parser imports them all)."""
    try:
        from befair_tui.cli import build_parser

        build_parser()
    except Exception:  # noqa: BLE001
        return False
    return importlib.util.find_spec("engine.agent.runner") is not None


pytestmark = pytest.mark.skipif(not _cli_ready(), reason="`befair run` (the session runner's CLI) is not available yet")


def kinds_after(store, sid, seq):
    return [e.kind for e in store.events(sid, seq)]


async def test_start_pause_guide_expand_prune_resume(db, store, tmp_path):
    app = create_app(db, poll_interval=0.1)
    async with app.run_test(size=(120, 34)) as pilot:
        setup = app.screen
        for wid, value in (("#synth-n-train", "240"), ("#synth-n-test", "80"), ("#synth-size", "24"),
                           ("#steps", "4"), ("#step-timeout", "120")):
            setup.query_one(wid).value = value
        setup.query_one("#level-fairness-methods").value = True
        await pilot.pause()
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, ConsoleScreen), what="console")
        console = app.screen
        sid = console.session_id
        proc = app.procs[sid]
        try:
            await wait_for(pilot, lambda: len(console.state.nodes) >= 1 or proc.poll() not in (None, 0),
                           timeout=240, what="first node")
            from befair_tui.launch import log_tail

            assert console.state.nodes, f"the session process failed: {log_tail(db, sid, 20)}"
            assert "simulated agent" in str(console.query_one("#status").render())

            # pause: the command is stored, then consumed by the runner (a `paused` event)
            await pilot.press("p")
            await wait_for(pilot, lambda: console.state.status == "paused", timeout=240, what="paused")
            assert all(c["consumed_at"] for c in store.commands(sid))
            await wait_for(pilot, lambda: console.state.running_node is None, timeout=240, what="step end")
            paused_at = console.state.last_seq
            n_nodes = len(console.state.nodes)

            # guidance: stored as a command, consumed (a guidance event), shown in the tree
            await pilot.press("g", *"reweight dark skin", "enter")
            await wait_for(pilot, lambda: console.state.guidance, timeout=60, what="guidance consumed")
            assert "reweight dark skin" in tree_text(app)

            target = console.selected_node
            await pilot.press("e")
            await wait_for(pilot, lambda: target in console.state.pending_expand, timeout=60, what="expand")
            await pilot.pause(1.0)
            assert len(console.state.nodes) == n_nodes, "no new node starts while paused"
            assert ev.NODE_CREATED not in kinds_after(store, sid, paused_at)

            first = min(console.state.nodes)
            if first != target:
                console._select(first)
                await pilot.press("x")
                await wait_for(pilot, lambda: console.state.nodes[first].pruned, timeout=60, what="prune")

            await pilot.press("p")
            await wait_for(pilot, lambda: console.state.status in ("finished", "stopped", "failed"),
                           timeout=400, what="end of session")
            assert console.state.status == "finished"
            assert console.state.guidance[min(console.state.guidance)].used_by
            assert all(c["consumed_at"] for c in store.commands(sid))
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
