"""The reducer: pure, deterministic, and each event kind's effect on the state."""
from __future__ import annotations

import copy

import pytest

from engine.session import events as ev
from engine.session.selection import best as best_node
from engine.session.selection import figure as metric_for
from engine.session.state import OUTPUT_KEEP, fold


class Log:
    """Builds an event list with consecutive seqs and timestamps."""

    def __init__(self):
        self.events: list[ev.Event] = []

    def add(self, kind, **payload):
        self.events.append(ev.Event(seq=len(self.events) + 1, kind=kind, payload=payload,
                                    ts=1000.0 + len(self.events), session_id="s"))
        return self

    def start(self, steps=10, best="validation"):
        return self.add(ev.SESSION_STARTED, config={"level": "base", "steps": steps, "best": best},
                        instruction="x", coder={"name": "offline", "simulated": True}, data={})

    def node(self, nid, parent=None, stage="draft", guidance_ids=(), origin="agent"):
        return self.add(ev.NODE_CREATED, node_id=nid, parent_id=parent, step=nid, stage=stage, plan="p",
                        guidance_ids=list(guidance_ids), components=None, origin=origin)

    def finish(self, nid, status="ok", **kw):
        return self.add(ev.EXEC_FINISHED, node_id=nid, status=status, exit_code=0 if status == "ok" else 1,
                        exec_time=1.0, exc_type=kw.get("exc_type"), output_head="h", output_tail="",
                        truncated=False)

    def evaluate(self, nid, auc, worst, gap, split="validation", ok=True, blinded=False):
        summary = {"auc": auc, "worst_auc": worst, "best_auc": worst + gap, "auc_gap": gap,
                   "group_auc": {"group_0": worst + gap, "group_2": worst}, "group_auc_reason": {}, "n": 10}
        return self.add(ev.EVALUATED, node_id=nid, split=split, ok=ok, verdict="ok" if ok else "nan",
                        reason=None if ok else "NaN predictions", summary=summary, medfair={"auc": auc},
                        blinded=blinded)

    def review(self, nid, claimed, is_bug=False):
        return self.add(ev.REVIEW, node_id=nid, is_bug=is_bug, summary="s", claimed_metric=claimed)


def _rich_log() -> Log:
    log = Log().start()
    log.node(1).add(ev.CODE, node_id=1, code="print(1)").add(ev.EXEC_STARTED, node_id=1, workdir="w1")
    log.add(ev.OUTPUT, node_id=1, text="a\n", stream="stdout").finish(1).review(1, 0.9).evaluate(1, 0.70, 0.60, 0.15)
    log.node(2).finish(2, "buggy", exc_type="KeyError").review(2, 0.95, True)
    log.node(3, parent=2, stage="debug").finish(3).review(3, 0.8).evaluate(3, 0.75, 0.62, 0.20)
    log.add(ev.LLM_CALL, node_id=3, role="debug", model="m", tokens_in=100, tokens_out=50, latency_s=1.0,
            cost=0.25, ok=True, error=None)
    log.add(ev.AUDITED, node_id=3, flags={"reweighting": True}, evidence={"reweighting": "line 3"},
            claim={"claimed": 0.8, "measured": 0.75, "difference": 0.05, "unsupported": False})
    return log


def test_fold_is_deterministic_and_pure():
    events = _rich_log().events
    before = copy.deepcopy(events)
    a, b = fold(events), fold(events)
    assert a == b
    assert a is not b and a.nodes[1] is not b.nodes[1]
    assert events == before  # the events are not mutated
    assert fold(events[:5]) == fold(events[:5])


def test_basic_fields():
    s = fold(_rich_log().events)
    assert s.status == "running" and s.session_id == "s" and s.budget == 10 and s.simulated
    assert s.last_seq == len(_rich_log().events)
    n1, n2, n3 = s.nodes[1], s.nodes[2], s.nodes[3]
    assert n1.code == "print(1)" and n1.workdir == "w1" and n1.live_output == "a\n"
    assert n2.status == "buggy" and n2.failure_reason == "KeyError" and n2.claimed_metric == 0.95
    assert n2.children == [3] and n3.stage == "debug" and s.debug_depth(3) == 1
    assert n3.tokens_in == 100 and s.tokens_out == 50 and s.cost == 0.25
    assert n3.audit_flags == {"reweighting": True} and n3.claim["difference"] == 0.05
    assert n1.val_auc == 0.70 and n1.val_worst == 0.60 and n1.val_gap == 0.15
    assert s.agent_steps == 3 and s.running_node is None


