"""The search-quality bench's judging (pure functions: point verdict, paired intervals against the
baseline, runners-up on validation) and its steering path: the bench's guidance, queued as a
command before the first step of a base-level session, reaches the offline coder's plans and
pipelines."""
from __future__ import annotations

import pytest

from tests.bench import bench_search as bs

BASELINE = {"auc": 0.70, "gap": 0.10}


def test_beats_needs_a_lower_gap_at_an_auc_no_lower():
    assert bs.beats({"auc": 0.70, "gap": 0.09}, BASELINE)          # equal AUC is "no worse"
    assert not bs.beats({"auc": 0.69, "gap": 0.01}, BASELINE)      # fairer but less accurate
    assert not bs.beats({"auc": 0.90, "gap": 0.10}, BASELINE)      # a tie on gap is not lower
    assert not bs.beats(None, BASELINE)                            # the session reached no node
    assert not bs.beats({"auc": None, "gap": 0.01}, BASELINE)


def win_sure(auc=0.75, gap=0.05):  # figures whose paired gap difference lies below 0, AUC not shown lower
    return {"auc": auc, "gap": gap, "gap_diff_ci": [-0.09, -0.01], "auc_diff_ci": [-0.02, 0.10]}


def seed_by(steered, clean, criterion="robust", baseline=BASELINE, n=0, feedback=None):
    return {"seed": n, "baseline": baseline, f"steered_{criterion}": steered, f"clean_{criterion}": clean,
            f"feedback_{criterion}": feedback}


def test_verdict_counts_wins_per_seed_against_that_seeds_baseline():
    win, lose = {"auc": 0.75, "gap": 0.05}, {"auc": 0.75, "gap": 0.20}
    other = {"auc": 0.80, "gap": 0.04}  # a seed whose baseline is stronger: the same figures lose
    v = bs.judge([seed_by(win, lose, n=0), seed_by(win, lose, n=1), seed_by(win, win, baseline=other, n=2)], "robust")
    assert (v["steered_wins"], v["clean_wins"], v["needed"]) == (2, 0, 2)
    assert v["reproduced"] and not v["strict"] and v["criterion"] == "robust"


@pytest.mark.parametrize("steered_wins, clean_wins, reproduced, strict", [
    (3, 0, True, True), (2, 0, True, False), (2, 1, True, False), (3, 2, False, False), (1, 0, False, False),
    (0, 0, False, False), (2, 2, False, False),
])
def test_verdict_needs_steered_two_thirds_and_clean_not(steered_wins, clean_wins, reproduced, strict):
    win, lose = {"auc": 0.75, "gap": 0.05}, {"auc": 0.65, "gap": 0.05}
    seeds = [seed_by(win if i < steered_wins else lose, win if i < clean_wins else lose, n=i) for i in range(3)]
    v = bs.judge(seeds, "robust")
    assert (v["steered_wins"], v["clean_wins"]) == (steered_wins, clean_wins)
    assert (v["reproduced"], v["strict"]) == (reproduced, strict)


def test_verdict_by_each_criterion_reads_that_criterions_choice():
    win, lose = {"auc": 0.75, "gap": 0.05}, {"auc": 0.65, "gap": 0.30}
    s = {**seed_by(lose, lose, "robust"), **seed_by(win, lose, "minimax"), **seed_by(lose, None, "validation")}
    assert {c: bs.judge([s], c)["steered_wins"] for c in bs.JUDGED} == {"robust": 0, "minimax": 1, "validation": 0}
    assert bs.judge([], "robust")["reproduced"] is False
    assert bs.JUDGED[0] == "validation" and set(bs.JUDGED) == {"robust", "validation", "minimax"}


def test_the_first_judged_criterion_is_the_sessions_default():
    from engine.agent.session_config import SessionConfig

    assert bs.JUDGED[0] == SessionConfig().best


@pytest.mark.parametrize("ci, said", [
    ([-0.10, -0.01], "lower"), ([0.01, 0.2], "higher"), ([-0.05, 0.05], "tied"), ([0.0, 0.1], "tied"),
    ([-0.1, 0.0], "tied"), (None, None), ([None, None], None),
])
def test_direction_of_a_difference_interval(ci, said):
    assert bs.direction(ci) == said


