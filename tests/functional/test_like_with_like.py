"""The scoreboard and the plot compare like with like: nodes' held-out DDI-format TEST metrics next
to the published DDI rows and the baselines' test rows; validation apart (key v); generated data
and blinded test metrics said on screen; published rows labelled as such."""
from __future__ import annotations

from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from engine.session import views as compare

from befair_tui.app import create_app
from befair_tui.screens.console import ConsoleScreen
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.scatter import Scatter
from befair_tui.widgets.scoreboard import Scoreboard

from .conftest import region_text, screen_text, wait_for
from engine.session.event_types import parse

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}


def _summary(auc, gap, n=90):
    return {"auc": auc, "auc_gap": gap, "worst_auc": auc - gap / 2,
            "group_auc": {"group_0": auc + gap / 2, "group_1": auc, "group_2": auc - gap / 2}, "n": n}


def session(store, sid, *, kind="synth", blind=False, study=None):
    config = SessionConfig(level="fairness-metric", steps=4, blind_test=blind, study_id=study,
                           best="validation").to_dict()
    return store.create_session(config, instruction="x", coder=CODER, data={"kind": kind, "path": "/data/ws"},
                                session_id=sid)


def measured_node(w, nid, val, test, *, blinded=False):
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": None, "step": nid, "stage": "draft", "plan": "p",
                             "guidance_ids": [], "origin": "agent"}))
    w.emit(parse(ev.EXEC_STARTED, {"node_id": nid, "workdir": "w"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                              "output_head": "", "output_tail": "", "truncated": False}))
    for split, (auc, gap), blind in (("validation", val, False), ("test", test, blinded)):
        w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": split, "ok": True, "verdict": "ok", "reason": None,
                              "summary": _summary(auc, gap), "medfair": {}, "blinded": blind}))


async def _open(app, pilot, n_nodes):
    screen = app.screen
    assert isinstance(screen, ConsoleScreen)
    await wait_for(pilot, lambda: len(screen.state.nodes) == n_nodes and all(
        "test" in n.eval_verdicts for n in screen.state.nodes.values()), what="nodes measured")  # blinded: sealed
    await pilot.pause(0.1)
    return screen


async def test_test_view_compares_test_with_test_and_v_shows_validation_apart(db, store):
    w = session(store, "s-tt")
    measured_node(w, 1, val=(0.80, 0.05), test=(0.66, 0.12))
    measured_node(w, 2, val=(0.70, 0.20), test=(0.61, 0.25))
    app = create_app(db, start="console", session_id="s-tt", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = await _open(app, pilot, 2)
        board, plot = screen.query_one(Scoreboard), screen.query_one(Scatter)
        # test view: the best node's TEST metrics, never its validation ones
        best = [r for r in board.rows if r.kind == "node" and r.chosen]
        assert [(r.node_id, r.auc, r.gap) for r in best] == [(1, 0.66, 0.12)]
        assert sorted(plot.points) == [(1, 0.12, 0.66), (2, 0.25, 0.61)]
        published = [r for r in board.rows if r.kind == "published"]
        assert published and all(r.name.endswith("(published)") and r.source == "published" for r in published)
        assert ("MEDFAIR", 0.097, 0.641, "published") in plot.references
        text = screen_text(app)
        assert "Scoreboard · test (DDI format)" in text and "test AUC" in text
        shown = region_text(app, board)
        assert "MEDFAIR (published)" in shown and ".660" in shown and ".800" not in shown
        assert "test AUC → vs skin-tone AUC gap (test) ↑" in text  # the plot's axes, named: AUC across, gap up
        assert "↑ skin-tone AUC gap (test) · lower is fairer" in text and "test AUC · higher is better →" in text
        assert "● node ★ best 1 published" in text  # a legend for every marker drawn (published: numbered)
        assert compare.SYNTH_NOTE in text  # generated data: said where the numbers are
        assert text.count(compare.SYNTH_NOTE) == 2  # scoreboard and plot
        assert "v: show validation" in text

        await pilot.press("v")
        await pilot.pause(0.1)
        best = [r for r in board.rows if r.kind == "node" and r.chosen]
        assert [(r.node_id, r.auc, r.gap) for r in best] == [(1, 0.80, 0.05)]
        assert not [r for r in board.rows if r.kind == "published"]  # published rows are test only
        assert sorted(plot.points) == [(1, 0.05, 0.80), (2, 0.20, 0.70)]
        assert not [r for r in plot.references if r[3] == "published"]
        text = screen_text(app)
        assert "Scoreboard · validation" in text and "val AUC" in text and ".800" in region_text(app, board)
        assert "validation AUC → vs skin-tone AUC gap (validation) ↑" in text
        assert compare.SYNTH_NOTE not in text
        assert compare.PUBLISHED_NOTE + " (key v)" in " ".join(line.plain.strip() for line in board.lines)
        await pilot.press("v")
        await pilot.pause(0.1)
        assert screen.split == "test" and board.split == "test" and plot.split == "test"


async def test_blinded_test_metrics_are_hidden_with_the_reason_then_revealed_at_the_end(db, store):
    w = session(store, "s-blind", kind="workspace", blind=True)
    measured_node(w, 1, val=(0.80, 0.05), test=(0.66, 0.12), blinded=True)
    app = create_app(db, start="console", session_id="s-blind", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = await _open(app, pilot, 1)
        board, plot = screen.query_one(Scoreboard), screen.query_one(Scatter)
        assert plot.points == []  # nothing for nodes on the test plot
        (row,) = [r for r in board.rows if r.kind == "node"]
        assert row.auc is None and row.note == compare.BLINDED_NOTE
        text = screen_text(app)
        assert "test metrics hidden until the session ends" in text
        assert "no nodes shown: test metrics hidden until the session ends" in text
        assert ".660" not in text and "hidden" in region_text(app, board)
        assert compare.SYNTH_NOTE not in text  # real (workspace) data: no such note
        # validation is never blinded
        await pilot.press("v")
        await pilot.pause(0.1)
        assert [(r.auc, r.gap) for r in board.rows if r.kind == "node"] == [(0.80, 0.05)]
        await pilot.press("v")
        w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}))
        await wait_for(pilot, lambda: screen.state.status == "finished")
        await pilot.pause(0.1)
        assert plot.points == [(1, 0.12, 0.66)]
        assert ".660" in region_text(app, board) and compare.BLINDED_NOTE not in screen_text(app)


