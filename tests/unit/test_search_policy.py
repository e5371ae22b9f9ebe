"""The search policy (AIDE's rule, befair's rule, plus human commands), as a pure function of folded events.
The tests below use AIDE's rule unless they say `policy="befair"`."""
from __future__ import annotations

import random

from engine.agent.policy import debuggable, decide, policy_rng
from engine.session.selection import is_failed as is_buggy
from engine.agent.session_config import SessionConfig
from engine.session import events as ev
from engine.session.state import fold


class Log:
    def __init__(self, **config):
        config.setdefault("policy", "aide")
        self.config = SessionConfig(**{"best": "validation", **config})
        self.events: list[ev.Event] = []
        self.add(ev.SESSION_STARTED, config=self.config.to_dict(), instruction="x",
                 coder={"name": "offline", "label": "offline coder (simulated agent)", "simulated": True},
                 data={"kind": "synth", "path": "/tmp"})

    def add(self, kind, **payload):
        self.events.append(ev.Event(seq=len(self.events) + 1, kind=kind, payload=payload, ts=float(len(self.events))))

    def node(self, nid, stage="draft", parent=None, status="ok", auc=None, worst=None, claimed=None, origin="agent",
             exc="KeyError", code="print(1)"):
        self.add(ev.NODE_CREATED, node_id=nid, parent_id=parent, step=nid, stage=stage, plan="p", guidance_ids=[],
                 components=None, origin=origin)
        if code:
            self.add(ev.CODE, node_id=nid, code=code)
        self.add(ev.EXEC_FINISHED, node_id=nid, status=status, exit_code=0 if status == "ok" else 1, exec_time=1.0,
                 exc_type=None if status == "ok" else exc, output_head="", output_tail="", truncated=False)
        self.add(ev.REVIEW, node_id=nid, is_bug=status != "ok", summary="", claimed_metric=claimed)
        if status == "ok" and auc is not None:
            self.add(ev.EVALUATED, node_id=nid, split="validation", ok=True, verdict="ok", reason=None,
                     summary={"auc": auc, "worst_auc": worst if worst is not None else auc, "auc_gap": 0.1,
                              "group_auc": {"group_0": worst if worst is not None else auc, "group_1": auc},
                              "group_auc_reason": {}, "n": 10}, medfair={}, blinded=False)
        return self

    @property
    def state(self):
        return fold(self.events)


def _decide(log, seed=0):
    st = log.state
    return decide(st, policy_rng(seed, st.agent_steps), log.config)


def test_drafts_first_then_budget():
    log = Log(steps=3, num_drafts=2)
    assert _decide(log).action == "draft"
    log.node(1, auc=0.7)
    d = _decide(log)
    assert d.action == "draft" and "2 of 2" in d.reason
    log.node(2, auc=0.8)
    d = _decide(log)
    assert d.action == "improve" and d.node_id == 2 and not d.forced
    log.node(3, "improve", 2, auc=0.6)
    d = _decide(log)
    assert d.action == "finish" and "3/3" in d.reason


def test_best_by_criterion():
    for criterion, expected in (("validation", 1), ("minimax", 2), ("claimed", 3)):
        log = Log(steps=10, num_drafts=3, best=criterion, debug_prob=0.0)
        log.node(1, auc=0.9, worst=0.5, claimed=0.7).node(2, auc=0.8, worst=0.7, claimed=0.6)
        log.node(3, auc=0.7, worst=0.6, claimed=0.99)
        d = _decide(log)
        assert (d.action, d.node_id) == ("improve", expected), criterion


def test_a_claimed_metric_ranks_by_the_direction_the_review_gave():
    """AIDE's MetricValue(maximize=not lower_is_better): a lower loss is the better node."""
    log = Log(steps=10, num_drafts=2, best="claimed", debug_prob=0.0)
    log.node(1, claimed=0.30).node(2, claimed=0.20)
    assert (_decide(log).action, _decide(log).node_id) == ("improve", 1)
    for event in log.events:
        if event.kind == ev.REVIEW:
            event.payload["lower_is_better"] = True
    assert log.state.nodes[2].lower_is_better is True
    assert (_decide(log).action, _decide(log).node_id) == ("improve", 2)


