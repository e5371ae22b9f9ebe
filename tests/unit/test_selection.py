"""One "best" (engine.session.selection): the sessions row, the state, the views and the final
choice always name the same node, pruned and failed nodes are never chosen, the two known
disagreements are fixed, the robust criterion and the expert's live switch."""
from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.agent.commands import apply_command
from engine.session import events as ev
from engine.session import selection, views
from engine.session.selection import minimax_pareto
from engine.session.state import fold
from engine.session.store import SessionStore
from engine.session.event_types import parse

GROUPS = ("group_0", "group_1", "group_2")


def _summary(groups: dict[str, float | None], *, bounds: dict[str, float] | None = None) -> dict:
    present = {g: v for g, v in groups.items() if v is not None}
    worst, top = (min(present.values()), max(present.values())) if present else (None, None)
    out = {"auc": sum(present.values()) / len(present) if present else None, "worst_auc": worst, "best_auc": top,
           "auc_gap": None if worst is None else top - worst, "group_auc": dict(groups), "group_auc_reason": {},
           "n": 60}
    if bounds is not None:
        out.update({"ci_method": "test", "ci": [0.0, 1.0, bounds["worst_lo"], 1.0, 0.0, 1.0], "cases": []})
    return out


class Session:
    """A session written through a real SessionWriter (the sessions row is the store's)."""

    def __init__(self, store: SessionStore, sid: str = "s", best: str = "validation", protocol: str = "befair"):
        self.store = store
        self.sid = sid
        self.writer = store.create_session({"level": "base", "steps": 20, "best": best, "protocol": protocol},
                                           instruction="x", coder={"name": "offline"}, data={}, session_id=sid)

    def node(self, nid: int, groups: dict[str, float | None] | None = None, *, status: str = "ok",
             claimed: float | None = None, parent: int | None = None, bounds: dict[str, float] | None = None,
             is_bug: bool = False):
        w = self.writer
        w.emit(parse(ev.NODE_CREATED, {"node_id": nid, "parent_id": parent, "step": nid, "stage": "draft", "plan": "",
                                 "guidance_ids": [], "components": None, "origin": "agent"}))
        w.emit(parse(ev.EXEC_FINISHED, {"node_id": nid, "status": status, "exit_code": 0, "exec_time": 1.0,
                                  "exc_type": None if status == "ok" else "KeyError", "output_head": "",
                                  "output_tail": "", "truncated": False}))
        w.emit(parse(ev.REVIEW, {"node_id": nid, "is_bug": is_bug or status != "ok", "summary": "",
                           "claimed_metric": claimed}))
        if status == "ok" and groups is not None:
            w.emit(parse(ev.EVALUATED, {"node_id": nid, "split": "validation", "ok": True, "verdict": "ok",
                                        "reason": None,
                                  "summary": _summary(groups, bounds=bounds), "medfair": {}, "blinded": False}))
        return self

    def emit(self, kind: str, **payload):
        self.writer.emit(parse(kind, payload))
        return self

    @property
    def row(self) -> dict:
        return self.store.session(self.sid)

    @property
    def state(self):
        return fold(self.store.events(self.sid), self.sid)


@pytest.fixture
def store(tmp_path):
    return SessionStore(tmp_path / "s.db")


def test_the_sessions_row_follows_a_prune_of_the_best_node(store):
    """Disagreement (1): the row kept naming a pruned node until another node was evaluated."""
    s = Session(store).node(1, {"group_0": 0.9, "group_1": 0.9}).node(2, {"group_0": 0.8, "group_1": 0.8})
    assert s.row["best_node"] == 1
    s.emit(ev.PRUNED, node_id=1, by="u", command_id=None)
    assert s.row["best_node"] == 2 == selection.choice(s.state) == views.best_id(s.state)


