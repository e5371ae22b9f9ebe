"""One stored session, rendered on every surface: the console's tree, node panel and scoreboard,
the headless progress lines, `befair show` (text and --json) and the export (tree.json,
nodes.csv). They must agree on the best node by each criterion (a pruned node with the highest
figures and a failed node with the highest claim are never chosen), on whether test metrics are
visible, on the badges and on each node's one-line summary, and all of it must be the truth
written below by hand, not only each other.

Three states of the same session: running with test metrics blinded (hidden from everyone but a
researcher), finished (revealed), and finished in a study (kept blind).
"""
from __future__ import annotations

import csv
import io
import json
import subprocess
import sys

import pytest
from rich.console import Console

from engine.agent.headless import Progress, node_line as headless_line
from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from engine.session import selection
from engine.session import views
from engine.session.state import apply, new_state

from befair_tui.app import create_app
from befair_tui.cli import main
from befair_tui.screens.console import ConsoleScreen
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.search_tree import SearchTree

from .conftest import wait_for
from engine.session.event_types import parse

CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}
# The truth about the session below, by hand.
BEST = {"claimed": 1, "validation": 5, "minimax": 4}          # node 2 (pruned) and 3 (failed) never
CHOICES = {**BEST, "robust": None}   # robust: none of these nodes has intervals (no predictions kept)
BADGES = {1: ["ST", "PG", "≠"], 2: ["RW"], 3: ["!"], 4: ["PA"], 5: ["RW", "UP", "G"], 6: ["G"]}
TEST_AUC = {1: 0.6611, 2: 0.8512, 4: 0.7713, 5: 0.7214}       # appear nowhere else
STATES = [("running", None), ("finished", None), ("finished", "st-1")]


def _node(w, nid, parent, stage, *, status="ok", claimed=None, groups=None, flags=(), claim=None, gids=()):
    w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": parent, "step": nid, "stage": stage,
                                   "plan": f"plan {nid}",
                             "guidance_ids": list(gids), "components": None, "origin": "agent"}))
    w.emit(parse(ev.CODE, {"node_id": nid, "code": f"print({nid})\n"}))
    w.emit(parse(ev.EXEC_STARTED, {"node_id": nid, "workdir": "w"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": status, "exit_code": 0 if status == "ok" else 1,
                              "exec_time": 2.0 + nid, "exc_type": "KeyError" if status == "buggy" else None,
                              "output_head": "", "output_tail": "", "truncated": False}))
    w.emit(parse(ev.REVIEW, {"node_id": nid, "is_bug": status != "ok", "summary": "s", "claimed_metric": claimed}))
    if groups:
        val = {"auc": sum(groups) / 3, "worst_auc": min(groups), "best_auc": max(groups),
               "auc_gap": max(groups) - min(groups), "n": 90,
               "group_auc": {f"group_{i}": g for i, g in enumerate(groups)}}
        test = {**val, "auc": TEST_AUC[nid], "auc_gap": 0.1}
        for split, summary in (("validation", val), ("test", test)):
            w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": split, "ok": True, "verdict": "ok", "reason": None,
                                  "summary": summary, "medfair": {}, "blinded": split == "test"}))
    flag_names = {v: k for k, v in views.AUDIT_BADGES.items()}
    w.emit(parse(ev.AUDITED, {"node_id": nid, "flags": {flag_names[f]: True for f in flags},
                        "evidence": {flag_names[f]: f"line for {f}" for f in flags}, "claim": claim}))


