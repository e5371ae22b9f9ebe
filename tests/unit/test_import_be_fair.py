"""The be-fair artifact tree imported whole: a tree written here with AIDE and MLZero runs, their
published predictions, failed runs, a broken run and a folder that is no run; then the study's
table from the imported sessions."""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from engine.imports.be_fair import (
    STUDY_ID, find_runs, import_be_fair, left_out, parse_run_name, study_rows, study_table,
)
from engine.imports.predictions import score_published
from engine.session.store import SessionStore
from engine.study.aggregate import METRIC_COLUMNS
from engine.task import LEVELS

CODE = "import pandas as pd\nprint('Validation AUROC: {auc}')\n"


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "study.db")
    yield s
    s.close()


def _metadata(path: Path) -> Path:
    rows = [",DDI_ID,DDI_file,skin_tone,malignant,disease"]
    for i in range(60):
        tone = (12, 34, 56)[i % 3]
        rows.append(f"{i},{i + 1},{i + 1:06d}.png,{tone},{'True' if i % 4 == 0 else 'False'},x")
    path.write_text("\n".join(rows) + "\n")
    return path


def _predictions(path: Path, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["DDI_file,predicted_probability"] + [f"{i + 1:06d}.png,{float(p)!r}" for i, p in enumerate(rng.random(60))]
    path.write_text("\n".join(lines) + "\n")
    return path


def _aide_run(folder: Path, level: str) -> None:
    folder.mkdir(parents=True)
    nodes = [{"id": "a", "step": 0, "ctime": 1.0, "code": CODE.format(auc=0.7), "plan": "draft", "is_buggy": False,
              "metric": {"value": 0.7, "maximize": True}, "_term_out": ["Validation AUROC: 0.7\n"]},
             {"id": "b", "step": 1, "ctime": 2.0, "code": CODE.format(auc=0.8), "plan": "improve", "is_buggy": False,
              "metric": {"value": 0.8, "maximize": True}, "_term_out": ["Validation AUROC: 0.8\n"]}]
    (folder / "journal.json").write_text(json.dumps({"nodes": nodes, "node2parent": {"b": "a"}}))
    (folder / "config.yaml").write_text(json.dumps({"goal": LEVELS[level], "agent": {"steps": 2}}))
    (folder / "best_solution.py").write_text(CODE.format(auc=0.8))


def _mlzero_run(folder: Path) -> None:
    folder.mkdir(parents=True)
    brief = "2026-05-01 10:00:{s} BRIEF    [autogluon.assistant.coding_agent] {m}"
    (folder / "info_logs.txt").write_text("\n".join([
        brief.format(s="00", m="Starting MCTS iteration 1/1"),
        brief.format(s="01", m="Found unused tool t, creating evolve node from root using this tool"),
        brief.format(s="30", m="Planner decision: SUCCESS"),
    ]) + "\n")
    (folder / "token_usage.json").write_text(json.dumps({
        "total": {"total_input_tokens": 40, "total_output_tokens": 2, "total_tokens": 42},
        "sessions": {"single_turn_retriever_20260501100005": {"input_tokens": 40, "output_tokens": 2}}}))
    (folder / "best_run_0").write_text(f"/remote/{folder.name}/node_0")


def _tree(root: Path) -> Path:
    for name, level in (("0-basic_prompt", "base"), ("1-basic_prompt", "base"), ("2-addition_1", "fairness-hint")):
        _aide_run(root / "aide" / "logs" / name, level)
    broken = root / "aide" / "logs" / "3-addition_1"
    broken.mkdir(parents=True)
    (broken / "journal.json").write_text("{not json")
    killed = root / "aide" / "failed_runs" / "logs_broken_cuda" / "4-basic_prompt_killed"
    killed.mkdir(parents=True)
    (killed / "4_basic_prompt.e8777802").write_text("Traceback ...\nRuntimeError: CUDA error: no kernel image\n")
    _aide_run(root / "aide" / "failed_runs" / "logs_broken_cuda" / "5-basic_prompt", "base")
    for name in ("6-basic_prompt", "7-basic_prompt", "48-addition_2"):
        _mlzero_run(root / "mlzero" / name)
    (root / "mlzero" / "basic_prompt_data").mkdir()
    for seed, (agent, name) in enumerate((("aide", "0-basic_prompt"), ("aide", "1-basic_prompt"),
                                          ("aide", "2-addition_1"), ("aide", "3-addition_1"),
                                          ("mlzero", "6-basic_prompt"), ("mlzero", "7-basic_prompt"),
                                          ("mlzero", "48-addition_2"))):
        _predictions(root / "evaluation" / agent / name / f"{name}_DDI_predictions.csv", seed)
    return root


def test_run_names():
    assert parse_run_name("30-basic_prompt") == (30, "basic_prompt", "")
    assert parse_run_name("4-basic_prompt_killed") == (4, "basic_prompt", "_killed")
    assert parse_run_name("28-basic_prompt-with-smaller-dataset") == (28, "basic_prompt", "-with-smaller-dataset")
    assert parse_run_name("12-addition_1") == (12, "addition_1", "")
    assert parse_run_name("mlzero_add3") == (None, "mlzero_add3", "")
    assert parse_run_name("report") is None


def test_tree_imported_whole(store, tmp_path):
    root, metadata = _tree(tmp_path / "be-fair"), _metadata(tmp_path / "ddi.csv")
    calls: list[tuple[str, int, int]] = []
    report = import_be_fair(store, root, metadata=metadata, progress=lambda *a: calls.append(a))

    assert [run for run, _ in report.imported] == [
        "aide/0-basic_prompt", "aide/1-basic_prompt", "aide/2-addition_1", "mlzero/6-basic_prompt",
        "mlzero/7-basic_prompt", "mlzero/48-addition_2", "aide/failed_runs/logs_broken_cuda/4-basic_prompt_killed",
        "aide/failed_runs/logs_broken_cuda/5-basic_prompt"]
    assert [run for run, _ in report.skipped] == ["aide/3-addition_1"]     # reported by name, the rest went on
    assert "not JSON" in report.skipped[0][1]
    assert report.ignored == [("mlzero/basic_prompt_data", "not a run folder (<id>-<prompt>)")]
    assert (report.failed_runs, report.scored) == (2, 6)
    assert calls[0] == ("runs", 0, 9) and calls[-1] == ("runs", 9, 9)

    sessions = {s["id"]: s for s in store.sessions()}
    assert set(sessions) == {sid for _, sid in report.imported}
    for sid in sessions:
        state = store.state(sid)
        assert state.config["study_id"] == STUDY_ID and state.config["protocol"] == "be-fair"
    aide0 = store.state("be-fair-aide-0-basic_prompt")
    assert aide0.level == "base" and len(aide0.nodes) == 2 and aide0.status == "finished"
    assert aide0.nodes[2].test is not None and aide0.nodes[1].test is None    # best_solution.py is node 2
    assert aide0.config["extra"]["be_fair"]["table_prompt"] == "basic_prompt"
    ml6 = store.state("be-fair-mlzero-6-basic_prompt")
    assert ml6.config["extra"]["be_fair"]["table_prompt"] == "mlzero_bp" and ml6.tokens_in + ml6.tokens_out == 42
    killed = store.state("be-fair-aide-failed-broken_cuda-4-basic_prompt_killed")
    assert killed.status == "failed" and not killed.nodes
    assert "broken CUDA" in killed.finish_reason and "killed" in killed.finish_reason
    assert "RuntimeError: CUDA error: no kernel image" in killed.finish_reason
    failed5 = store.state("be-fair-aide-failed-broken_cuda-5-basic_prompt")
    assert failed5.status == "failed" and len(failed5.nodes) == 2 and "broken CUDA" in failed5.finish_reason

    # importing again changes nothing
    again = import_be_fair(store, root, metadata=metadata)
    assert not again.imported and len(again.existing) == 8 and len(store.sessions()) == 8


def test_study_table_from_the_imported_runs(store, tmp_path):
    root, metadata = _tree(tmp_path / "be-fair"), _metadata(tmp_path / "ddi.csv")
    import_be_fair(store, root, metadata=metadata)
    rows = study_rows(store)
    assert [(r["model"], r["id"], r["prompt"]) for r in rows] == [
        ("AIDE", 0, "basic_prompt"), ("AIDE", 1, "basic_prompt"), ("AIDE", 2, "addition_1"),
        ("MLZero", 6, "mlzero_bp"), ("MLZero", 7, "mlzero_bp"), ("MLZero", 48, "mlzero_add2")]
    # the published table was computed without MLZero run 48: as published, it is left out, and said so
    assert [r["id"] for r in study_rows(store, as_published=True)] == [0, 1, 2, 6, 7]
    assert len(left_out(store)) == 1 and "MLZero run 48" in left_out(store)[0]
    assert {r["prompt"] for r in study_table(store, as_published=False)} >= {"mlzero_add2"}
    table = study_table(store)
    assert [(r["statistic"], r["model"], r["prompt"]) for r in table][::4] == [
        ("mean", "AIDE", "addition_1"), ("mean", "AIDE", "basic_prompt"), ("mean", "MLZero", "mlzero_bp")]

    def scored(agent: str, name: str) -> dict:
        return score_published(root / "evaluation" / agent / name / f"{name}_DDI_predictions.csv",
                               metadata).medfair(prefix="Test ")

    base = [scored("aide", "0-basic_prompt"), scored("aide", "1-basic_prompt")]
    mean = {r["statistic"]: r for r in table if r["model"] == "AIDE" and r["prompt"] == "basic_prompt"}
    for column in METRIC_COLUMNS:
        values = [b[column] for b in base]
        assert math.isclose(mean["mean"][column], statistics.fmean(values), abs_tol=1e-12), column
        assert math.isclose(mean["std"][column], statistics.stdev(values), abs_tol=1e-12), column
        half = 1.96 * statistics.stdev(values) / math.sqrt(2)
        assert math.isclose(mean["ci95_hi"][column], statistics.fmean(values) + half, abs_tol=1e-12), column
    single = next(r for r in table if r["statistic"] == "std" and r["prompt"] == "addition_1")
    assert single["Test Overall AUC"] is None    # one run: no spread


def test_find_runs_refuses_other_folders(tmp_path):
    from engine.errors import DataError

    with pytest.raises(DataError, match="not the be-fair artifact tree"):
        find_runs(tmp_path)
    with pytest.raises(DataError, match="not a folder"):
        find_runs(tmp_path / "missing")


def _cli(*argv: object) -> int:
    import argparse

    from befair_tui.cli import imports

    parser = argparse.ArgumentParser(prog="befair")
    imports.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args([str(a) for a in argv])
    return int(args.func(args))


def test_cli_imports_the_tree_and_writes_the_table(tmp_path, capsys):
    import csv

    root, metadata = _tree(tmp_path / "be-fair"), _metadata(tmp_path / "ddi.csv")
    db, table = tmp_path / "cli.db", tmp_path / "table.csv"
    assert _cli("import", "be-fair", root, "--metadata", metadata, "--db", db, "--table", table) == 0
    out = capsys.readouterr().out
    assert "imported 8 runs (2 published as failed, 6 scored" in out
    assert "skipped aide/3-addition_1: " in out and "left out of the table: MLZero run 48" in out
    with table.open() as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["statistic"], r["model"], r["prompt"]) for r in rows][:2] == [
        ("mean", "AIDE", "addition_1"), ("std", "AIDE", "addition_1")]
    store = SessionStore(db)
    expected = study_table(store)
    store.close()
    assert float(rows[4]["Test Overall AUC"]) == expected[4]["Test Overall AUC"]
    assert _cli("import", "be-fair", root, "--metadata", metadata, "--db", db, "--json") == 0
    report = json.loads(capsys.readouterr().out)
    assert report["imported"] == [] and len(report["existing"]) == 8