def test_minimax_live_star_and_final_choice_agree_when_a_node_lacks_a_group():
    """Disagreement (2): node 1 has no AUC for group_2 (one class in its split). The live ★ used its
    worst *present* group (.8) while the final Pareto choice counted the missing group as -inf."""
    groups = {1: {"group_0": 0.9, "group_1": 0.8, "group_2": None},
              2: {"group_0": 0.75, "group_1": 0.7, "group_2": 0.7}}
    events = [ev.Event(1, ev.SESSION_STARTED, {"config": {"best": "minimax", "steps": 5}, "coder": {}, "data": {}})]
    for nid, vec in groups.items():
        events += [ev.Event(len(events) + 1, ev.NODE_CREATED, {"node_id": nid, "step": nid, "stage": "draft"}),
                   ev.Event(len(events) + 2, ev.EXEC_FINISHED, {"node_id": nid, "status": "ok"}),
                   ev.Event(len(events) + 3, ev.EVALUATED, {"node_id": nid, "split": "validation", "ok": True,
                                                            "summary": _summary(vec)})]
    state = fold(events)
    assert selection.best(state, "minimax").node_id == 2 == minimax_pareto(groups)
    assert selection.final_choice(state)["by_minimax"] == views.best_id(state, "minimax") == 2


def test_failed_and_buggy_nodes_are_never_best(store):
    s = Session(store).node(1, {"group_0": 0.6}).node(2, {"group_0": 0.99}, is_bug=True).node(3, status="buggy",
                                                                                                claimed=0.99)
    for criterion in selection.CRITERIA:
        assert selection.choice(s.state, criterion) in (1, None)
    assert s.row["best_node"] == 1


def test_robust_prefers_the_surer_worst_group(store):
    s = Session(store, best="robust")
    s.node(1, {"group_0": 0.90, "group_1": 0.80}, bounds={"worst_lo": 0.55})   # higher worst, wide interval
    s.node(2, {"group_0": 0.85, "group_1": 0.78}, bounds={"worst_lo": 0.70})   # lower worst, surer
    s.node(3, {"group_0": 0.99, "group_1": 0.95})                              # no interval: not a candidate
    state = s.state
    assert selection.best(state, "minimax").node_id == 3
    assert selection.best(state, "robust").node_id == 2 == s.row["best_node"]
    assert selection.figure(state.nodes[2], "robust") == 0.70


def test_the_experts_switch_moves_the_star_the_row_and_the_improve_step(store):
    from engine.agent.policy import decide, policy_rng

    s = Session(store, best="validation").node(1, {"group_0": 0.99, "group_1": 0.60}).node(
        2, {"group_0": 0.80, "group_1": 0.75})
    assert s.row["best_node"] == 1 and s.row["best_criterion"] == "validation"
    s.emit(ev.CRITERION_SET, criterion="minimax", by="dermatologist", command_id=None)
    state = s.state
    assert selection.current_criterion(state) == "minimax" == views.session_criterion(state)
    assert s.row["best_node"] == 2 and s.row["best_criterion"] == "minimax"
    config = {"num_drafts": 2, "debug_prob": 0.0}
    decision = decide(state, policy_rng(0, state.agent_steps), config)
    assert (decision.action, decision.node_id) == ("improve", 2) and "worst skin-tone group" in decision.reason


class _Sink:
    stop = False
    interrupt = False

    def __init__(self, session: Session):
        self.session = session
        self.consumed: list[tuple[int, str]] = []

    @property
    def state(self):
        return self.session.writer.state

    def emit(self, event, *, consumes=None, result="applied"):
        return self.session.writer.emit(event, consumes=consumes, result=result)

    def consume(self, cmd, result):
        self.session.writer.consume_command(cmd, result)
        self.consumed.append((cmd["id"], result))


def test_the_set_criterion_command(store):
    s = Session(store).node(1, {"group_0": 0.9})
    sink = _Sink(s)
    for criterion, expected in (("robust", "robust"), ("vibes", "robust"), ("robust", "robust")):
        cid = store.issue_command("s", "set_criterion", {"criterion": criterion}, by="p01")
        apply_command(sink, store.command(cid))
        assert selection.current_criterion(s.state) == expected
    kinds = [e.kind for e in store.events("s")]
    assert kinds[-2:] == [ev.CRITERION_SET, ev.ERROR]   # the third command changed nothing: no event
    assert sink.consumed[-1][1] == "ignored: already robust"
    last = [e for e in store.events("s") if e.kind == ev.CRITERION_SET][-1]
    assert last.payload["by"] == "p01" and last.payload["command_id"] is not None