def test_debug_buggy_leaf_until_max_depth():
    log = Log(steps=20, num_drafts=1, debug_prob=1.0, max_debug_depth=2)
    log.node(1, status="buggy")
    d = _decide(log)
    assert (d.action, d.node_id) == ("debug", 1)
    log.node(2, "debug", 1, status="buggy")
    assert (_decide(log).action, _decide(log).node_id) == ("debug", 2)  # node 1 is no longer a leaf
    log.node(3, "debug", 2, status="buggy")
    st = log.state
    assert st.debug_depth(3) == 2 and debuggable(st, 2) == []     # befair's rule: depth < max
    assert [n.node_id for n in debuggable(st, 2, aide=True)] == [3]  # AIDE's: depth <= max
    d = _decide(log)
    assert (d.action, d.node_id) == ("debug", 3) and "2 <= 2" in d.reason
    log.node(4, "debug", 3, status="buggy")
    assert log.state.debug_depth(4) == 3 and debuggable(log.state, 2, aide=True) == []
    d = _decide(log)
    assert d.action == "draft" and "no working node" in d.reason


def test_debug_probability_is_seeded():
    actions = []
    for seed in range(200):
        log = Log(steps=20, num_drafts=2, debug_prob=0.5, seed=seed)
        log.node(1, auc=0.7).node(2, status="buggy")
        actions.append(_decide(log, seed).action)
    assert 60 < actions.count("debug") < 140 and set(actions) == {"debug", "improve"}
    again = []
    for seed in range(200):
        log = Log(steps=20, num_drafts=2, debug_prob=0.5, seed=seed)
        log.node(1, auc=0.7).node(2, status="buggy")
        again.append(_decide(log, seed).action)
    assert again == actions


def test_human_expand_overrides_and_prune_is_respected():
    log = Log(steps=20, num_drafts=5)
    log.node(1, auc=0.7).node(2, status="buggy")
    log.add(ev.EXPAND_REQUESTED, node_id=1, by="user", command_id=1)
    d = _decide(log)
    assert (d.action, d.node_id, d.forced) == ("improve", 1, True)
    log.node(3, "improve", 1, auc=0.75)
    assert _decide(log).action == "draft"  # request used by node 3
    log.add(ev.EXPAND_REQUESTED, node_id=2, by="user", command_id=2)
    d = _decide(log)
    assert (d.action, d.node_id, d.forced) == ("debug", 2, True)
    # a pruned subtree is never expanded, even when asked
    log.add(ev.PRUNED, node_id=2, by="user", command_id=3)
    assert _decide(log).action == "draft"


def test_never_improves_a_pruned_subtree():
    log = Log(steps=20, num_drafts=2, debug_prob=0.0)
    log.node(1, auc=0.9).node(2, auc=0.6).node(3, "improve", 1, auc=0.95)
    log.add(ev.PRUNED, node_id=1, by="user", command_id=1)
    st = log.state
    assert st.is_pruned(3)
    d = _decide(log)
    assert (d.action, d.node_id) == ("improve", 2)


def test_debug_never_picks_pruned_leaf():
    log = Log(steps=20, num_drafts=2, debug_prob=1.0)
    log.node(1, auc=0.9).node(2, status="buggy")
    log.add(ev.PRUNED, node_id=2, by="user", command_id=1)
    d = _decide(log)
    assert (d.action, d.node_id) == ("improve", 1)


def test_ok_run_with_failed_evaluation_counts_as_buggy():
    log = Log(steps=20, num_drafts=1, debug_prob=1.0)
    log.node(1)
    log.add(ev.EVALUATED, node_id=1, split="validation", ok=False, verdict="no_predict", reason="no predict",
            summary={}, medfair={}, blinded=False)
    st = log.state
    assert is_buggy(st.nodes[1])
    assert (_decide(log).action, _decide(log).node_id) == ("debug", 1)


def test_budget_raised_by_command_and_human_nodes_do_not_count():
    log = Log(steps=1, num_drafts=5)
    log.node(1, auc=0.7).node(2, stage="human", origin="human", auc=0.8)
    assert _decide(log).action == "finish"
    log.add(ev.BUDGET_SET, steps=3, by="user", command_id=1)
    assert _decide(log).action == "draft"


