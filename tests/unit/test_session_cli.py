"""`befair sessions | show | steer | export | import-aide | delete`."""
from __future__ import annotations

import csv
import json
import threading
from pathlib import Path

import pytest

from engine.errors import BefairError, UsageError
from befair_tui.cli import build_parser
from engine.session import events as ev
from tests.demo_session import write_demo_session
from engine.session.selection import best as best_node
from engine.session.store import SessionNotFound, SessionStore
from engine.session.event_types import parse


def run(*argv: str) -> int:
    args = build_parser().parse_args(list(argv))
    return args.func(args)


@pytest.fixture
def db(tmp_path) -> Path:
    path = tmp_path / "cli.db"
    store = SessionStore(path)
    write_demo_session(store, n_nodes=12)
    write_demo_session(store, n_nodes=6, seed=2, finished=False, ts0=1_700_100_000.0)
    store.close()
    return path


def test_sessions_text_and_json(db, capsys):
    assert run("sessions", "--db", str(db)) == 0
    out = capsys.readouterr().out
    assert "demo-0-12" in out and "demo-2-6-live" in out and "offline coder (simulated)" in out
    assert "12/12" in out and "finished" in out
    assert run("sessions", "--json", "--db", str(db)) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == ["demo-2-6-live", "demo-0-12"]
    done = rows[1]
    assert done["status"] == "finished" and done["level"] == "fairness-metric" and done["simulated"] is True
    assert done["counts"] == {"ok": 10, "buggy": 1, "timeout": 1} and done["n_nodes"] == 12
    assert done["best_auc"] is not None and done["best_gap"] is not None and done["pending_commands"] == 0


def test_sessions_without_a_database(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BEFAIR_DB", str(tmp_path / "env.db"))
    assert run("sessions") == 0
    assert "no sessions yet" in capsys.readouterr().out
    assert run("sessions", "--json") == 0
    assert json.loads(capsys.readouterr().out) == []


def test_show_text(db, capsys):
    assert run("show", "demo-0", "--db", str(db)) == 0
    out = capsys.readouterr().out
    assert out.startswith("session demo-0-12 · fairness-metric · offline coder (simulated) · step 12/12 · FINISHED")
    assert "● 1 draft  val ." in out and "test ." in out
    assert "✗ 2 draft  bug: KeyError" in out and "[!]" in out and "✂ pruned" in out
    assert "debug of 2" in out and "improve of" in out and "⧖" in out
    assert "✎ guidance #1 (global): 'reweight dark skin in the loss'" in out
    assert "[ST][PG][RW]" in out and "★ follows validation: node 12" in out
    # figures with ± half their 95 % interval; node 3 claimed .9731, measured .762
    assert "● 3 draft  val .76 ±.06 · gap .11 ±.16  test .63 ±.05 · gap .23 ±.15  [PG][≠]" in out
    assert "final choice: claimed → 3, validation → 12, minimax → 12, robust → 12" in out
    # the session summary, once it ended: each choice with its intervals and how sure it is
    assert "Session summary · fairness-metric" in out and "⚠ simulated agent" in out
    assert "validation .794 (.727–.848) · gap .116 (.000–.316)" in out
    assert "AUC: nodes 12, 3, 4, 5, 6, 7 and 11 cannot be told apart on validation" in out
    assert "an agent's own score has no interval" in out


def test_show_json(db, capsys):
    assert run("show", "demo-0-12", "--json", "--db", str(db)) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["session_id"] == "demo-0-12" and len(data["nodes"]) == 12
    node = next(n for n in data["nodes"] if n["node_id"] == 1)
    for key in ("stage", "status", "parent_id", "claimed_metric", "validation", "test", "audit"):
        assert key in node
    assert node["validation"]["group_auc"] and set(node["audit"]["flags"]) >= {"reads_skin_tone", "reweighting"}
    assert data["final_choice"].keys() == {"claimed", "validation", "minimax", "robust"}
    val = node["validation"]
    assert set(val["group_auc"]) == {"12", "34", "56"} and val["group_n"] == {"12": 200, "34": 170, "56": 110}
    assert val["group_positives"] == {"12": 34, "34": 22, "56": 11} and val["ci_level"] == 0.95
    for key in ("auc_ci", "auc_gap_ci", "worst_auc_ci"):
        assert val[key][0] <= val[key.removesuffix("_ci")] <= val[key][1]
    assert "stratified" in val["ci_method"] and val["too_few_to_judge"] == [] and val["min_cases"] == 10
    assert set(val["group_fnr"]) == {"12", "34", "56"}
    assert data["best"]["validation"]["uncertainty"].startswith("nodes 12, 3")
    assert data["guidance"][0]["used_by"] == [4]


def test_show_hides_blinded_test_metrics(tmp_path, capsys):
    store = SessionStore(tmp_path / "b.db")
    w = store.create_session({"level": "base", "steps": 1, "best": "validation", "blind_test": True},
                             instruction="x", coder={"name": "offline"}, data={}, session_id="blind")
    w.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "",
                             "guidance_ids": [], "components": None, "origin": "agent"}))
    w.emit(parse(ev.EXEC_FINISHED, {"node_id": 1, "status": "ok", "exit_code": 0, "exec_time": 1.0, "exc_type": None,
                              "output_head": "", "output_tail": "", "truncated": False}))
    summary = {"auc": 0.7, "worst_auc": 0.6, "best_auc": 0.8, "auc_gap": 0.2, "group_auc": {}, "n": 3}
    for split in ("validation", "test"):
        w.emit(parse(ev.EVALUATED, {"node_id": 1, "split": split, "ok": True, "verdict": "ok", "reason": None,
                              "summary": {**summary, "auc": 0.7 if split == "validation" else 0.61},
                              "medfair": {}, "blinded": split == "test"}))
    assert run("show", "blind", "--db", str(store.path)) == 0
    out = capsys.readouterr().out
    assert "test hidden" in out and ".610" not in out
    run("show", "blind", "--json", "--db", str(store.path))
    node = json.loads(capsys.readouterr().out)["nodes"][0]
    assert node["test"] is None and node["test_blinded"] is True
    run("show", "blind", "--json", "--unblind", "--db", str(store.path))
    assert json.loads(capsys.readouterr().out)["nodes"][0]["test"]["auc"] == 0.61


