"""The runner in-process: a whole session, steering commands, stop interrupting a running node,
coder failures, LLM call events, output batching, blinded test metrics and resume."""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from engine.agent.recovery import recover, resume
from engine.agent.runner import run
from engine.agent.session_config import SessionConfig
from engine.agent.session_setup import start_session
from engine.coders.protocol import CoderBase, CoderReply, LlmCall, Review
from engine.execution import check_isolated
from engine.session import events as ev
from engine.session.event_types import parse
from engine.session.state import fold
from engine.session.store import SessionStore, node_row

STUB = '''
import os, sys, time, zlib

def predict(folder):
    return {{n: (zlib.crc32(n.encode()) % 1000) / 1000.0 for n in sorted(os.listdir(folder))}}

if __name__ == "__main__":
    for i in range({lines}):
        print(f"line {{i}}")
    time.sleep({sleep})
    print("Validation AUROC: 0.71")
'''


class StubCoder(CoderBase):
    """Trivial pipelines that train in no time (the runner's mechanics, not the agent)."""
    name, label, simulated = "stub", "stub coder (test)", True

    def __init__(self, sleep=0.0, lines=1, fail_steps=(), none_steps=(), llm=False):
        self.sleep, self.lines, self.fail_steps, self.none_steps, self.llm = sleep, lines, fail_steps, none_steps, llm
        self.contexts = []

    def _reply(self, ctx, stage):
        self.contexts.append((stage, ctx))
        calls = ([LlmCall(role=stage, model="fake", tokens_in=100, tokens_out=20, latency_s=0.01, cost=0.001)]
                 if self.llm else [])
        if ctx.step in self.none_steps:
            return CoderReply(plan="nothing", code=None, error="the model replied without code", llm_calls=calls)
        code = STUB.format(sleep=self.sleep, lines=self.lines)
        if ctx.step in self.fail_steps:
            code = "raise KeyError('diagnosis')\n"
        return CoderReply(plan=f"{stage} at step {ctx.step}; guidance: {ctx.guidance_global + ctx.guidance_node}",
                          code=code, components={"stage": stage}, llm_calls=calls)

    def draft(self, ctx):
        return self._reply(ctx, "draft")

    def improve(self, ctx, parent):
        return self._reply(ctx, "improve")

    def debug(self, ctx, parent):
        return self._reply(ctx, "debug")

    def review(self, ctx, node):
        ok = node.status == "ok" and "Validation AUROC" in (node.output or "")
        return Review(is_bug=not ok, summary="ok" if ok else "failed", claimed_metric=0.71 if ok else None)


@pytest.fixture()
def store(tmp_path):
    s = SessionStore(tmp_path / "db" / "befair.db")
    yield s
    s.close()


def _new(store, workspace, coder, **cfg):
    cfg.setdefault("data", str(workspace.root))
    cfg.setdefault("num_drafts", 2)
    cfg.setdefault("step_timeout", 60)
    writer = start_session(store, SessionConfig(**cfg), workspace=workspace, coder=coder)
    writer.coder = coder
    return writer


def _run(store, writer, workspace, **kw):
    return run(store, writer.session_id, coder=writer.coder, workspace=workspace, **kw)


def _assert_nodes_table_is_fold(store, sid):
    state = fold(store.events(sid), sid)
    rows = {r["node_id"]: r for r in store.nodes(sid)}
    assert set(rows) == set(state.nodes)
    for nid, node in state.nodes.items():
        assert rows[nid] == node_row(sid, node)
    return state


def test_offline_session_end_to_end(store, workspace):
    from engine.coders.offline import OfflineCoder

    writer = _new(store, workspace, OfflineCoder(failure_rate=0.0, seed=1), steps=3, level="fairness-methods",
                  failure_rate=0.0,
                  seed=1, blind_test=True)
    sid = writer.session_id
    store.issue_command(sid, "guide", {"text": "use logistic regression on 32 px images", "scope": "global"})
    seen = []
    state = run(store, sid, workspace=workspace, on_event=lambda e, s: seen.append(e.kind))
    assert state.status == "finished" and state.agent_steps == 3
    assert state.coder["simulated"] is True and "simulated" in state.coder["label"]
    assert [n.stage for n in state.nodes.values()] == ["draft", "draft", "improve"]
    for node in state.nodes.values():
        assert node.status == "ok", node.output_tail
        assert node.components["model"] == "logreg" and node.guidance_ids == [1]
        assert node.val_auc is not None and 0 <= node.val_auc <= 1
        assert node.test is not None and node.test_blinded
        assert node.audit_flags["reweighting"] or node.audit_flags["upsampling"] or \
            node.audit_flags["filtering"] or node.audit_flags["pareto_selection"]
        assert node.claim["measured"] == node.val_auc and node.claimed_metric is not None
    assert "Following guidance" in state.nodes[1].plan
    fc = state.final_choice
    assert set(fc) >= {"by_claimed", "by_validation", "by_minimax", "reasons"} and fc["by_validation"] in state.nodes
    assert seen[-2:] == [ev.FINAL_CHOICE, ev.SESSION_FINISHED] and seen.count(ev.POLICY_DECISION) == 4
    _assert_nodes_table_is_fold(store, sid)
    # every node ran in its own workspace with the shared read-only input
    node_dir = store.db.execute("select payload from events where session_id=? and kind='exec_started'",
                                [sid]).fetchone()
    workdir = json.loads(node_dir[0])["workdir"]
    assert workdir.endswith(f"{sid}/node_1")
    # the held-out sets are neither inside nor linked from any node's directory
    run_dir = Path(workdir).parent
    assert check_isolated(run_dir, [workspace.root / "heldout", workspace.validation_images]) == []
    assert (run_dir / "input" / "skin_lesions.csv").is_file() and not (run_dir / "input" / "heldout").exists()
    assert workspace.root.resolve() not in run_dir.resolve().parents