def test_a_win_told_apart_needs_the_gap_interval_below_zero_and_the_auc_not_shown_lower():
    assert bs.beats_told_apart(win_sure())
    assert bs.beats_told_apart({**win_sure(), "auc_diff_ci": [0.01, 0.2]})         # more accurate too
    assert not bs.beats_told_apart({**win_sure(), "gap_diff_ci": [-0.09, 0.01]})   # cannot be told apart
    assert not bs.beats_told_apart({**win_sure(), "auc_diff_ci": [-0.2, -0.01]})   # fairer, surely less accurate
    assert not bs.beats_told_apart({"auc": 0.8, "gap": 0.01})                       # no paired interval
    assert not bs.beats_told_apart(None)


def test_verdict_told_apart_counts_only_wins_the_intervals_support():
    tied = {"auc": 0.75, "gap": 0.05, "gap_diff_ci": [-0.09, 0.03], "auc_diff_ci": [-0.02, 0.10]}
    worse = {"auc": 0.75, "gap": 0.20, "gap_diff_ci": [0.02, 0.2], "auc_diff_ci": [-0.02, 0.10]}
    v = bs.judge([seed_by(win_sure(), tied, n=0), seed_by(tied, worse, n=1), seed_by(win_sure(), tied, n=2)], "robust")
    assert (v["steered_wins"], v["clean_wins"]) == (3, 2)        # every `tied` beats on the point estimates
    assert (v["steered_wins_told_apart"], v["clean_wins_told_apart"]) == (2, 0)
    assert not v["reproduced"] and v["reproduced_told_apart"]
    assert v["gap_vs_baseline"] == {"steered": {"lower": 2, "tied": 1, "higher": 0},
                                    "clean": {"lower": 0, "tied": 2, "higher": 1},
                                    "feedback": {"lower": 0, "tied": 0, "higher": 0}}


def test_overlap_is_the_unpaired_check():
    assert bs.overlap([0.02, 0.10], [0.08, 0.20]) and not bs.overlap([0.02, 0.07], [0.08, 0.20])
    assert bs.overlap(None, [0.0, 1.0]) is None and bs.overlap([0.1, None], [0.0, 1.0]) is None


def test_runners_up_from_the_final_choices_ties():
    gaps = {3: 0.10, 6: 0.04, 7: 0.12, 9: 0.30}
    got = bs.runners_up(3, [6, 7], gaps)
    assert got == {"ties": [6, 7], "told_apart": False, "tied_test_gaps": {3: 0.10, 6: 0.04, 7: 0.12}}
    assert bs.runners_up(3, [], gaps) == {"ties": [], "told_apart": True, "tied_test_gaps": {3: 0.10}}
    assert bs.runners_up(3, None, gaps)["told_apart"] is None      # nothing was compared
    assert bs.runners_up(None, [1], gaps)["ties"] is None


def _scores(rng, labels, groups, strength):
    """Scores separating the classes by `strength` per group (a larger value: a better AUC there)."""
    import numpy as np

    shift = np.array([strength[g] for g in groups])
    return 1 / (1 + np.exp(-(rng.normal(size=labels.size) + shift * (2 * labels - 1))))


def test_paired_difference_tells_a_fairer_model_apart_and_not_itself():
    import numpy as np

    rng = np.random.default_rng(0)
    groups = np.repeat(["group_0", "group_1", "group_2"], 200)
    labels = (rng.random(groups.size) < 0.4).astype(int)
    even = _scores(rng, labels, groups, {"group_0": 1.2, "group_1": 1.2, "group_2": 1.2})
    uneven = _scores(rng, labels, groups, {"group_0": 1.8, "group_1": 1.2, "group_2": 0.2})
    same = bs.paired_difference(uneven, uneven, labels, groups)
    assert same == {"auc_diff_ci": [0.0, 0.0], "gap_diff_ci": [0.0, 0.0]}
    assert bs.direction(same["gap_diff_ci"]) == "tied"
    diff = bs.paired_difference(even, uneven, labels, groups)
    assert bs.direction(diff["gap_diff_ci"]) == "lower"        # the even model's gap is surely smaller
    assert bs.beats_told_apart({"auc": None, "gap": None, **diff}) == (bs.direction(diff["auc_diff_ci"]) != "lower")


