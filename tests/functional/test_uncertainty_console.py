"""The console says how sure its figures are and lets the expert choose what ★ follows (issue 20):
the criterion switch (live: a recorded command the next improve follows; replay: a view only),
"too few to judge", intervals on screen, the session summary, and the setup warning."""
from __future__ import annotations

import numpy as np

from engine.agent.commands import apply_command
from engine.agent.policy import decide, policy_rng
from engine.agent.session_config import SessionConfig
from engine.evaluation.metrics import compute_metrics
from engine.session import events as ev
from engine.session import selection
from engine.session import figure_text
from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.criterion import CriterionModal
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.status_bar import StatusBar

from .conftest import screen_text, tree_text, wait_for
from engine.session.event_types import parse
from tests.command_sink import WriterSink
from tests.settle import reads_done
from engine.measures.summary import EvaluationSummary

S = EvaluationSummary.from_payload

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}
SIZES = {"group_0": (120, 30), "group_1": (100, 20), "group_2": (60, 6)}   # FST V–VI: 6 malignant


def _summary(seed: int, separation: dict[str, float]) -> dict:
    """A real measurement with intervals: binormal scores per group on a fixed held-out set."""
    rng = np.random.default_rng(seed)
    y, s, g = [], [], []
    for group, (n, k) in SIZES.items():
        y += [1] * k + [0] * (n - k)
        s += list(rng.normal(separation[group], 1, k)) + list(rng.normal(0, 1, n - k))
        g += [group] * n
    return compute_metrics(np.array(y), 1 / (1 + np.exp(-np.array(s))), np.array(g), intervals=True).summary()


def _session(store, sid="s-sure", best="validation"):
    config = SessionConfig(level="fairness-metric", steps=10, best=best, num_drafts=2, debug_prob=0.0).to_dict()
    return store.create_session(config, instruction="x", coder=CODER, data={"kind": "synth", "path": "p"},
                                session_id=sid)


def _node(w, nid, summary):
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": None, "step": nid, "stage": "draft",
                                   "plan": f"plan {nid}",
                             "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                              "output_head": "", "output_tail": "", "truncated": False}))
    w.emit(parse(ev.REVIEW, {"node_id": nid, "is_bug": False, "summary": "ok", "claimed_metric": None}))
    w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": "validation", "ok": True, "verdict": "ok", "reason": None,
                          "summary": summary, "medfair": {}, "blinded": False}))


# node 1: the best AUC, a poor dark-skin group; node 2: a lower AUC, a good worst group
NODE_1 = {"group_0": 2.4, "group_1": 2.2, "group_2": 0.3}
NODE_2 = {"group_0": 1.5, "group_1": 1.5, "group_2": 1.5}


async def test_the_live_switch_is_a_recorded_command_that_the_next_improve_follows(db, store):
    w = _session(store)
    _node(w, 1, _summary(1, NODE_1))
    _node(w, 2, _summary(2, NODE_2))
    app = create_app(db, start="console", session_id="s-sure", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await wait_for(pilot, lambda: 2 in screen.state.nodes and screen.state.nodes[2].validation is not None)
        assert screen.best == 1 and "★/search validation AUC" in str(screen.query_one(StatusBar).render())
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CriterionModal), what="the criterion choice")
        assert "the next step" in screen_text(app)
        for _ in range(selection.CRITERIA.index("minimax") - selection.CRITERIA.index("validation")):
            await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: bool(store.pending_commands("s-sure")), what="the set_criterion command")
        (cmd,) = store.pending_commands("s-sure")
        assert (cmd["kind"], cmd["payload"]) == ("set_criterion", {"criterion": "minimax"})
        assert screen.best == 1  # ★ moves when the runner records the switch, not before
        apply_command(WriterSink(w), cmd)
        await wait_for(pilot, lambda: screen.best == 2, what="★ on the best worst group")
        assert "★/search worst group AUC" in str(screen.query_one(StatusBar).render())
        recorded = [e for e in store.events("s-sure") if e.kind == ev.CRITERION_SET]
        assert recorded[-1].payload["by"] == "console" and recorded[-1].payload["criterion"] == "minimax"
        decision = decide(w.state, policy_rng(0, w.state.agent_steps), SessionConfig(num_drafts=2, debug_prob=0.0))
        assert (decision.action, decision.node_id) == ("improve", 2)   # the search follows the switch


