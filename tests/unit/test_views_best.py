"""The presentation model's "best": pruned and failed nodes never chosen, the reason said, the
tree's ★ the same node as the final choice (recorded or computed), minimax as the final choice's
Pareto rule picks it."""
from __future__ import annotations

import random

from engine.session.selection import minimax_pareto
from engine.session import events as ev
from engine.session import views
from engine.session.selection import CRITERIA as BEST_CRITERIA
from engine.session.selection import best as best_node
from engine.session.state import apply, fold, memoised
from tests.unit.test_reducer import Log


def _groups_log(groups: dict[int, dict[str, float]], *, best: str = "minimax") -> Log:
    log = Log().start(best=best)
    for nid, vec in groups.items():
        worst, top = min(vec.values()), max(vec.values())
        log.node(nid).finish(nid)
        log.add(ev.EVALUATED, node_id=nid, split="validation", ok=True, verdict="ok", reason=None,
                summary={"auc": sum(vec.values()) / len(vec), "worst_auc": worst, "best_auc": top,
                         "auc_gap": top - worst, "group_auc": dict(vec), "n": 30}, medfair={}, blinded=False)
    return log


def test_pruned_and_failed_nodes_are_never_best_and_the_reason_says_so():
    log = Log().start().node(1).finish(1).review(1, 0.99).evaluate(1, 0.6, 0.5, 0.1)
    log.node(2, 1, "improve").finish(2).review(2, 0.7).evaluate(2, 0.9, 0.8, 0.1)
    log.node(3).finish(3, "buggy", exc_type="KeyError").review(3, 0.999, True)
    log.add(ev.PRUNED, node_id=1, by="u", command_id=None)  # prunes 1 and 2 below it
    log.node(4).finish(4).review(4, 0.5).evaluate(4, 0.55, 0.5, 0.05)
    state = fold(log.events)
    choices = views.best_by_criterion(state)
    # robust: no node has intervals (recorded without them), so no robust choice
    assert {c: b.node_id for c, b in choices.items()} == {"claimed": 4, "validation": 4, "minimax": 4, "robust": None}
    assert all(not b.recorded for b in choices.values())
    assert "not considered: 2 pruned, 1 failed" in choices["validation"].reason
    assert views.best_id(state) == 4 == best_node(state, "validation").node_id
    summary = views.node_summary(state, state.nodes[2], best=views.best_id(state))
    assert summary.pruned and not summary.best and "✂ pruned" in summary.compact()


def test_the_recorded_final_choice_is_the_star_and_a_resume_forgets_it():
    log = Log().start().node(1).finish(1).evaluate(1, 0.6, 0.5, 0.1).node(2).finish(2).evaluate(2, 0.7, 0.6, 0.1)
    log.add(ev.FINAL_CHOICE, by_claimed=None, by_validation=1, by_minimax=1,
            reasons={"validation": "node 1: the engine's pick"})
    log.add(ev.SESSION_FINISHED, status="finished", reason="done")
    state = fold(log.events)
    choice = views.best_choice(state)
    assert (choice.node_id, choice.recorded, choice.reason) == (1, True, "node 1: the engine's pick")
    assert views.best_id(state) == 1 and views.final_choices(state)["claimed"] is None
    assert "★ best" in views.node_line(state, state.nodes[1]) and "★" not in views.node_line(state, state.nodes[2])
    log.add(ev.SESSION_RESUMED, interrupted=[])
    state = fold(log.events)
    assert views.best_id(state) == 2 and not views.best_choice(state).recorded


def test_no_working_node_means_no_best_with_a_reason():
    log = Log().start().node(1).finish(1, "buggy", exc_type="KeyError")
    choice = views.best_choice(fold(log.events), "claimed")
    assert choice.node_id is None and "no working, unpruned node" in choice.reason and "1 failed" in choice.reason


def test_minimax_best_is_the_pareto_final_choice_even_on_ties():
    rng = random.Random(7)
    for _ in range(200):
        # one decimal: ties of the worst group are common (generated data reaches 1.0 often)
        groups = {nid: {g: round(rng.uniform(0.5, 1.0), 1) for g in ("group_0", "group_1", "group_2")}
                  for nid in range(1, rng.randint(2, 9))}
        state = fold(_groups_log(groups).events)
        assert views.best_id(state, "minimax") == minimax_pareto(groups), groups


def test_minimax_prefers_the_higher_mean_when_the_worst_groups_tie():
    groups = {1: {"group_0": 0.9, "group_1": 0.8}, 2: {"group_0": 1.0, "group_1": 0.8},
              3: {"group_0": 1.0, "group_1": 0.8}}
    state = fold(_groups_log(groups).events)
    assert views.best_id(state, "minimax") == 2 == minimax_pareto(groups)


def test_one_pass_for_every_criterion_picks_what_each_criterion_picks_alone():
    """The console's memoised path (all criteria in one pass) chooses exactly what each
    criterion chooses alone."""
    rng = random.Random(11)
    for _ in range(200):
        groups = {nid: {g: round(rng.uniform(0.5, 1.0), 1) for g in ("group_0", "group_1", "group_2")}
                  for nid in range(1, rng.randint(2, 12))}
        log = _groups_log(groups)
        for nid in groups:
            log.review(nid, round(rng.uniform(0.5, 1.0), 1))
        if rng.random() < 0.5:
            log.add(ev.PRUNED, node_id=rng.choice(list(groups)), by="u", command_id=None)
        state = fold(log.events)
        alone = {c: best_node(state, c) for c in BEST_CRITERIA}
        with memoised(state):
            together = {c: best_node(state, c) for c in BEST_CRITERIA}
        assert together == alone, groups


def test_an_event_folded_inside_a_memoised_block_is_not_hidden_by_the_memo():
    log = Log().start().node(1).finish(1).review(1, 0.7).evaluate(1, 0.6, 0.5, 0.1)
    state = fold(log.events)
    with memoised(state):
        assert views.best_id(state) == 1 and state.pruned_ids() == frozenset()
        seen = len(log.events)
        log.node(2).finish(2).review(2, 0.8).evaluate(2, 0.9, 0.8, 0.1)
        log.add(ev.PRUNED, node_id=1, by="u", command_id=None)
        for event in log.events[seen:]:
            apply(state, event)
        assert views.best_id(state) == 2 and state.pruned_ids() == frozenset({1})
    assert state.memo is None
