"""The Groups tab says, in words, whether a node's skin-tone groups can be told apart (issue 34):
real measurements with intervals, a real session database, the console driven by Pilot."""
from __future__ import annotations

import numpy as np

from engine.agent.session_config import SessionConfig
from engine.evaluation.metrics import compute_metrics
from engine.session import events as ev
from engine.session.event_types import parse
from engine.session.views import group_tests

from befair_tui.app import create_app
from befair_tui.widgets.text_pane import TextPane

from .conftest import wait_for

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}
SIZES = {"group_0": (208, 49), "group_1": (241, 74), "group_2": (207, 48)}   # the default test split's


def _summary(seed: int, separation: dict[str, float]) -> dict:
    """Binormal scores per group (malignant shifted by `separation`), measured with intervals."""
    rng = np.random.default_rng(seed)
    y, s, g = [], [], []
    for group, (n, k) in SIZES.items():
        y += [1] * k + [0] * (n - k)
        s += list(rng.normal(separation[group], 1, k)) + list(rng.normal(0, 1, n - k))
        g += [group] * n
    return compute_metrics(np.array(y), 1 / (1 + np.exp(-np.array(s))), np.array(g), intervals=True).summary()


def _node(w, nid: int, summary: dict) -> None:
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": None, "step": nid, "stage": "draft",
                                   "plan": f"plan {nid}", "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": "ok", "exit_code": 0, "exec_time": 1.0,
                                    "exc_type": None, "output_head": "", "output_tail": "", "truncated": False}))
    w.emit(parse(ev.REVIEW, {"node_id": nid, "is_bug": False, "summary": "ok", "claimed_metric": None}))
    w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": "validation", "ok": True, "verdict": "ok", "reason": None,
                                "summary": summary, "medfair": {}, "blinded": False}))


async def test_the_groups_tab_says_when_skin_tone_groups_cannot_be_told_apart(db, store):
    alike = _summary(1, {"group_0": 1.5, "group_1": 1.5, "group_2": 1.5})
    assert alike["groups_apart"]["apart"] is False    # the same separation in every group
    config = SessionConfig(level="fairness-metric", steps=10, num_drafts=2, debug_prob=0.0).to_dict()
    w = store.create_session(config, instruction="x", coder=CODER, data={"kind": "synth", "path": "p"},
                             session_id="s-apart")
    _node(w, 1, alike)
    app = create_app(db, start="console", session_id="s-apart", poll_interval=0.05)
    async with app.run_test(size=(160, 60)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: 1 in screen.state.nodes and screen.state.nodes[1].validation is not None)
        await pilot.press("4")   # the Groups tab
        pane = screen.query_one("#groups", TextPane)
        await wait_for(pilot, lambda: group_tests.CANNOT_TELL in " ".join(pane.plain.split()),
                       what="the groups' test in words")
        shown = " ".join(pane.plain.split())
        assert "their AUCs' differences all include 0" in shown
        assert "dark − light" in shown and "dark − medium" in shown
        assert "bootstrap max-t test of equal skin-tone group AUCs, p = ." in shown


async def test_a_node_whose_dark_skin_group_is_worse_says_the_groups_differ(db, store):
    worse = _summary(2, {"group_0": 2.4, "group_1": 2.2, "group_2": 0.3})
    config = SessionConfig(level="fairness-metric", steps=10, num_drafts=2, debug_prob=0.0).to_dict()
    w = store.create_session(config, instruction="x", coder=CODER, data={"kind": "synth", "path": "p"},
                             session_id="s-differ")
    _node(w, 1, worse)
    app = create_app(db, start="console", session_id="s-differ", poll_interval=0.05)
    async with app.run_test(size=(160, 60)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: 1 in screen.state.nodes and screen.state.nodes[1].validation is not None)
        await pilot.press("4")
        pane = screen.query_one("#groups", TextPane)
        await wait_for(pilot, lambda: group_tests.TOLD_APART in " ".join(pane.plain.split()),
                       what="the groups' test in words")
        assert group_tests.CANNOT_TELL not in " ".join(pane.plain.split())