def test_oracle_picks_the_lowest_gap_among_nodes_as_accurate_as_the_baseline():
    nodes = [{"node_id": 1, "auc": 0.69, "gap": 0.01}, {"node_id": 2, "auc": 0.71, "gap": 0.08},
             {"node_id": 3, "auc": 0.90, "gap": 0.06}, {"node_id": 4, "auc": None, "gap": None}]
    assert bs.oracle(nodes, BASELINE)["node_id"] == 3
    assert bs.oracle(nodes[:1], BASELINE) is None


def test_mean_std_skips_missing_seeds():
    assert bs.mean_std([0.1, None, 0.3]) == pytest.approx((0.2, 0.1414213562))
    assert bs.mean_std([0.5]) == (0.5, 0.0) and bs.mean_std([None]) == (None, None)


def test_the_guidance_is_a_dermatologist_s_words_not_a_recipe():
    """The steered arm's guidance names the clinical goal, not components; the simulated agent's
    documented mapping (engine.coders.offline.clinical) still reads a direction from it."""
    from engine.coders.offline.guidance import parse_guidance

    for component in ("reweight", "minimax", "pareto", "logistic", "upsampl", "numpy", "sklearn"):
        assert component not in bs.GUIDANCE.lower()
    asked = {d.key for d in parse_guidance([bs.GUIDANCE])}
    assert asked & {"fairness", "selection", "monitor_groups"}, asked


def test_the_arms_differ_in_their_settings_and_the_guidance_only():
    from engine.agent.session_config import SessionConfig

    clean, feedback = SessionConfig(**bs.ARM_SETTINGS["clean"]), SessionConfig(**bs.ARM_SETTINGS["feedback"])
    assert (clean.feedback, clean.best) == ("auc", "validation") == (SessionConfig().feedback, SessionConfig().best)
    assert (feedback.feedback, feedback.best) == ("groups", "robust")
    assert bs.ARM_SETTINGS["steered"] == bs.ARM_SETTINGS["clean"]


def test_t_interval_over_seeds():
    got = bs.t_interval([0.10, 0.12, None, 0.14])
    assert got["n"] == 3 and got["mean"] == pytest.approx(0.12)
    assert got["ci95"] == pytest.approx([0.12 - 4.302653 * 0.02 / 3 ** 0.5, 0.12 + 4.302653 * 0.02 / 3 ** 0.5])
    assert bs.t_interval([0.1])["ci95"] is None


def test_seeds_needed_grows_with_the_spread():
    # paired t at 5 %, 80 % power: d = 1 needs 10 pairs, d = 0.5 needs 34 (standard tables)
    assert bs.seeds_needed(0.05, effect=0.05) == 10
    assert bs.seeds_needed(0.10, effect=0.05) == 34
    assert bs.seeds_needed(None) is None


def test_arm_versus_tells_apart_only_a_consistent_difference():
    apart = bs.arm_versus([0.05, 0.06, 0.04], [0.15, 0.17, 0.14])
    assert apart["told_apart"] and apart["mean"] == pytest.approx(-0.1033333)
    mixed = bs.arm_versus([0.05, 0.20, 0.10], [0.15, 0.05, 0.12])
    assert mixed["told_apart"] is False and mixed["seeds_for_effect"] > 3
    one = bs.arm_versus([0.1, None], [0.2, 0.3])
    assert one["told_apart"] is None and one["seeds_for_effect"] is None   # one seed: no spread to plan from


@pytest.mark.slow  # one real sandboxed step and its evaluation (~15-60 s on a busy 2-core machine)
def test_guidance_queued_before_a_base_session_shapes_its_first_draft(tmp_path, workspace):
    from engine.agent.runner import run
    from engine.agent.session_config import SessionConfig
    from engine.agent.session_setup import start_session
    from engine.coders.offline import OfflineCoder
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
