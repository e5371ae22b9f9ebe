"""The published AIDE run 5 imported whole: its tree, the tokens of aide.log, and its published DDI
predictions scored here equal to the study's figures (../shared/data; skipped when absent)."""
from __future__ import annotations

import csv
import math
import time
from pathlib import Path

import pytest

from engine.errors import UsageError
from engine.imports.aide import import_aide, read_aide_log
from engine.imports.predictions import PUBLISHED_SOURCE, score_published
from engine.session import events as ev
from engine.session.state import fold
from engine.session.store import SessionStore, node_row

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
RUN = DATA / "aide_journal_example"
PREDICTIONS = DATA / "befair_run_example" / "5-basic_prompt_DDI_predictions.csv"
EXPECTED = DATA / "befair_run_example" / "expected_metrics_aide_run5.csv"
METADATA = DATA / "ddi_metadata.csv"

needs_data = pytest.mark.skipif(not (RUN / "aide.log").is_file() or not PREDICTIONS.is_file() or not METADATA.is_file(),
                                reason="../shared/data (AIDE run 5, its predictions, DDI metadata) is not present")


@pytest.fixture
def store(tmp_path):
    s = SessionStore(tmp_path / "imp.db")
    yield s
    s.close()


def _expected() -> dict[str, str]:
    with EXPECTED.open() as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 1
    return rows[0]


def _assert_same_metrics(measured: dict, expected: dict[str, str]) -> int:
    compared = 0
    for column, published in expected.items():
        if not column.startswith("Test "):
            continue
        value = measured[column]
        if column.endswith("_group"):
            assert value == published, column
        else:
            assert math.isclose(float(value), float(published), rel_tol=0, abs_tol=1e-12), (column, value, published)
        compared += 1
    return compared


@needs_data
def test_published_predictions_scored_here_equal_the_study(store):
    scored = score_published(PREDICTIONS, METADATA)
    assert scored.rows == 656
    assert _assert_same_metrics(scored.medfair(prefix="Test "), _expected()) == 44  # every "Test" column published


@needs_data
def test_aide_run_5_imported_with_log_and_predictions(store):
    started = time.perf_counter()
    sid = import_aide(store, RUN, predictions=PREDICTIONS, metadata=METADATA)
    seconds = time.perf_counter() - started
    events = store.events(sid)
    state = fold(events, sid)
    assert store.nodes(sid) == [node_row(sid, state.nodes[k]) for k in sorted(state.nodes)]
    assert len(state.nodes) == 20 and sum(n.stage == "draft" for n in state.nodes.values()) == 5

    # tokens: every "API call completed" line of aide.log, 41 calls
    log = read_aide_log(RUN / "aide.log")
    assert len(log.calls) == 41 and log.tokens == 194_546
    assert (state.tokens_in, state.tokens_out) == (131_381, 63_165)
    assert state.config["extra"]["aide"]["tokens"] == 194_546
    # per node: its code call and its review call; the report is the run's
    for node in state.nodes.values():
        assert [c["role"] for c in node.conversation][-1] == "review"
        assert len(node.conversation) == 2 and node.tokens_in + node.tokens_out > 0
    assert [c["role"] for c in state.unassigned_calls] == ["report"]
    assert state.unassigned_calls[0]["tokens_in"] + state.unassigned_calls[0]["tokens_out"] == 31_071
    first = state.nodes[1].conversation[0]
    assert first["role"] == "draft" and first["model"] == "o4-mini-2025-04-16"
    assert first["messages"][0]["content"].startswith("# Introduction\n\nYou are a Kaggle grandmaster")
    assert "I propose fine-tuning a pretrained ResNet18" in first["reply"]
    assert (first["tokens_in"], first["tokens_out"]) == (1060, 2536)

    # the published predictions sit on the final node (best_solution.py), labelled as such
    published = [e for e in events if e.kind == ev.EVALUATED]
    assert len(published) == 1
    payload = published[0].payload
    assert payload["source"] == PUBLISHED_SOURCE == "published predictions, scored here"
    assert payload["split"] == "test" and payload["blinded"] is False
    final = state.nodes[payload["node_id"]]
    assert final.code.strip() == (RUN / "best_solution.py").read_text().strip()
    assert state.final_choice["by_claimed"] == final.node_id
    measured = {"Test " + k: v for k, v in final.medfair["test"].items()}
    assert _assert_same_metrics(measured, _expected()) == 44  # every "Test" column published
    assert final.test.auc == pytest.approx(0.603195273406885, abs=1e-12)
    assert store.nodes(sid)[final.node_id - 1]["test_auc"] == pytest.approx(0.603195273406885, abs=1e-12)
    # every surface says where the final node's figures come from (never "measuring…")
    from engine.session import views

    line = views.node_line(state, final)
    assert "test .603 / " in line and "published predictions, scored here" in line and "measuring" not in line
    row = next(r for r in views.node_rows(state, "test") if r.node_id == final.node_id)
    assert row.source == PUBLISHED_SOURCE and row.auc == pytest.approx(0.603195273406885, abs=1e-12)
    print(f"AIDE run 5 imported (20 nodes, 41 calls, predictions scored) in {seconds:.2f} s")


