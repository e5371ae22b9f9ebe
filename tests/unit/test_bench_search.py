"""The search-quality bench's judging (pure functions) and its steering path: the bench's guidance,
queued as a command before the first step of a base-level session, reaches the offline coder's
plans and pipelines."""
from __future__ import annotations

import pytest

from tests.bench import bench_search as bs

BASELINE = {"auc": 0.70, "gap": 0.10}


def seed(steered, base, baseline=BASELINE, n=0):
    return {"seed": n, "baseline": baseline, "steered": steered, "base": base}


def test_beats_needs_a_lower_gap_at_an_auc_no_lower():
    assert bs.beats({"auc": 0.70, "gap": 0.09}, BASELINE)          # equal AUC is "no worse"
    assert not bs.beats({"auc": 0.69, "gap": 0.01}, BASELINE)      # fairer but less accurate
    assert not bs.beats({"auc": 0.90, "gap": 0.10}, BASELINE)      # a tie on gap is not lower
    assert not bs.beats(None, BASELINE)                            # the session reached no node
    assert not bs.beats({"auc": None, "gap": 0.01}, BASELINE)


def test_verdict_counts_wins_per_seed_against_that_seeds_baseline():
    win, lose = {"auc": 0.75, "gap": 0.05}, {"auc": 0.75, "gap": 0.20}
    other = {"auc": 0.80, "gap": 0.04}  # a seed whose baseline is stronger: the same figures lose
    v = bs.judge([seed(win, lose, n=0), seed(win, lose, n=1), seed(win, win, other, n=2)])
    assert (v["steered_wins"], v["base_wins"], v["needed"]) == (2, 0, 2)
    assert v["reproduced"] and not v["strict"]


@pytest.mark.parametrize("steered_wins, base_wins, reproduced, strict", [
    (3, 0, True, True), (2, 0, True, False), (2, 1, True, False), (3, 2, False, False), (1, 0, False, False),
    (0, 0, False, False), (2, 2, False, False),
])
def test_verdict_needs_steered_two_thirds_and_base_not(steered_wins, base_wins, reproduced, strict):
    win, lose = {"auc": 0.75, "gap": 0.05}, {"auc": 0.65, "gap": 0.05}
    seeds = [seed(win if i < steered_wins else lose, win if i < base_wins else lose, n=i) for i in range(3)]
    v = bs.judge(seeds)
    assert (v["steered_wins"], v["base_wins"]) == (steered_wins, base_wins)
    assert (v["reproduced"], v["strict"]) == (reproduced, strict)


def test_verdict_on_another_choice_reads_its_own_key():
    win, lose = {"auc": 0.75, "gap": 0.05}, {"auc": 0.65, "gap": 0.30}
    s = {**seed(lose, lose), "steered_minimax_choice": win, "base_minimax_choice": lose}
    assert bs.judge([s])["steered_wins"] == 0 and bs.judge([s], "_minimax_choice")["steered_wins"] == 1
    assert bs.judge([])["reproduced"] is False


def test_oracle_picks_the_lowest_gap_among_nodes_as_accurate_as_the_baseline():
    nodes = [{"node_id": 1, "auc": 0.69, "gap": 0.01}, {"node_id": 2, "auc": 0.71, "gap": 0.08},
             {"node_id": 3, "auc": 0.90, "gap": 0.06}, {"node_id": 4, "auc": None, "gap": None}]
    assert bs.oracle(nodes, BASELINE)["node_id"] == 3
    assert bs.oracle(nodes[:1], BASELINE) is None


def test_mean_std_skips_missing_seeds():
    assert bs.mean_std([0.1, None, 0.3]) == pytest.approx((0.2, 0.1414213562))
    assert bs.mean_std([0.5]) == (0.5, 0.0) and bs.mean_std([None]) == (None, None)


def test_the_guidance_asks_for_reweighting_and_minimax_selection():
    from engine.agent.grammar import parse_guidance

    asked = {d.key: d.value for d in parse_guidance([bs.GUIDANCE])}
    assert asked == {"fairness": "reweight", "selection": "minimax"}


@pytest.mark.slow  # one real sandboxed step and its evaluation (~15-60 s on a busy 2-core machine)
def test_guidance_queued_before_a_base_session_shapes_its_first_draft(tmp_path, workspace):
    from engine.agent.offline import OfflineCoder
    from engine.agent.runner import run, start_session
    from engine.config import SessionConfig
    from engine.session.store import SessionStore

    store = SessionStore(tmp_path / "befair.db")
    config = SessionConfig(level=bs.LEVEL, steps=1, seed=3, failure_rate=0.0, data=str(workspace.root),
                           step_timeout=60)
    coder = OfflineCoder(failure_rate=0.0, seed=3, device="cpu", step_timeout=60)
    writer = start_session(store, config, workspace=workspace, coder=coder)
    store.issue_command(writer.session_id, "guide", {"text": bs.GUIDANCE, "scope": "global"}, by="bench")
    state = run(store, writer.session_id, coder=coder, workspace=workspace, writer=writer)
    store.close()
    node = state.nodes[1]
    assert state.guidance[1].text == bs.GUIDANCE and node.guidance_ids == [1]
    assert node.components["fairness"] == "reweight" and node.components["selection"] == "minimax"
    assert "Following guidance" in node.plan and "minimax" in node.plan
    assert node.status == "ok", node.output_tail
    assert node.audit_flags["reweighting"] and node.audit_flags["pareto_selection"]
