"""engine.session.conversation: a node's LLM calls numbered across the session, large repeated
texts shown once, the instruction and each guidance located in the messages, long guidance
quoted in later plans replaced by a reference."""
from __future__ import annotations

from engine.session import events as ev
from engine.session.conversation import DEDUP_MIN, node_calls, plan_without_repeats
from engine.session.state import fold
from tests.unit.test_reducer import Log

INSTRUCTION = "Classify lesions; be fair towards skin tone."
GUIDANCE = "Reweight dark skin in the loss. " * 40   # > DEDUP_MIN
BIG = "# Data\n\n" + "a row of the data overview\n" * 30


def _log() -> Log:
    log = Log()
    log.add(ev.SESSION_STARTED, config={"level": "fairness-hint", "steps": 3}, instruction=INSTRUCTION,
            coder={"name": "openai"}, data={})
    log.add(ev.GUIDANCE, guidance_id=1, text=GUIDANCE, scope="global", node_id=None, by="u")
    for nid, with_guidance in ((1, True), (2, True), (3, False)):
        guidance = f"# Guidance\n\n- \"{GUIDANCE.strip()}\"\n\n" if with_guidance else ""
        user = f"# Task\n\n{INSTRUCTION}\n\n{guidance}{BIG}"
        log.node(nid, guidance_ids=[1])
        log.add(ev.LLM_CALL, node_id=nid, role="draft", model="m", tokens_in=10, tokens_out=5, latency_s=1.5,
                cost=0.0, ok=True, error=None, messages=[{"role": "user", "content": user}],
                reply=f"Plan: {GUIDANCE.strip()} then train.")
    return log


def test_calls_are_numbered_across_the_session_and_repeats_become_references():
    state = fold(_log().events)
    (first,) = node_calls(state, 1)
    (second,) = node_calls(state, 2)
    assert (first.number, second.number) == (1, 2)
    assert all(p.shown for _, pieces in first.messages for p in pieces)
    refs = [p.ref for _, pieces in second.messages for p in pieces if not p.shown]
    assert refs and all(r.startswith("same as call 1 (node 1 · draft), message 1") for r in refs)
    assert len(BIG) >= DEDUP_MIN and not any(BIG.strip() in p.text for _, ps in second.messages for p in ps if p.shown)
    # the reply quotes the guidance shown in call 1's message: a reference, not the text again
    assert GUIDANCE.strip() not in "".join(p.text for p in second.reply if p.shown)
    assert "⟨guidance #1: same as call 1 (node 1 · draft), message 1" in "".join(p.text for p in first.reply)


def test_marks_say_where_the_instruction_and_guidance_are_and_where_they_are_not():
    state = fold(_log().events)
    marks = {m.label: m.places for m in node_calls(state, 3)[0].marks}
    assert marks == {"instruction (fairness-hint)": ("message 1 (user)",), "guidance #1": ()}
    assert {m.label: m.places for m in node_calls(state, 1)[0].marks}["guidance #1"] == ("message 1 (user)",)


def test_a_plan_repeating_a_long_guidance_refers_to_the_first_node_it_shaped():
    state = fold(_log().events)
    for nid in (1, 2):
        state.nodes[nid].plan = f"Following guidance: {GUIDANCE.strip()}"
    assert plan_without_repeats(state, state.nodes[1]) == state.nodes[1].plan  # in full where it first acted
    assert plan_without_repeats(state, state.nodes[2]) == \
        f"Following guidance: [guidance #1, shown in full at node 1 ({len(GUIDANCE):,} characters)]"