@needs_data
def test_predictions_without_metadata_is_a_usage_error(store):
    with pytest.raises(UsageError, match="metadata"):
        import_aide(store, RUN, predictions=PREDICTIONS)
    assert store.sessions() == []


def test_log_calls_belong_to_the_node_parsed_after_them(tmp_path):
    """Code calls go to the next node AIDE parses (retries included), review calls to the node
    just parsed, the rest to the run; tokens come from each call's 'completed' line."""
    lines = [
        '2026-01-01 00:00:00,000 - INFO - Starting run "x"',
        "2026-01-01 00:00:01,000 - INFO - OpenAI API request: system=# Introduction",
        "",
        "You are a Kaggle grandmaster attending a competition. In order to win this competition, you need to "
        "come up with an excellent and creative plan for a solution",
        ", user=None",
        "2026-01-01 00:00:02,000 - INFO - OpenAI API call completed - m1 - 1.50s - 30 tokens (in: 10, out: 20)",
        "2026-01-01 00:00:02,001 - INFO - OpenAI API response: plan A",
        "```",
        "print(1)",
        "```",
        "2026-01-01 00:00:03,000 - INFO - OpenAI API request: system=# Introduction",
        "come up with an excellent and creative plan (a retry)",
        ", user=extra text",
        "2026-01-01 00:00:04,000 - INFO - OpenAI API call completed - m1 - 1.00s - 7 tokens (in: 3, out: 4)",
        "2026-01-01 00:00:04,001 - INFO - OpenAI API response: plan B",
        "2026-01-01 00:00:05,000 - INFO - Agent is parsing execution results for node aaa",
        "2026-01-01 00:00:05,001 - INFO - OpenAI API request: system=# Introduction",
        "You have written code and now need to evaluate the output of the code execution.",
        ", user=None",
        "2026-01-01 00:00:06,000 - INFO - OpenAI API call completed - m2 - 0.50s - 5 tokens (in: 4, out: 1)",
        "2026-01-01 00:00:06,001 - INFO - OpenAI API response: {'is_bug': False}",
        "2026-01-01 00:00:07,000 - INFO - OpenAI API request: system=# Role",
        "write a report",
        ", user=None",
        "2026-01-01 00:00:08,000 - INFO - OpenAI API call completed - m3 - 2.00s - 100 tokens (in: 90, out: 10)",
    ]
    path = tmp_path / "aide.log"
    path.write_text("\n".join(lines) + "\n")
    log = read_aide_log(path)
    assert [(c.role, c.aide_node, c.tokens) for c in log.calls] == [
        ("draft", "aaa", 30), ("draft", "aaa", 7), ("review", "aaa", 5), ("report", None, 100)]
    assert log.tokens == 142 and log.parsed_nodes == ["aaa"]
    assert log.calls[0].reply == "plan A\n```\nprint(1)\n```" and log.calls[0].user is None
    assert log.calls[1].user == "extra text" and log.calls[1].model == "m1" and log.calls[1].latency_s == 1.0