def test_commands_between_steps(store, workspace):
    coder = StubCoder()
    writer = _new(store, workspace, coder, steps=4)
    sid = writer.session_id

    def on_event(e, s):
        if e.kind == ev.AUDITED and e.payload["node_id"] == 1:
            store.issue_command(sid, "guide", {"text": "reweight", "scope": "global"}, by="alice")
            store.issue_command(sid, "guide", {"text": "only for node 1", "scope": "node", "node_id": 1})
            store.issue_command(sid, "expand", {"node_id": 1})
            store.issue_command(sid, "prune", {"node_id": 99})         # unknown node: rejected
            store.issue_command(sid, "guide", {"text": "x", "scope": "node", "node_id": 42})
            store.issue_command(sid, "set_budget", {"steps": 3})

    state = _run(store, writer, workspace, on_event=on_event)
    assert state.status == "finished" and state.agent_steps == 3 and state.budget == 3
    n2 = state.nodes[2]
    assert n2.parent_id == 1 and n2.stage == "improve"
    assert n2.guidance_ids == [1, 2]                    # global + node-scoped guidance for node 1's expansion
    assert state.nodes[3].guidance_ids == [1]           # node guidance is used once
    forced = [d for d in state.decisions if d.get("forced")]
    assert len(forced) == 1 and forced[0]["node_id"] == 1
    cmds = store.commands(sid)
    assert all(c["consumed_at"] is not None for c in cmds)
    results = [c["result"] for c in cmds]
    assert results.count("applied") == 4 and sum(r.startswith("rejected") for r in results) == 2
    assert len(state.errors) == 2 and all(e["where"] == "command" for e in state.errors)
    assert state.guidance[1].by == "alice"
    stages = [ctx for stage, ctx in coder.contexts if stage == "improve"]
    assert stages[0].guidance_node == ["only for node 1"] and stages[0].guidance_global == ["reweight"]
    _assert_nodes_table_is_fold(store, sid)


def test_pause_blocks_new_nodes_until_resume(store, workspace):
    writer = _new(store, workspace, StubCoder(), steps=2)
    sid = writer.session_id
    paused_at = {}

    def on_event(e, s):
        if e.kind == ev.AUDITED and e.payload["node_id"] == 1:
            store.issue_command(sid, "pause")
        if e.kind == ev.PAUSED:
            paused_at["t"] = time.time()

            def later():
                time.sleep(1.0)
                store.issue_command(sid, "resume")
            threading.Thread(target=later, daemon=True).start()

    state = _run(store, writer, workspace, on_event=on_event)
    events = store.events(sid)
    kinds = [e.kind for e in events]
    p, r = kinds.index(ev.PAUSED), kinds.index(ev.RESUMED)
    assert ev.NODE_CREATED not in kinds[p:r]
    assert events[r].ts - events[p].ts >= 0.9
    assert state.status == "finished" and len(state.nodes) == 2


def test_stop_interrupts_the_running_pipeline(store, workspace):
    writer = _new(store, workspace, StubCoder(sleep=60), steps=5)
    sid = writer.session_id

    def on_event(e, s):
        if e.kind == ev.OUTPUT:
            store.issue_command(sid, "stop", {"interrupt": True})

    t0 = time.monotonic()
    state = _run(store, writer, workspace, on_event=on_event)
    assert time.monotonic() - t0 < 20
    assert state.status == "stopped" and state.nodes[1].status == "interrupted"
    assert len(state.nodes) == 1 and state.stop_requested
    kinds = [e.kind for e in store.events(sid)]
    assert kinds[-3:] == [ev.AUDITED, ev.FINAL_CHOICE, ev.SESSION_FINISHED]