def test_unknown_session_and_missing_db(db, tmp_path):
    with pytest.raises(SessionNotFound, match="no session matches 'nope'"):
        run("show", "nope", "--db", str(db))
    with pytest.raises(BefairError, match="no session database"):
        run("show", "x", "--db", str(tmp_path / "absent.db"))
    with pytest.raises(BefairError, match="several"):
        run("show", "demo-", "--db", str(db))


@pytest.mark.parametrize("argv, kind, payload", [
    (["pause"], "pause", {}),
    (["resume"], "resume", {}),
    (["stop"], "stop", {"interrupt": True}),
    (["stop", "--no-interrupt"], "stop", {"interrupt": False}),
    (["guide", "reweight", "dark", "skin"], "guide",
     {"text": "reweight dark skin", "scope": "global", "node_id": None}),
    (["guide", "try resnet", "--node", "3"], "guide", {"text": "try resnet", "scope": "node", "node_id": 3}),
    (["expand", "5"], "expand", {"node_id": 5}),
    (["prune", "2"], "prune", {"node_id": 2}),
    (["budget", "30"], "set_budget", {"steps": 30}),
    (["criterion", "robust"], "set_criterion", {"criterion": "robust"}),
])
def test_steer_writes_commands(db, capsys, argv, kind, payload):
    assert run("steer", "demo-2", argv[0], *argv[1:], "--db", str(db)) == 0
    cid = int(capsys.readouterr().out.strip())
    row = SessionStore(db).command(cid)
    assert row["kind"] == kind and row["payload"] == payload and row["issued_by"] == "cli"
    assert row["session_id"] == "demo-2-6-live" and row["consumed_at"] is None


@pytest.mark.parametrize("argv, message", [
    (["expand", "99"], "no node 99"),
    (["prune", "x"], "not a number"),
    (["guide"], "needs TEXT"),
    (["pause", "now"], "takes no argument"),
    (["budget", "-1"], "cannot be negative"),
    (["guide", "hi", "--node", "42"], "no node 42"),
])
def test_steer_errors(db, argv, message):
    with pytest.raises(BefairError, match=message):
        run("steer", "demo-2", argv[0], *argv[1:], "--db", str(db))
    assert SessionStore(db).pending_commands("demo-2-6-live") == []


def test_steer_on_a_finished_session_warns(db, capsys):
    assert run("steer", "demo-0", "pause", "--db", str(db)) == 0
    assert "is finished" in capsys.readouterr().err


def test_steer_wait_reports_latency(db, capsys):
    store = SessionStore(db)
    done = threading.Event()

    def consumer():  # what a running session does between steps (here in a thread)
        s = SessionStore(db)
        writer = s.writer("demo-2-6-live")
        while not done.is_set():
            for cmd in s.pending_commands("demo-2-6-live"):
                writer.emit(parse(ev.PAUSED, {"by": "cli", "command_id": cmd["id"], "reason": None}), consumes=cmd)
                done.set()
            done.wait(0.01)
        s.close()

    th = threading.Thread(target=consumer)
    th.start()
    try:
        assert run("steer", "demo-2", "pause", "--wait", "--timeout", "10", "--db", str(db)) == 0
    finally:
        done.set()
        th.join()
    out = capsys.readouterr().out.splitlines()
    assert out[1].startswith("consumed: applied (seq ") and out[1].endswith(" ms")
    assert store.state("demo-2-6-live").status == "paused"


def test_steer_wait_times_out(db, capsys):
    assert run("steer", "demo-2", "resume", "--wait", "--timeout", "0.05", "--db", str(db)) == 1
    assert "not consumed" in capsys.readouterr().err


