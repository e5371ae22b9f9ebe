"""Typed events: every kind has a class, what the real code stores parses and round-trips to the
same payload, and payloads of earlier versions (keys missing, keys unknown) still load."""
from __future__ import annotations

import pytest

from engine.agent.runner import run
from engine.agent.session_config import SessionConfig
from engine.agent.session_setup import start_session
from engine.coders.protocol import CoderBase, CoderReply, Review
from engine.session import event_types as et
from engine.session import events as ev
from tests.demo_session import all_event_kinds_session
from engine.session.store import SessionStore

EXEC_FINISHED_KEYS = {"node_id", "status", "exit_code", "exec_time", "exc_type", "output_head", "output_tail",
                      "truncated", "cut_chars", "output_chars", "peak_mem_mb", "out_of_memory", "sandboxed"}


def _assert_round_trips(events: list[ev.Event]) -> None:
    for event in events:
        typed = et.parse(event.kind, event.payload)
        assert typed.kind == event.kind
        assert not typed.extra, f"{event.kind} has keys its class does not know: {sorted(typed.extra)}"
        assert typed.to_payload() == event.payload, event.kind
        assert type(typed).from_payload(typed.to_payload()) == typed


def test_every_kind_has_one_class():
    assert set(et.EVENT_TYPES) == ev.KINDS
    for kind, cls in et.EVENT_TYPES.items():
        assert cls.kind == kind
        assert cls.__dataclass_params__.frozen


def test_every_kind_written_by_the_fixtures_round_trips(tmp_path):
    store = SessionStore(tmp_path / "befair.db")
    sid = all_event_kinds_session(store)
    events = store.events(sid)
    store.close()
    assert {e.kind for e in events} == ev.KINDS
    _assert_round_trips(events)


def test_a_real_offline_session_parses_event_by_event(tmp_path, workspace):
    from engine.coders.offline import OfflineCoder

    store = SessionStore(tmp_path / "befair.db")
    config = SessionConfig(level="fairness-methods", steps=2, seed=3, failure_rate=0.0, data=str(workspace.root),
                           step_timeout=60)
    coder = OfflineCoder(failure_rate=0.0, seed=3, device="cpu", step_timeout=60)
    writer = start_session(store, config, workspace=workspace, coder=coder)
    store.issue_command(writer.session_id, "guide", {"text": "look at skin tone", "scope": "global"}, by="test")
    run(store, writer.session_id, coder=coder, workspace=workspace, writer=writer)
    events = store.events(writer.session_id)
    store.close()
    kinds = {e.kind for e in events}
    assert {ev.SESSION_STARTED, ev.NODE_CREATED, ev.CODE, ev.EXEC_FINISHED, ev.EVALUATED, ev.AUDITED,
            ev.GUIDANCE, ev.FINAL_CHOICE, ev.SESSION_FINISHED} <= kinds
    _assert_round_trips(events)
    for event in events:
        if event.kind == ev.EXEC_FINISHED:
            assert set(event.payload) == EXEC_FINISHED_KEYS


class _NoCodeCoder(CoderBase):
    """Replies without code: the runner records a buggy node that never ran."""
    name, label, simulated = "no-code", "no-code coder (test)", True

    def draft(self, ctx):
        return CoderReply(plan="nothing", code=None, error="the model replied without code")

    improve = debug = lambda self, ctx, parent: self.draft(ctx)

    def review(self, ctx, node, result):
        return Review(is_bug=True, summary="", claimed_metric=None)


def test_a_node_without_code_records_every_exec_finished_key(tmp_path, workspace):
    store = SessionStore(tmp_path / "befair.db")
    coder = _NoCodeCoder()
    writer = start_session(store, SessionConfig(level="base", steps=1, seed=0, data=str(workspace.root)),
                           workspace=workspace, coder=coder)
    run(store, writer.session_id, coder=coder, workspace=workspace, writer=writer)
    events = store.events(writer.session_id)
    store.close()
    finished = [e for e in events if e.kind == ev.EXEC_FINISHED]
    assert finished and all(set(e.payload) == EXEC_FINISHED_KEYS for e in finished)
    assert finished[0].payload["exc_type"] == "CoderError" and finished[0].payload["sandboxed"] is False
    _assert_round_trips(events)


def test_an_older_payload_loads_and_is_written_back_unchanged():
    before_sandbox = {"node_id": 3, "status": "ok", "exit_code": 0, "exec_time": 1.5, "exc_type": None,
                      "output_head": "x\n", "output_tail": "", "truncated": False}
    typed = et.ExecFinished.from_payload(before_sandbox)
    assert typed.sandboxed is et.ABSENT and typed.to_payload() == before_sandbox
    streamed_text = {"role": "draft", "step": 1, "delta": "import numpy"}  # llm_stream before offsets
    stream = et.LlmStream.from_payload(streamed_text)
    assert stream.delta == "import numpy" and stream.chars is et.ABSENT and stream.to_payload() == streamed_text
    unknown = {"node_id": 1, "code": "print(1)", "written_by": "a later version"}
    code = et.Code.from_payload(unknown)
    assert code.extra == {"written_by": "a later version"} and code.to_payload() == unknown


def test_a_payload_missing_a_required_key_is_refused_unless_its_class_says_what_that_means():
    with pytest.raises(ValueError, match="node_id"):
        et.parse(ev.CODE, {"code": "print(1)"})
    with pytest.raises(ValueError, match="unknown event kind"):
        et.parse("no_such_kind", {})
    assert et.parse(ev.CODE, {"node_id": 1}) == et.Code(node_id=1, code="")  # as the reducer always read it
    evaluated = et.parse(ev.EVALUATED, {"node_id": 1, "split": "test", "ok": True})
    assert isinstance(evaluated, et.Evaluated) and evaluated.verdict == "ok"


def test_the_fold_tells_of_an_unreadable_event_and_goes_on():
    from engine.session.state import fold

    def event(seq: int, kind: str, **payload: object) -> ev.Event:
        return ev.Event(seq=seq, kind=kind, payload=dict(payload), ts=float(seq), session_id="s")

    state = fold([event(1, ev.SESSION_STARTED, config={"steps": 2}),
                  event(2, ev.NODE_CREATED, node_id=1, stage="draft"),  # no plan, step, parent: as always read
                  event(3, ev.CODE, code="print(1)"),  # no node_id: nothing says which node
                  event(4, ev.PRUNED, node_id=1, by="user")])
    assert state.nodes[1].plan == "" and state.nodes[1].code == "" and state.nodes[1].pruned
    assert state.last_seq == 4 and [e["seq"] for e in state.errors] == [3]
    assert "unreadable code event" in state.errors[0]["message"]


def test_the_writer_stores_a_typed_event_as_its_payload(tmp_path):
    store = SessionStore(tmp_path / "befair.db")
    sid = all_event_kinds_session(store, session_id="typed")
    writer = store.writer(sid)
    written = writer.emit(et.Error(message="boom", node_id=None, where="test"))
    assert store.events(sid)[-1].payload == {"message": "boom", "node_id": None, "where": "test"} == written.payload
    with pytest.raises(TypeError):
        writer.emit(ev.ERROR, {"message": "boom"})  # type: ignore[arg-type]  # only typed events are written
    store.close()