def write_session(store, sid, *, finished: bool, study: str | None) -> None:
    config = SessionConfig(level="fairness-metric", steps=6, blind_test=True, study_id=study,
                           best="validation").to_dict()
    w = store.create_session(config, instruction="x", coder=CODER, data={"kind": "synth", "path": "p"},
                             session_id=sid)
    _node(w, 1, None, "draft", claimed=0.80, groups=(0.75, 0.70, 0.65), flags=("ST", "PG"),
          claim={"claimed": 0.80, "measured": 0.70, "difference": 0.10, "unsupported": False})
    _node(w, 2, 1, "improve", claimed=0.95, groups=(0.95, 0.90, 0.85), flags=("RW",))  # the best, then pruned
    _node(w, 3, None, "draft", status="buggy", claimed=0.99,
          claim={"claimed": 0.99, "measured": None, "unsupported": True, "reason": "no run printed 0.99"})
    _node(w, 4, 1, "improve", claimed=0.75, groups=(0.81, 0.80, 0.79), flags=("PA",))
    w.emit(parse(ev.GUIDANCE, {"guidance_id": 1, "text": "reweight dark skin", "scope": "global", "node_id": None,
                         "by": "u", "command_id": None}))
    _node(w, 5, None, "draft", claimed=0.70, groups=(0.90, 0.82, 0.74), flags=("RW", "UP"), gids=[1])
    _node(w, 6, 3, "debug", status="timeout", gids=[1])
    w.emit(parse(ev.PRUNED, {"node_id": 2, "by": "u", "command_id": None}))
    if finished:
        w.emit(parse(ev.FINAL_CHOICE, {**{f"by_{c}": n for c, n in BEST.items()},
                                 "reasons": {c: f"node {n} by {c}" for c, n in BEST.items()}}))
        w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "step budget used"}))


def cli(*args: str) -> str:
    out = io.StringIO()
    stdout, sys.stdout = sys.stdout, out
    try:
        assert main(list(args)) == 0
    finally:
        sys.stdout = stdout
    return out.getvalue()


def headless(store, sid) -> tuple[str, list[str]]:
    """The headless progress fed the stored events, as `befair run --headless` is fed the live
    ones; and each audited node's summary at that moment (what it must have printed)."""
    out, state, expected = io.StringIO(), new_state(sid), []
    progress = Progress(out)
    for event in store.events(sid):
        apply(state, event)
        progress(event, state)
        if event.kind == ev.AUDITED:
            expected.append(views.node_line(state, state.nodes[event.payload["node_id"]]))
    return out.getvalue(), expected


def plain(renderable) -> str:
    console = Console(width=120, file=io.StringIO(), color_system=None)
    console.print(renderable)
    return console.file.getvalue()