def test_output_keeps_head_and_tail():
    half = OUTPUT_KEEP // 2
    log = Log().start().node(1).add(ev.EXEC_STARTED, node_id=1, workdir="w")
    chunk = "x" * 999 + "\n"
    total = 0
    for i in range(100):
        text = chunk.replace("x", chr(ord("a") + i % 26))
        log.add(ev.OUTPUT, node_id=1, text=text, stream="stdout")
        total += len(text)
    node = fold(log.events).nodes[1]
    assert len(node.live_head) == half and len(node.live_tail) == half
    assert node.live_dropped == total - OUTPUT_KEEP
    assert node.live_head.startswith("a" * 999) and node.live_tail.endswith(chr(ord("a") + 99 % 26) * 999 + "\n")
    assert f"{node.live_dropped} characters omitted" in node.live_output
    # a new execution of the same node starts its live output afresh
    log.add(ev.EXEC_STARTED, node_id=1, workdir="w").add(ev.OUTPUT, node_id=1, text="again\n", stream="stdout")
    node = fold(log.events).nodes[1]
    assert node.live_output == "again\n" and node.status == "running"


def test_short_output_is_kept_whole():
    log = Log().start().node(1).add(ev.EXEC_STARTED, node_id=1, workdir="w")
    for part in ("one\n", "two\n"):
        log.add(ev.OUTPUT, node_id=1, text=part, stream="stdout")
    assert fold(log.events).nodes[1].live_output == "one\ntwo\n"


def test_guidance_used_by():
    log = Log().start().node(1)
    log.add(ev.GUIDANCE, guidance_id=1, text="reweight", scope="global", node_id=None, by="u", command_id=None)
    log.add(ev.GUIDANCE, guidance_id=2, text="resnet", scope="node", node_id=1, by="u", command_id=4)
    s = fold(log.events)
    glob, node = s.guidance_in_force(1)
    assert [g.guidance_id for g in glob] == [1] and [g.guidance_id for g in node] == [2]
    log.node(2, parent=1, stage="improve", guidance_ids=[1, 2]).node(3, guidance_ids=[1])
    s = fold(log.events)
    assert s.guidance[2].used_by == [2]
    assert s.guidance[1].used_by == [2]  # global guidance: where it first took effect
    glob, node = s.guidance_in_force(1)
    assert [g.guidance_id for g in glob] == [1] and node == []  # node guidance is used once
    assert s.nodes[3].guidance_ids == [1]
    assert s.guidance_in_force(None) == ([s.guidance[1]], [])


def test_pruning_is_inherited():
    log = Log().start().node(1).finish(1).evaluate(1, 0.6, 0.5, 0.1)
    log.node(2, 1, "improve").finish(2).evaluate(2, 0.9, 0.8, 0.1).node(3, 2, "improve").node(4)
    log.add(ev.PRUNED, node_id=2, by="u", command_id=None)
    s = fold(log.events)
    assert [s.is_pruned(n) for n in (1, 2, 3, 4)] == [False, True, True, False]
    assert s.nodes[2].pruned and not s.nodes[3].pruned
    assert s.pruned_ids() == {2, 3}
    assert s.nodes[2].val_auc > s.nodes[1].val_auc
    assert best_node(s, "validation").node_id == 1  # pruned nodes are never best


def test_budget():
    log = Log().start(steps=7)
    assert fold(log.events).budget == 7
    log.add(ev.BUDGET_SET, steps=12, by="u", command_id=1)
    assert fold(log.events).budget == 12