def test_export(db, tmp_path, capsys):
    out = tmp_path / "export"
    assert run("export", "demo-0", "--out", str(out), "--db", str(db)) == 0
    assert "best by validation: node" in capsys.readouterr().out
    store = SessionStore(db)
    state = store.state("demo-0-12")
    best = best_node(state, "validation")
    assert (out / "solution.py").read_text().endswith(best.code)
    tree = json.loads((out / "tree.json").read_text())
    assert tree["export"] == {"criterion": "validation", "best_node": best.node_id} and len(tree["nodes"]) == 12
    rows = list(csv.DictReader((out / "nodes.csv").open()))
    assert len(rows) == 12 and rows[0]["node_id"] == "1" and rows[0]["val_auc"] and rows[0]["test_group_56"]
    assert rows[0]["test_auc_lo"] and rows[0]["val_malignant_56"] == "11"   # groups named after skin tone
    assert {r["status"] for r in rows} == {"ok", "buggy", "timeout"}
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    assert [e["seq"] for e in events] == list(range(1, len(store.events("demo-0-12")) + 1))
    assert run("export", "demo-0", "--out", str(tmp_path / "e2"), "--criterion", "claimed", "--db", str(db)) == 0
    claimed = best_node(state, "claimed")
    assert (tmp_path / "e2" / "solution.py").read_text().endswith(claimed.code)


def test_steer_refuses_an_unknown_criterion(db):
    with pytest.raises(UsageError, match="not one of claimed, validation, minimax, robust"):
        run("steer", "demo-2", "criterion", "vibes", "--db", str(db))


def test_report_markdown_and_html(db, tmp_path, capsys):
    assert run("report", "demo-0", "--db", str(db)) == 0
    md = capsys.readouterr().out
    assert md.startswith("# befair session demo-0-12") and "| 12 ★ |" in md
    assert "cannot be told apart on validation" in md and "⚠ simulated agent" in md
    assert "What each guidance changed" in md and "“reweight dark skin in the loss”" in md
    assert run("report", "demo-0", "--out", str(tmp_path / "r.md"), "--db", str(db)) == 0
    assert (tmp_path / "r.svg").read_text().lstrip().startswith(("<?xml", "<svg"))
    assert "![Test AUC against the skin-tone AUC gap](r.svg)" in (tmp_path / "r.md").read_text()
    assert run("report", "demo-0", "--out", str(tmp_path / "r.html"), "--db", str(db)) == 0
    page = (tmp_path / "r.html").read_text()
    assert page.startswith("<!doctype html>") and "<svg" in page and "node 12" in page
    with pytest.raises(UsageError, match=r"\.md or \.html"):
        run("report", "demo-0", "--out", str(tmp_path / "r.txt"), "--db", str(db))


def test_export_without_a_successful_node(tmp_path, capsys):
    store = SessionStore(tmp_path / "e.db")
    store.create_session({"level": "base", "steps": 1}, instruction="x", coder={"name": "offline"}, data={},
                         session_id="empty")
    assert run("export", "empty", "--out", str(tmp_path / "o"), "--db", str(store.path)) == 0
    assert "solution.py not written" in capsys.readouterr().err
    assert not (tmp_path / "o" / "solution.py").exists() and (tmp_path / "o" / "nodes.csv").exists()


def test_import_aide_and_delete(tmp_path, capsys):
    journal = tmp_path / "journal.json"
    journal.write_text(json.dumps({"nodes": [
        {"id": "a", "step": 0, "ctime": 10.0, "code": "x = 1\n", "_term_out": "<OMITTED>", "is_buggy": False,
         "metric": {"value": 0.8, "maximize": True}},
        {"id": "b", "step": 1, "ctime": 20.0, "code": "x = \n", "is_buggy": True, "exc_type": "SyntaxError"},
    ], "node2parent": {"b": "a"}}))
    db = tmp_path / "new" / "imp.db"
    assert run("import-aide", str(journal), "--db", str(db)) == 0
    out = capsys.readouterr().out
    assert "imported 2 nodes (1 drafts, 1 failed)" in out
    sid = SessionStore(db).resolve("last")
    assert run("import-aide", str(journal), "--json", "--db", str(db)) == 0
    assert json.loads(capsys.readouterr().out)["n_nodes"] == 2
    with pytest.raises(BefairError, match="--yes"):
        run("delete", sid, "--db", str(db))
    assert run("delete", sid, "--yes", "--db", str(db)) == 0
    assert f"deleted {sid}" in capsys.readouterr().out
    with pytest.raises(SessionNotFound):
        SessionStore(db).session(sid)


def test_registered_in_the_befair_command(db, capsys):
    from befair_tui.cli import main

    assert main(["sessions", "--json", "--db", str(db)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == 2
    assert main(["show", "nope", "--db", str(db)]) == 2
    assert "no session matches 'nope'" in capsys.readouterr().err