def test_a_signal_whose_interrupt_was_swallowed_still_stops_the_session(store, workspace):
    """Python can swallow the KeyboardInterrupt a SIGTERM handler raises (in an at-fork callback while
    a worker thread starts a subprocess): the runner also polls the flag the handler sets."""
    from engine.agent import signals as runner_module

    writer = _new(store, workspace, StubCoder(sleep=60), steps=5)

    def on_event(e, s):
        if e.kind == ev.OUTPUT:
            runner_module.SIGNALLED.set()   # as the handler does, without the exception reaching the loop

    try:
        state = _run(store, writer, workspace, on_event=on_event)
    finally:
        runner_module.SIGNALLED.clear()
    assert state.status == "stopped" and state.finish_reason == runner_module.INTERRUPTED
    assert state.nodes[1].status == "interrupted" and not runner_module.SIGNALLED.is_set()


def test_coder_failures_become_buggy_nodes_and_llm_calls_are_recorded(store, workspace):
    writer = _new(store, workspace, StubCoder(none_steps=(1,), fail_steps=(2,), llm=True), steps=3,
                  debug_prob=0.0)
    state = _run(store, writer, workspace)
    n1, n2 = state.nodes[1], state.nodes[2]
    assert n1.status == "buggy" and n1.exc_type == "CoderError" and "without code" in n1.output_head
    assert n2.status == "buggy" and n2.exc_type == "KeyError" and n2.validation is None
    assert state.nodes[3].status == "ok"
    assert state.tokens_in == 100 * 3 and n1.tokens_in == 100 and n2.tokens_out == 20
    assert state.status == "finished"


def test_llm_cost_reaching_the_budget_pauses_the_session(store, workspace):
    coder = StubCoder(llm=True)  # each step's call costs $0.001
    coder.budget_usd = 0.0015
    writer = _new(store, workspace, coder, steps=5)
    runner = threading.Thread(target=_run, args=(store, writer, workspace), daemon=True)
    runner.start()
    deadline = time.monotonic() + 120
    while store.state(writer.session_id).status != "paused" and time.monotonic() < deadline:
        time.sleep(0.1)
    paused = [e for e in store.events(writer.session_id) if e.kind == ev.PAUSED]
    assert paused and paused[0].payload["by"] == "engine" and "reached the budget $0.00" in paused[0].payload["reason"]
    store.issue_command(writer.session_id, "stop", {"interrupt": True}, by="test")
    runner.join(60)
    state = store.state(writer.session_id)
    assert not runner.is_alive() and len(state.nodes) == 2 and state.cost >= 0.0015


def test_output_is_batched(store, workspace):
    writer = _new(store, workspace, StubCoder(lines=5000), steps=1, num_drafts=1)
    state = _run(store, writer, workspace)
    outputs = [e for e in store.events(writer.session_id) if e.kind == ev.OUTPUT]
    assert 1 <= len(outputs) <= 20
    text = "".join(e.payload["text"] for e in outputs)
    assert "line 0\n" in text and "line 4999\n" in text
    assert state.nodes[1].status == "ok"


def test_resume_after_a_crash_marks_the_running_node(store, workspace):
    writer = _new(store, workspace, StubCoder(), steps=2)
    sid = writer.session_id
    # what a process killed in the middle of node 1 leaves behind
    writer.emit(parse(ev.POLICY_DECISION, {"action": "draft", "node_id": None, "reason": "x", "forced": False}))
    writer.emit(parse(ev.NODE_CREATED, {"node_id": 1, "parent_id": None, "step": 1, "stage": "draft", "plan": "p",
                                  "guidance_ids": [], "components": None, "origin": "agent"}))
    writer.emit(parse(ev.CODE, {"node_id": 1, "code": "print(1)\n"}))
    writer.emit(parse(ev.EXEC_STARTED, {"node_id": 1, "workdir": "/nonexistent"}))
    store.close()
    store2 = SessionStore(store.path)
    store2.db.execute("update sessions set pid = 999999999 where id = ?", [sid])
    state = resume(store2, sid, coder=StubCoder(), workspace=workspace)
    assert state.nodes[1].status == "interrupted"
    assert state.nodes[1].interrupted_reason == "process ended while running"
    resumed = [e for e in store2.events(sid) if e.kind == ev.SESSION_RESUMED]
    assert resumed[0].payload["interrupted"] == [1]
    assert state.status == "finished" and state.agent_steps == 2
    _assert_nodes_table_is_fold(store2, sid)


def test_resume_refuses_a_live_session(store, workspace):
    import os

    from engine.errors import BefairError

    writer = _new(store, workspace, StubCoder(), steps=1)
    pid = os.getppid()  # a live process that is not us
    store.db.execute("update sessions set pid = ? where id = ?", [pid, writer.session_id])
    with pytest.raises(BefairError, match="still seems to be running"):
        recover(store, writer.session_id)