def test_policy_rng_is_per_step():
    assert policy_rng(1, 5).random() == policy_rng(1, 5).random()
    assert policy_rng(1, 5).random() != policy_rng(1, 6).random()
    assert isinstance(policy_rng(0, 0), random.Random)


# -- befair's rule ---------------------------------------------------------------------------

def test_befair_draft_count_scales_with_the_budget():
    from engine.agent.policy import draft_target

    assert [draft_target(SessionConfig(steps=n), n) for n in (1, 4, 6, 8, 10, 20, 60)] == [1, 1, 2, 2, 3, 5, 5]
    assert draft_target(SessionConfig(steps=20, num_drafts=2), 20) == 2          # given: kept
    assert draft_target(SessionConfig(steps=4, policy="aide"), 4) == 5           # AIDE's 5, whatever the budget
    assert draft_target(SessionConfig(steps=4, protocol="be-fair", best="claimed"), 4) == 5   # be-fair: aide


def test_befair_debugs_a_failed_draft_once_the_drafts_are_done():
    log = Log(steps=6, policy="befair")                       # 2 drafts
    d = _decide(log)
    assert d.action == "draft" and "draft 1 of 2" in d.reason and "scales with the budget" in d.reason
    log.node(1, status="buggy", exc="ValueError")
    d = _decide(log)
    assert d.action == "draft" and "draft 2 of 2" in d.reason   # more drafts needed: draft first
    log.node(2, status="buggy", exc="KeyError")
    d = _decide(log)
    assert (d.action, d.node_id) == ("debug", 2)                 # then the latest failure is debugged
    log.node(3, "debug", 2, status="buggy", exc="KeyError")
    assert (_decide(log).action, _decide(log).node_id) == ("debug", 3)   # and its debug, down the chain
    log.node(4, "debug", 3, auc=0.7)
    d = _decide(log)
    assert (d.action, d.node_id) == ("improve", 4)               # a working node: improve the best


def test_befair_a_second_draft_failing_the_same_way_is_always_debugged():
    log = Log(steps=20, policy="befair")                      # 5 drafts
    log.node(1, status="buggy", exc="ValueError")
    assert _decide(log).action == "draft"
    log.node(2, status="buggy", exc="ValueError")
    d = _decide(log)
    assert (d.action, d.node_id) == ("debug", 2) and "as draft 1 did" in d.reason
    log.node(3, "debug", 2, auc=0.7)
    assert _decide(log).action == "draft"                        # the drafts go on after it worked


def test_befair_the_depth_limit_and_nodes_without_code():
    log = Log(steps=10, policy="befair", num_drafts=1, max_debug_depth=1)
    log.node(1, status="buggy")
    assert (_decide(log).action, _decide(log).node_id) == ("debug", 1)
    log.node(2, "debug", 1, status="buggy")
    d = _decide(log)                                           # depth 1 reached, nothing else to debug
    assert d.action == "draft" and "no failure left to debug" in d.reason
    log.node(3, status="buggy", exc="CoderError", code="")    # the model wrote no code: nothing to debug
    assert _decide(log).action == "draft"


def test_befair_debugs_a_failed_evaluation_with_its_reason():
    log = Log(steps=6, policy="befair", num_drafts=1)
    log.node(1)
    log.add(ev.EVALUATED, node_id=1, split="validation", ok=False, verdict="predict_error",
            reason="predict raised KeyError: 'x'", summary={}, medfair={}, blinded=False)
    d = _decide(log)
    assert (d.action, d.node_id) == ("debug", 1) and "predict raised KeyError" in d.reason


def test_befair_human_commands_still_come_first_and_old_sessions_keep_aides_rule():
    log = Log(steps=6, policy="befair")
    log.node(1, auc=0.7).node(2, status="buggy")
    log.add(ev.EXPAND_REQUESTED, node_id=1, by="user", command_id=1)
    assert (_decide(log).action, _decide(log).node_id, _decide(log).forced) == ("improve", 1, True)
    recorded = SessionConfig().to_dict()
    del recorded["policy"]                                     # a session recorded before the setting
    assert SessionConfig.from_dict(recorded).policy == "aide"
