"""Importing MLZero runs: the published run 30 (../shared/data, skipped when absent) and small run
folders written here."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from engine.errors import DataError
from engine.imports.mlzero import import_mlzero, read_mlzero_log
from engine.imports.predictions import PUBLISHED_SOURCE
from engine.session.state import fold
from engine.session.store import SessionStore, node_row

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
RUN = DATA / "mlzero_run_example"
PREDICTIONS = RUN / "30-basic_prompt_DDI_predictions.csv"
METADATA = DATA / "ddi_metadata.csv"
# The study's published figures for MLZero run 30 (individual_runs_AIDE_MLZero.csv in anna-richter/be-fair).
PUBLISHED_AUC, PUBLISHED_GAP = 0.5849098691746548, 0.2787406022563067


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "imp.db")
    yield s
    s.close()


def _state(store, sid):
    state = fold(store.events(sid), sid)
    assert store.nodes(sid) == [node_row(sid, state.nodes[k]) for k in sorted(state.nodes)]
    return state


@pytest.mark.skipif(not (RUN / "info_logs.txt").is_file() or not METADATA.is_file(),
                    reason="../shared/data/mlzero_run_example (and the DDI metadata) is not present")
def test_published_run_30(store):
    sid = import_mlzero(store, RUN, predictions=PREDICTIONS, metadata=METADATA)
    state = _state(store, sid)
    assert len(state.nodes) == 20 and state.budget == 20 and state.level == "base"
    assert state.coder["name"] == "mlzero-import" and state.coder["model"] == "gpt-4.1"
    # 2,919,786 tokens: token_usage.json's total, its sessions' sum and the log's last line agree
    usage = json.loads((RUN / "token_usage.json").read_text())["total"]
    assert state.tokens_in + state.tokens_out == usage["total_tokens"] == 2_919_786
    assert (state.tokens_in, state.tokens_out) == (2_869_282, 50_504)
    assert read_mlzero_log(RUN / "info_logs.txt").total == (2_869_282, 50_504)
    per_node = sum(n.tokens_in + n.tokens_out for n in state.nodes.values())
    run_level = sum(c["tokens_in"] + c["tokens_out"] for c in state.unassigned_calls)
    assert per_node + run_level == 2_919_786 and per_node > 0
    # the two multi-turn coder sessions span the search: they stay with the run
    assert {c["role"] for c in state.unassigned_calls if c["tokens_in"] > 100_000} == {"python_coder", "bash_coder"}
    # the tree as MLZero logged it (befair node = MLZero node + 1)
    assert [n.node_id for n in state.nodes.values() if n.stage == "draft"] == [1, 2, 3]
    assert (state.nodes[4].stage, state.nodes[4].parent_id) == ("improve", 1)
    assert (state.nodes[6].stage, state.nodes[6].parent_id, state.nodes[6].status) == ("debug", 4, "ok")
    assert (state.nodes[16].stage, state.nodes[16].parent_id, state.nodes[16].status) == ("debug", 10, "buggy")
    assert sum(n.status == "ok" for n in state.nodes.values()) == 12
    assert state.nodes[1].claimed_metric == pytest.approx(0.96654)
    assert "TensorFlow failed to initialize the cuDNN" in (state.nodes[2].review_summary or "")
    # code, prompts and replies where the folder kept them (node_0 only), the best run's node final
    assert state.nodes[1].code == (RUN / "node_0" / "generated_code.py").read_text()
    assert not state.nodes[2].code and "not kept" in state.nodes[2].plan
    coder_call = next(c for c in state.nodes[1].conversation if c["role"] == "python_coder")
    assert coder_call["messages"][0]["content"] == (RUN / "node_0" / "states" / "python_coder_prompt.txt").read_text()
    assert "counted in the run's multi-turn python_coder session" in coder_call["tokens_note"]
    assert state.final_choice["by_claimed"] == 1
    test = state.nodes[1].test
    assert math.isclose(test.auc, PUBLISHED_AUC, abs_tol=1e-12)
    assert math.isclose(test.auc_gap, PUBLISHED_GAP, abs_tol=1e-12)
    published = [e.payload for e in store.events(sid) if e.kind == "evaluated"]
    assert [p["source"] for p in published] == [PUBLISHED_SOURCE]


def _line(t: str, level: str, where: str, msg: str) -> str:
    return f"2026-05-01 {t} {level:<8} [autogluon.assistant.{where}] {msg}"


def _write_run(folder: Path, *, tokens: bool = True) -> Path:
    """Three iterations: a draft from root (SUCCESS), an improvement of it (FIX), a successful
    debug of that one; node_0 kept with its code and one retriever prompt and reply."""
    folder.mkdir(parents=True)
    s = f"/remote/{folder.name}"
    nm = "managers.node_manager"
    lines = [
        _line("10:00:00", "INFO", "llm.openai_chat", "Using OpenAI model: gpt-x for session: a"),
        _line("10:00:01", "BRIEF", "agents.data_perception_agent", "Analyzing folder: /remote/addition_2_data"),
        _line("10:00:05", "BRIEF", "coding_agent", "Starting MCTS iteration 1/5"),
        _line("10:00:05", "INFO", nm, "Found unused tool t, creating evolve node from root using this tool"),
        _line("10:00:06", "INFO", nm, f"Saving {s}/node_0/states/retriever_prompt.txt..."),
        _line("10:00:07", "INFO", nm, f"Saving {s}/node_0/states/retriever_response.txt..."),
        _line("10:00:08", "INFO", nm, "ExecuterAgent: executing code and collecting stdout."),
        _line("10:01:08", "INFO", nm, "ExecuterAgent: execution finished; planner decision logged."),
        _line("10:01:08", "BRIEF", "agents.executer_agent", "Planner decision: SUCCESS"),
        _line("10:01:08", "INFO", "agents.executer_agent", "Validation score: 0.8"),
        _line("10:01:09", "BRIEF", nm, "Task completed! Best node: 0 with validation score 0.8"),
        _line("10:02:00", "BRIEF", "coding_agent", "Starting MCTS iteration 2/5"),
        _line("10:02:00", "INFO", nm, "Creating evolve node from Node 0 using t."),
        _line("10:02:30", "BRIEF", "agents.executer_agent", "Planner decision: FIX"),
        _line("10:02:30", "INFO", "agents.executer_agent", "Error summary: KeyError 'label'"),
        _line("10:03:00", "BRIEF", "coding_agent", "Starting MCTS iteration 3/5"),
        _line("10:03:40", "BRIEF", "agents.executer_agent", "Planner decision: SUCCESS"),
        _line("10:03:40", "INFO", "agents.executer_agent", "Validation score: 0.7"),
        _line("10:03:40", "INFO", nm, "Replaced debug origin node 1 with successful debug node 2"),
        _line("10:04:00", "BRIEF", nm, "Total tokens — input: 1000, output: 100, sum: 1100"),
    ]
    (folder / "info_logs.txt").write_text("\n".join(lines) + "\n")
    states = folder / "node_0" / "states"
    states.mkdir(parents=True)
    (folder / "node_0" / "generated_code.py").write_text("import pandas as pd\nprint('Validation AUROC: 0.8')\n")
    (states / "retriever_prompt.txt").write_text("find tutorials")
    (states / "retriever_response.txt").write_text("tutorial 3")
    (folder / "best_run_0").write_text(f"{s}/node_0")
    if tokens:
        sessions = {"single_turn_tool_selector_20260501100004": [10, 1],
                    "multi_turn_python_coder_20260501100000": [700, 60],
                    "single_turn_retriever_20260501100006": [200, 20],
                    "single_turn_error_analyzer_20260501100231": [90, 19]}
        (folder / "token_usage.json").write_text(json.dumps({
            "total": {"total_input_tokens": 1000, "total_output_tokens": 100, "total_tokens": 1100},
            "sessions": {k: {"input_tokens": a, "output_tokens": b, "total_tokens": a + b}
                         for k, (a, b) in sessions.items()}}))
    return folder


def test_small_run_tree_tokens_and_prompts(store, tmp_path):
    sid = import_mlzero(store, _write_run(tmp_path / "7-addition_2"))
    state = _state(store, sid)
    assert state.level == "fairness-metric" and state.budget == 5 and state.coder["model"] == "gpt-x"
    assert [(n.node_id, n.parent_id, n.stage, n.status, n.claimed_metric) for n in state.nodes.values()] == [
        (1, None, "draft", "ok", 0.8), (2, 1, "improve", "buggy", None), (3, 2, "debug", "ok", 0.7)]
    assert state.nodes[1].exec_time == 60.0 and state.nodes[2].review_summary == "KeyError 'label'"
    assert state.nodes[1].code.startswith("import pandas") and state.nodes[1].audit_flags is not None
    assert (state.tokens_in, state.tokens_out) == (1000, 100)
    retriever = [c for c in state.nodes[1].conversation if c["role"] == "retriever"]
    assert len(retriever) == 1 and retriever[0]["tokens_in"] == 200
    assert retriever[0]["messages"] == [{"role": "user", "content": "find tutorials"}]
    assert retriever[0]["reply"] == "tutorial 3"
    assert [c["role"] for c in state.nodes[2].conversation] == ["error_analyzer"]
    assert sorted(c["role"] for c in state.unassigned_calls) == ["python_coder", "tool_selector"]
    assert state.final_choice["by_claimed"] == 1


def test_without_token_usage_the_log_total_is_recorded(store, tmp_path):
    sid = import_mlzero(store, _write_run(tmp_path / "8-basic_prompt", tokens=False))
    state = _state(store, sid)
    assert (state.tokens_in, state.tokens_out) == (1000, 100)
    assert [c["role"] for c in state.unassigned_calls] == ["run total"]
    assert "token_usage.json is missing" in state.unassigned_calls[0]["tokens_note"]


def test_folders_that_are_not_runs(store, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="not an MLZero run folder"):
        import_mlzero(store, tmp_path / "empty")
    no_search = tmp_path / "no-search"
    no_search.mkdir()
    (no_search / "logs.txt").write_text(_line("10:00:00", "BRIEF", "x", "Analyzing folder: /d") + "\n")
    with pytest.raises(DataError, match="no MCTS iteration"):
        import_mlzero(store, no_search)
    broken = _write_run(tmp_path / "9-basic_prompt")
    (broken / "token_usage.json").write_text("{not json")
    with pytest.raises(DataError, match="token_usage.json"):
        import_mlzero(store, broken)
    assert store.sessions() == []