def test_pause_resume_stop_finish_status():
    log = Log().start()
    statuses = []
    for kind, payload in [
        (ev.RESUMED, {"by": "u", "command_id": None}),  # resume while running: no change
        (ev.PAUSED, {"by": "u", "command_id": None, "reason": None}),
        (ev.PAUSED, {"by": "u", "command_id": None, "reason": None}),
        (ev.RESUMED, {"by": "u", "command_id": None}),
        (ev.STOP_REQUESTED, {"by": "u", "command_id": None, "interrupt": True}),
        (ev.SESSION_FINISHED, {"status": "stopped", "reason": "user"}),
        (ev.PAUSED, {"by": "u", "command_id": None, "reason": None}),  # paused after the end: ignored
        (ev.SESSION_RESUMED, {"by": "u", "interrupted": []}),
    ]:
        log.add(kind, **payload)
        s = fold(log.events)
        statuses.append((s.status, s.stop_requested))
    assert statuses == [("running", False), ("paused", False), ("paused", False), ("running", False),
                        ("running", True), ("stopped", True), ("stopped", True), ("running", False)]
    s = fold(log.events)
    assert s.finished_ts is None and s.finish_reason is None


def test_interrupted_node_and_running_node():
    log = Log().start().node(1).add(ev.EXEC_STARTED, node_id=1, workdir="w")
    assert fold(log.events).running_node == 1
    log.add(ev.NODE_INTERRUPTED, node_id=1, reason="process ended while running")
    s = fold(log.events)
    assert s.running_node is None and s.nodes[1].status == "interrupted"
    assert s.nodes[1].failure_reason == "process ended while running"


def test_expand_requested_is_cleared_by_a_child():
    log = Log().start().node(1).add(ev.EXPAND_REQUESTED, node_id=1, by="u", command_id=None)
    log.add(ev.EXPAND_REQUESTED, node_id=1, by="u", command_id=None)
    assert fold(log.events).pending_expand == [1]
    log.node(2, 1, "improve")
    assert fold(log.events).pending_expand == []


def test_best_node_by_each_criterion():
    log = Log().start()
    # node 1: best claimed; node 2: best validation AUC; node 3: best worst-group AUC; node 4 buggy
    log.node(1).finish(1).review(1, 0.99).evaluate(1, 0.70, 0.55, 0.2)
    log.node(2).finish(2).review(2, 0.80).evaluate(2, 0.80, 0.60, 0.3)
    log.node(3).finish(3).review(3, 0.85).evaluate(3, 0.75, 0.70, 0.05)
    log.node(4).finish(4, "buggy").review(4, 1.0, True)
    log.node(5).finish(5).review(5, 0.80).evaluate(5, 0.80, 0.59, 0.3)  # ties node 2: earliest wins
    s = fold(log.events)
    assert best_node(s, "claimed").node_id == 1
    assert best_node(s, "validation").node_id == 2
    assert best_node(s, "minimax").node_id == 3
    assert metric_for(s.nodes[3], "minimax") == 0.70
    with pytest.raises(ValueError):
        best_node(s, "vibes")
    assert best_node(fold(Log().start().events), "validation") is None


def test_failed_evaluation_and_blinded_test():
    log = Log().start().node(1).finish(1).evaluate(1, 0.7, 0.6, 0.1, ok=False)
    log.evaluate(1, 0.6, 0.5, 0.1, split="test", blinded=True)
    n = fold(log.events).nodes[1]
    assert n.validation is None and n.eval_verdicts == {"validation": "nan", "test": "ok"}
    assert n.failure_reason == "evaluation: NaN predictions"
    assert n.test.auc == 0.6 and n.test_blinded and n.medfair["test"] == {"auc": 0.6}


def test_unknown_kinds_and_unknown_nodes_are_ignored():
    log = Log().start().add("from_the_future", x=1).add(ev.CODE, node_id=99, code="x")
    log.add(ev.OUTPUT, node_id=99, text="x", stream="stdout").finish(99)
    log.add(ev.ERROR, message="m", node_id=None, where=None)
    s = fold(log.events)
    assert s.nodes == {} and s.last_seq == 6 and s.errors[0]["message"] == "m"


def test_final_choice_and_human_nodes():
    log = Log().start().node(1).node(2, 1, "human", origin="human")
    log.add(ev.FINAL_CHOICE, by_claimed=1, by_validation=None, by_minimax=None, reasons={})
    s = fold(log.events)
    assert s.agent_steps == 1 and s.final_choice["by_claimed"] == 1
    assert [c.node_id for c in s.children(None)] == [1] and [c.node_id for c in s.children(1)] == [2]