def test_study_report_of_the_imported_study(tmp_path, capsys):
    """`befair study report be-fair` after the import: the same table as the import's, run 48 named as
    left out (kept with --all-runs), and Figure 2 drawn."""
    from befair_tui.cli import main

    root, metadata, db = _tree(tmp_path / "be-fair"), _metadata(tmp_path / "ddi.csv"), tmp_path / "r.db"
    assert _cli("import", "be-fair", root, "--metadata", metadata, "--db", db) == 0
    capsys.readouterr()
    figure = tmp_path / "figure2.png"
    assert main(["study", "report", "be-fair", "--db", str(db), "--json", "--figure", str(figure)]) == 0
    report = json.loads(capsys.readouterr().out)
    store = SessionStore(db)
    assert report["table"] == study_table(store) and report["criterion"] == "claimed"
    assert [e["repeat"] for e in report["excluded"]] == [48] and figure.stat().st_size > 10_000
    assert main(["study", "report", "be-fair", "--db", str(db), "--json", "--all-runs"]) == 0
    every = json.loads(capsys.readouterr().out)
    assert every["table"] == study_table(store, as_published=False) and every["excluded"] == []
    store.close()
    assert main(["study", "report", "be-fair", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "left out: cell" in text and "MLZero run 48" in text and "AUC" in text
    assert main(["study", "report", "no-such-study", "--db", str(db)]) == 2


def test_imported_report_names_the_instruction_levels_and_keeps_the_stored_labels(tmp_path, capsys):
    """The report's text and Figure 2 name the levels (base, fairness-hint, ...), not the artifacts'
    folder names; the JSON table and the CSV keep the published labels (basic_prompt, addition_1, ...)."""
    from befair_tui.cli import main

    root, metadata, db = _tree(tmp_path / "be-fair"), _metadata(tmp_path / "ddi.csv"), tmp_path / "r.db"
    assert _cli("import", "be-fair", root, "--metadata", metadata, "--db", db) == 0
    capsys.readouterr()
    figure, table = tmp_path / "figure2.svg", tmp_path / "table.csv"
    assert main(["study", "report", "be-fair", "--db", str(db), "--figure", str(figure), "--csv", str(table)]) == 0
    text = capsys.readouterr().out
    assert "AIDE · base" in text and "AIDE · fairness-hint" in text and "MLZero · base" in text
    assert "basic_prompt" not in text and "addition_1" not in text and "mlzero_bp" not in text
    svg = figure.read_text()
    assert "fairness-hint" in svg and "basic_prompt" not in svg and "mlzero_bp" not in svg
    assert "basic_prompt" in table.read_text() and "mlzero_bp" in table.read_text()
    assert main(["study", "report", "be-fair", "--db", str(db), "--json"]) == 0
    assert {r["prompt"] for r in json.loads(capsys.readouterr().out)["table"]} == {"basic_prompt", "addition_1",
                                                                                   "mlzero_bp"}


def test_imported_report_gives_each_run_its_interval_and_compares_levels_and_agents(tmp_path, capsys):
    """Each run's own 95 % test intervals (from its published predictions) and the tests between
    levels within an agent and between agents within a level, with the method named."""
    from befair_tui.cli import main

    root, metadata, db = _tree(tmp_path / "be-fair"), _metadata(tmp_path / "ddi.csv"), tmp_path / "r.db"
    assert _cli("import", "be-fair", root, "--metadata", metadata, "--db", db) == 0
    capsys.readouterr()
    assert main(["study", "report", "be-fair", "--db", str(db), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    for run in report["sessions"]:
        lo, hi = run["test_auc_ci"]
        assert lo <= run["test_auc"] <= hi and run["test_auc_gap_ci"][0] <= run["test_auc_gap"]
    pairs = {(c["within"], c["a"], c["b"], c["figure"]) for c in report["comparisons"]}
    assert ("AIDE", "base", "fairness-hint", "test AUC") in pairs
    assert ("base", "AIDE", "MLZero", "skin-tone AUC gap") in pairs
    assert "permutation test" in report["comparison_method"]
    by_pair = {(c["within"], c["a"], c["b"], c["figure"]): c for c in report["comparisons"]}
    one_run = by_pair[("AIDE", "base", "fairness-hint", "test AUC")]   # fairness-hint has a single AIDE run
    assert one_run["told_apart"] is None and "not enough runs" in one_run["sentence"]
    assert main(["study", "report", "be-fair", "--db", str(db)]) == 0
    text = capsys.readouterr().out
    assert "between levels and agents" in text and "compared pairs told apart" in text