async def test_a_study_keeps_test_metrics_blind_after_the_end(db, store):
    w = session(store, "s-study", kind="workspace", blind=True, study="st-1")
    measured_node(w, 1, val=(0.80, 0.05), test=(0.66, 0.12), blinded=True)
    w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}))
    app = create_app(db, start="console", session_id="s-study", poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = await _open(app, pilot, 1)
        await wait_for(pilot, lambda: screen.state.status == "finished")
        assert screen.query_one(Scatter).points == []
        text = screen_text(app)
        assert compare.STUDY_BLINDED_NOTE in text and ".660" not in text


async def test_at_80_columns_the_scoreboard_says_test_and_generated_data(db, store):
    w = session(store, "s-80")
    measured_node(w, 1, val=(0.80, 0.05), test=(0.66, 0.12))
    app = create_app(db, start="console", session_id="s-80", poll_interval=0.05)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await _open(app, pilot, 1)
        await pilot.pause(0.2)
        text = screen_text(app)
        plot = screen.query_one(ComparisonPlot)
        assert plot.display and plot.compact and "-narrow" in screen.classes  # a compact plot, not none
        board = screen.query_one(Scoreboard)
        assert "test (DDI format)" in text and compare.SYNTH_NOTE in " ".join(line.plain for line in board.lines)
        assert "★ node 1" in text and ".660" in text and "? Help" in text, text


def test_published_rows_keep_the_experts_and_this_level_only():
    from baselines.reference import load_reference_rows

    names = [p["name"] for p in compare.published_points(load_reference_rows(), "fairness-hint")]
    assert names == ["Dermatologists", "MEDFAIR", "MEDFAIR-dedup", "MEDFAIR-filtered", "AIDE · fairness-hint",
                     "MLZero · fairness-hint"]


def test_same_data_reads_the_synth_cache_layout():
    from engine.session.state import SessionState

    state = SessionState(data={"kind": "synth", "path": "/c/synthderm/s0-n2000-t656-px96-workspace"})
    assert compare.same_data("/c/synthderm/s0-n2000-t656-px96", state) is True
    assert compare.same_data("/c/synthderm/s0-n400-t656-px48", state) is False
    assert compare.same_data("", state) is None