@pytest.mark.parametrize("status, study", STATES, ids=["running-blinded", "finished-revealed", "study-kept-blind"])
async def test_every_surface_agrees(db, store, tmp_path, status, study):
    sid = f"agree-{status}-{study or 'none'}"
    write_session(store, sid, finished=status == "finished", study=study)
    visible = status == "finished" and study is None
    state = store.state(sid)
    summaries = {nid: views.node_line(state, node) for nid, node in state.nodes.items()}

    # the truth, in the presentation model itself
    assert views.final_choices(state) == CHOICES
    assert {nid: views.audit_badges(n) for nid, n in state.nodes.items()} == BADGES
    assert [nid for nid, line in summaries.items() if "★ best" in line] == [BEST["validation"]]
    assert "✂ pruned" in summaries[2] and "bug: KeyError" in summaries[3]
    for nid, auc in TEST_AUC.items():
        assert (f"test {views.fmt(auc)}" in summaries[nid]) is visible
        assert ("test hidden" in summaries[nid]) is not visible

    # `befair show`, text: the tree's lines are the summaries; best per criterion; comparison
    text = cli("show", sid, "--db", str(db))
    for line in summaries.values():
        assert line in text
    assert f"★ follows validation: node {BEST['validation']}" in text
    assert ", ".join(f"{c} → {'–' if n is None else n}" for c, n in CHOICES.items()) in text
    assert all((views.fmt(auc) in text) is visible for auc in TEST_AUC.values())
    assert ("test metrics:" in text) is not visible  # the reason they are hidden, said once

    # `befair show --json`
    data = json.loads(cli("show", sid, "--json", "--db", str(db)))
    assert data["final_choice"] == CHOICES and data["best_node"] == BEST["validation"]
    assert data["visibility"]["test_hidden"] is not visible
    nodes = {n["node_id"]: n for n in data["nodes"]}
    assert {nid: n["summary"] for nid, n in nodes.items()} == summaries
    assert {nid: n["audit"]["badges"] for nid, n in nodes.items()} == BADGES
    assert {nid: (n["test"] or {}).get("auc") for nid, n in nodes.items() if nid in TEST_AUC} == \
        ({nid: auc for nid, auc in TEST_AUC.items()} if visible else dict.fromkeys(TEST_AUC))
    (chosen,) = [r for r in data["comparison"]["test"]["rows"] if r["chosen"]]
    assert chosen["node_id"] == BEST["validation"] and chosen["hidden"] is not visible
    # a researcher sees them whatever the state
    researcher = json.loads(cli("show", sid, "--json", "--unblind", "--db", str(db)))
    assert {n["node_id"]: n["test"]["auc"] for n in researcher["nodes"] if n["test"]} == TEST_AUC

    # the export: tree.json and nodes.csv
    cli("export", sid, "--out", str(tmp_path / "x"), "--db", str(db))
    tree = json.loads((tmp_path / "x" / "tree.json").read_text())
    assert tree["final_choice"] == CHOICES and tree["export"]["best_node"] == BEST["validation"]
    assert {n["node_id"]: n["summary"] for n in tree["nodes"]} == summaries
    rows = {int(r["node_id"]): r for r in csv.DictReader((tmp_path / "x" / "nodes.csv").open())}
    assert {nid for nid, r in rows.items() if r["best"] == "1"} == {BEST["validation"]}
    assert {nid: r["summary"] for nid, r in rows.items()} == summaries
    assert {nid: bool(rows[nid]["test_auc"]) for nid in TEST_AUC} == dict.fromkeys(TEST_AUC, visible)
    assert {nid: rows[nid]["test_blinded"] for nid in TEST_AUC} == dict.fromkeys(TEST_AUC, "0" if visible else "1")
    assert int(rows[2]["pruned"]) == 1 and rows[1]["reads_skin_tone"] == "1" and rows[4]["pareto_selection"] == "1"

    # the headless progress: one line per node, the summaries; the final choice as recorded
    printed, expected = headless(store, sid)
    assert len(expected) == 6 and all(line in printed for line in expected)  # each node as it was then
    for nid, node in state.nodes.items():
        assert headless_line(state, node).strip().startswith(summaries[nid])
    if status == "finished":
        own = selection.current_criterion(state)
        assert "final choice: " + "; ".join(f"{'★ ' if c == own else ''}{c}: node {n} by {c}"
                                            for c, n in BEST.items()) in printed

    # the console: tree, scoreboard, node panel
    app = create_app(db, start="console", session_id=sid, poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        screen = app.screen
        assert isinstance(screen, ConsoleScreen)
        await wait_for(pilot, lambda: len(screen.state.nodes) == 6 and screen.state.status == state.status
                       and 2 in screen.state.pruned_ids(), what="the session folded")
        await pilot.pause(0.2)
        assert screen.best == BEST["validation"]
        tree = screen.query_one(SearchTree)
        for nid, node in screen.state.nodes.items():
            label = tree.item_for(nid).label.plain
            assert label == views.node_summary(state, node, best=BEST["validation"]).compact(), label
            assert label.startswith(summaries[nid].split("  ")[0].split(" of ")[0].replace(" (imported)", ""))
            assert ("★ best" in label) is (nid == BEST["validation"])
            assert all(f"[{b}]" in label for b in BADGES[nid])
        board = screen.query_one(Scoreboard)
        node_rows = {r.node_id: r for r in board.rows if r.kind == "node"}
        assert {nid: r.criteria for nid, r in node_rows.items()} == {n: [c] for c, n in BEST.items()}
        assert [nid for nid, r in node_rows.items() if r.chosen] == [BEST["validation"]]
        for nid, r in node_rows.items():
            assert r.hidden is not visible and (r.auc == TEST_AUC[nid] if visible else r.auc is None)
        detail = screen.query_one(NodeDetail)
        for nid in TEST_AUC:
            groups = plain(detail._groups(screen.state, screen.state.nodes[nid]))
            assert (views.fmt(TEST_AUC[nid]) in groups) is visible and ("hidden" in groups) is not visible
            audit = plain(detail._audit(screen.state.nodes[nid]))
            assert all(f"✓ {views.BADGE_HELP[b]}" in audit for b in BADGES[nid] if b in views.AUDIT_BADGES.values())


def test_befair_show_in_a_real_process_prints_what_the_model_says(db, store):
    write_session(store, "agree-proc", finished=True, study=None)
    proc = subprocess.run([sys.executable, "-m", "befair_tui.cli", "show", "agree-proc", "--db", str(db)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    state = store.state("agree-proc")
    lines = proc.stdout.splitlines()
    assert lines[1] == views.settings_line(state)
    assert views.tree_lines(state) == lines[2:2 + len(views.tree_lines(state))]
