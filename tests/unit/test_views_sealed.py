"""Blinded test metrics: sealed out of `events` and `nodes` while hidden (a participant reading the
database finds no figure), revealed at the end unless a study keeps them blind, and given back
to a researcher (--unblind) through the same fold."""
from __future__ import annotations

import json
import sqlite3

from engine.session import events as ev
from engine.session import views
from tests.demo_session import write_demo_session
from engine.session.sealed import open_sealed
from engine.session.state import fold
from engine.session.store import SessionStore
from befair_tui.cli import main
from engine.session.event_types import parse

TEST_AUC = 0.6137  # a figure that appears nowhere else in the session


def _blinded_session(store: SessionStore, sid: str, *, study: str | None = None):
    w = store.create_session({"level": "base", "steps": 2, "best": "validation", "blind_test": True,
                              "study_id": study}, instruction="x", coder={"name": "offline"}, data={},
                             session_id=sid)
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "",
                             "guidance_ids": [], "components": None, "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": 1, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                              "output_head": "", "output_tail": "", "truncated": False}))
    for split, auc in (("validation", 0.7), ("test", TEST_AUC)):
        summary = {"auc": auc, "worst_auc": 0.5, "best_auc": 0.8, "auc_gap": 0.3,
                   "group_auc": {"group_0": 0.8, "group_2": 0.5}, "n": 40}
        w.emit(parse(ev.EVALUATED, {"node_id": 1, "split": split, "ok": True, "verdict": "ok", "reason": None,
                              "summary": summary, "medfair": {"AUC": auc}, "blinded": split == "test"}))
    return w


def _participant_can_read(path, sid: str) -> bool:
    """Does the figure appear in any table a participant is shown (events, nodes, sessions)?"""
    conn = sqlite3.connect(path)
    try:
        rows = [*conn.execute("select payload from events where session_id = ?", [sid]),
                *conn.execute("select * from nodes where session_id = ?", [sid]),
                *conn.execute("select * from sessions where id = ?", [sid])]
    finally:
        conn.close()
    return str(TEST_AUC) in json.dumps(rows, default=str)


def test_a_blinded_test_figure_is_sealed_while_the_session_runs(tmp_path):
    store = SessionStore(tmp_path / "s.db")
    w = _blinded_session(store, "run")
    assert not _participant_can_read(store.path, "run")
    (sealed_payload,) = [e.payload for e in store.events("run")
                         if e.kind == ev.EVALUATED and e.payload["split"] == "test"]
    assert sealed_payload["sealed"] and "summary" not in sealed_payload and sealed_payload["verdict"] == "ok"
    assert w.state.nodes[1].test is None  # the writer's own state holds no figure either
    participant = open_sealed(store, "run")
    assert views.test_withheld(participant, participant.nodes[1])
    assert "test hidden" in views.node_line(participant, participant.nodes[1])
    researcher = open_sealed(store, "run", unblind=True)
    assert researcher.nodes[1].test.auc == TEST_AUC and researcher.nodes[1].medfair["test"] == {"AUC": TEST_AUC}
    assert "test .614" in views.node_line(researcher, researcher.nodes[1], unblind=True)


def test_the_end_of_the_session_reveals_them_to_everyone(tmp_path):
    store = SessionStore(tmp_path / "s.db")
    w = _blinded_session(store, "end")
    w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "budget"}))
    kinds = [e.kind for e in store.events("end")]
    assert kinds[-2:] == [ev.EVALUATED, ev.SESSION_FINISHED]  # revealed before the end is recorded
    state = store.state("end")
    assert state.nodes[1].test.auc == TEST_AUC and views.test_visible(state, state.nodes[1])
    assert store.nodes("end")[0]["test_auc"] == TEST_AUC and w.state.nodes[1].test.auc == TEST_AUC
    assert fold(store.events("end")) == open_sealed(store, "end", unblind=True)  # nothing left sealed
    # revealed once, by the event just before session_finished
    revealed = store.db.execute("select revealed_seq from sealed_metrics where session_id = 'end'").fetchall()
    assert len(revealed) == 1 and revealed[0][0] == len(kinds) - 1


def test_a_study_keeps_them_sealed_after_the_end_and_a_researcher_unblinds(tmp_path, capsys):
    store = SessionStore(tmp_path / "s.db")
    w = _blinded_session(store, "study", study="st-1")
    w.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "reason": "budget"}))
    assert not _participant_can_read(store.path, "study")
    state = store.state("study")
    assert state.nodes[1].test is None and views.visibility(state)["note"] == views.STUDY_BLINDED_NOTE
    assert main(["show", "study", "--db", str(store.path)]) == 0
    out = capsys.readouterr().out
    assert "test hidden" in out and ".614" not in out and "--unblind" in out
    assert main(["show", "study", "--json", "--unblind", "--db", str(store.path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["nodes"][0]["test"]["auc"] == TEST_AUC and data["visibility"]["audience"] == "researcher"
    assert main(["export", "study", "--out", str(tmp_path / "x"), "--db", str(store.path)]) == 0
    assert str(TEST_AUC) not in "".join(p.read_text() for p in (tmp_path / "x").iterdir())
    assert main(["export", "study", "--unblind", "--out", str(tmp_path / "y"), "--db", str(store.path)]) == 0
    assert str(TEST_AUC) in (tmp_path / "y" / "nodes.csv").read_text()


def test_sessions_that_do_not_blind_are_untouched(tmp_path):
    store = SessionStore(tmp_path / "s.db")
    write_demo_session(store, n_nodes=6)
    assert store.db.execute("select count(*) from sealed_metrics").fetchone()[0] == 0
    assert all(not e.payload.get("sealed") for e in store.events("demo-0-6"))


def test_migration_seals_a_running_session_recorded_before_it(tmp_path):
    path = tmp_path / "old.db"
    store = SessionStore(path)
    store.create_session({"level": "base", "steps": 1, "blind_test": True}, instruction="x",
                         coder={"name": "offline"}, data={}, session_id="old")
    # as a befair without 006_sealed wrote it: the figure in clear in the event and the node row
    store.db.execute("drop table sealed_metrics")
    store.db.execute("delete from migrations where name = '006_sealed'")
    w = store.writer("old")
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "",
                             "guidance_ids": [], "components": None, "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": 1, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                              "output_head": "", "output_tail": "", "truncated": False}))
    store.db.execute("insert into events (session_id, seq, ts, kind, payload) values (?, ?, ?, ?, ?)",
                     ["old", w.state.last_seq + 1, 0.0, ev.EVALUATED, json.dumps(
                         {"node_id": 1, "split": "test", "ok": True, "verdict": "ok", "blinded": True,
                          "summary": {"auc": TEST_AUC}, "medfair": {}})])
    store.db.execute("update nodes set test_auc = ? where session_id = 'old'", [TEST_AUC])
    assert _participant_can_read(path, "old")
    store.close()
    store = SessionStore(path)  # migrates
    assert not _participant_can_read(path, "old")
    assert open_sealed(store, "old", unblind=True).nodes[1].test.to_payload() == {"auc": TEST_AUC}