def test_the_be_fair_protocol_refuses_a_measured_criterion(store):
    s = Session(store, best="claimed", protocol="be-fair")
    cid = store.issue_command("s", "set_criterion", {"criterion": "validation"})
    apply_command(_Sink(s), store.command(cid))
    assert selection.current_criterion(s.state) == "claimed"
    assert store.command(cid)["result"].startswith("rejected: the be-fair protocol")


def test_ties_are_read_for_the_current_leader_only(store):
    s = Session(store).node(1, {"group_0": 0.9}).node(2, {"group_0": 0.85}).node(3, {"group_0": 0.5})
    s.emit(ev.COMPARED, split="validation", method="m", by={
        "validation": {"leader": 1, "statistic": "auc", "ties": [2], "differences": []}})
    state = s.state
    assert selection.ties(state, "validation") == [2]
    assert views.best_choice(state, "validation").uncertainty.startswith("nodes 1 and 2 cannot be told apart")
    s.emit(ev.PRUNED, node_id=2, by="u", command_id=None)
    assert selection.ties(s.state, "validation") == []   # a pruned node is no runner-up
    s.emit(ev.PRUNED, node_id=1, by="u", command_id=None)
    assert selection.ties(s.state, "validation") is None  # compared for another leader: not said


# -- the property: every surface names the same node --------------------------------------------
_vec = st.dictionaries(st.sampled_from(GROUPS), st.one_of(st.none(), st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.9])),
                       min_size=1, max_size=3)
_step = st.one_of(
    st.tuples(st.just("ok"), _vec, st.one_of(st.none(), st.sampled_from([0.6, 0.7, 0.9])),
              st.one_of(st.none(), st.sampled_from([0.3, 0.4, 0.5]))),
    st.tuples(st.just("buggy"), st.none(), st.sampled_from([None, 0.95]), st.none()),
    st.tuples(st.just("prune"), st.integers(1, 12), st.none(), st.none()),
    st.tuples(st.just("criterion"), st.sampled_from(selection.CRITERIA), st.none(), st.none()),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=12), finish=st.booleans())
def test_every_surface_names_the_same_node(tmp_path_factory, steps, finish):
    store = SessionStore(tmp_path_factory.mktemp("prop") / "p.db")
    s = Session(store)
    nid = 0
    for kind, a, b, c in steps:
        if kind in ("ok", "buggy"):
            nid += 1
            s.node(nid, a, status=kind, claimed=b, bounds={"worst_lo": c} if c is not None else None)
        elif kind == "prune" and a in s.writer.state.nodes:
            s.emit(ev.PRUNED, node_id=a, by="u", command_id=None)
        elif kind == "criterion":
            s.emit(ev.CRITERION_SET, criterion=a, by="u", command_id=None)
    if finish:
        s.emit(ev.FINAL_CHOICE, **selection.final_choice(s.writer.state))
        s.emit(ev.SESSION_FINISHED, status="finished", reason="done")
    state = s.state
    final = selection.final_choice(state)
    pruned = state.pruned_ids()
    for criterion in selection.CRITERIA:
        chosen = selection.choice(state, criterion)
        assert views.best_choice(state, criterion).node_id == chosen == final[f"by_{criterion}"]
        if chosen is not None:
            node = state.nodes[chosen]
            assert chosen not in pruned and node.status == "ok" and not node.is_bug
    current = selection.current_criterion(state)
    assert s.row["best_node"] == selection.choice(state) == views.best_id(state)
    assert s.row["best_criterion"] == current
    data = views.session_json(state)
    assert data["best_node"] == selection.choice(state)
    assert [n["node_id"] for n in data["nodes"] if n["best"]] == ([] if data["best_node"] is None
                                                                   else [data["best_node"]])
    assert s.writer.state == state