async def test_in_a_replay_the_switch_is_a_view_only(db, store):
    w = _session(store, sid="s-done")
    _node(w, 1, _summary(1, NODE_1))
    _node(w, 2, _summary(2, NODE_2))
    w.emit(parse(ev.FINAL_CHOICE, selection.final_choice(w.state)))
    w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "done"}))
    app = create_app(db, start="replay", session_id="s-done")
    async with app.run_test(size=(140, 42)) as pilot:
        await reads_done(app, pilot)
        screen = app.screen
        await pilot.press("ctrl+e")   # to the end of the recording
        await wait_for(pilot, lambda: screen.state.status == "finished", what="the end of the replay")
        assert screen.best == 1
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, CriterionModal))
        assert "only what you see here" in screen_text(app)
        await pilot.press("down", "enter")
        await wait_for(pilot, lambda: screen.best == 2, what="★ by minimax, in this view")
        assert not store.pending_commands("s-done") and "(view)" in str(screen.query_one(StatusBar).render())
        assert [e.kind for e in store.events("s-done")].count(ev.CRITERION_SET) == 0


async def test_intervals_too_few_to_judge_and_the_summary(db, store, tmp_path):
    w = _session(store, sid="s-groups")
    _node(w, 1, _summary(1, NODE_1))
    _node(w, 2, _summary(2, NODE_2))
    w.emit(parse(ev.COMPARED, {"split": "validation", "method": "paired bootstrap", "by": {
        "validation": {"leader": 1, "statistic": "auc", "ties": [2], "differences": []}}}))
    app = create_app(db, start="console", session_id="s-groups", poll_interval=0.05)
    async with app.run_test(size=(150, 45)) as pilot:
        screen = app.screen
        await wait_for(pilot, lambda: 2 in screen.state.nodes and screen.state.nodes[2].validation is not None)
        auc, ci = screen.state.nodes[1].val_auc, figure_text.interval(screen.state.nodes[1].validation, "auc")
        half = f"±{(ci[1] - ci[0]) / 2:.2f}".replace("0.", ".")
        assert f"{auc:.2f}".lstrip("0") + f" {half}" in tree_text(app)   # the tree line: .81 ±.05 · gap …
        assert "nodes 1 and 2 cannot be told apart on validation" in screen_text(app)
        assert screen.query_one(Scoreboard).certainty.startswith("nodes 1 and 2")
        await pilot.press("4")   # the Groups tab
        await pilot.pause(0.3)
        groups = screen.query_one(NodeDetail)._groups(screen.state, screen.state.nodes[screen.selected_node])
        from rich.console import Console

        console = Console(width=140, record=True)
        console.print(groups)
        text = console.export_text()
        assert "too few to judge (6 malignant)" in text and "FST V–VI (dark)" in text
        assert "30 of 120" in text and "of 30 missed: ." in text and "95 % interval" in text
        assert "r" not in [b.key for b in app.active_bindings.values() if b.binding.show and b.enabled and
                           b.binding.action == "summary"]
        w.emit(parse(ev.FINAL_CHOICE, selection.final_choice(w.state)))
        w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "done"}))
        await wait_for(pilot, lambda: screen.state.status == "finished")
        await pilot.press("r")
        await wait_for(pilot, lambda: type(app.screen).__name__ == "SummaryModal", what="the summary")
        text = screen_text(app)
        assert "Session summary" in text and "cannot be told apart" in text and "simulated agent" in text
        await pilot.press("w")
        report = db.parent / "reports" / "s-groups.html"
        await wait_for(pilot, lambda: not any(w.group == "report" for w in app.workers) and report.exists(),
                       what="the report, written off the UI thread")
        page = report.read_text()
        assert page.startswith("<!doctype html>") and "cannot be told apart" in page and "simulated agent" in page


async def test_setup_warns_where_a_skin_tone_group_has_too_few_malignant_cases(db, tmp_path):
    app = create_app(db, settings_file=tmp_path / "s.json")
    async with app.run_test(size=(140, 60)) as pilot:
        screen = app.screen
        await pilot.pause(0.3)
        for wid, value in (("#synth-n-train", "300"), ("#synth-n-test", "120")):
            box = screen.query_one(wid)
            box.value = value
        await pilot.pause(0.3)
        text = screen_text(app)
        assert "validation: FST V–VI (dark) has 1 malignant" in text and "too few to judge fairness" in text
        screen.query_one("#synth-n-train").value = "16000"
        screen.query_one("#synth-n-test").value = "656"
        await pilot.pause(0.3)
        assert screen.adequacy == [] and "too few to judge fairness" not in screen_text(app)
