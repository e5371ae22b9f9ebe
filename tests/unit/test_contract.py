"""The pipeline contract is checked as soon as a run ends: no predict(), or no printed metric,
fails the node with that reason and costs no review call."""
from __future__ import annotations

import pytest

from engine.agent.contract import NO_METRIC, NO_PREDICT, defines_predict
from engine.agent.runner import run
from engine.agent.session_config import SessionConfig
from engine.agent.session_setup import start_session
from engine.coders.protocol import CoderReply, Review
from engine.coders.protocol import CoderBase
from engine.session.store import SessionStore

GOOD = ("import os\ndef predict(folder):\n    return {n: 0.5 for n in os.listdir(folder)}\n"
        "if __name__ == '__main__':\n    print('Validation AUROC: 0.61')\n")
NO_PREDICT_CODE = "print('Validation AUROC: 0.99')\n"
SILENT = "import os\ndef predict(folder):\n    return {n: 0.5 for n in os.listdir(folder)}\n"


class CountingCoder(CoderBase):
    name, label, simulated = "counting", "test coder", True

    def __init__(self, codes):
        self.codes, self.reviews = list(codes), 0

    def _reply(self, ctx, *_):
        return CoderReply(plan="p", code=self.codes[(ctx.step - 1) % len(self.codes)])

    draft = improve = debug = _reply

    def review(self, ctx, node):
        self.reviews += 1
        return Review(is_bug=False, summary="looks fine", claimed_metric=0.61)


def test_defines_predict():
    assert defines_predict(GOOD)
    assert defines_predict("from model import infer as predict\n")
    assert defines_predict("predict = lambda folder: {}\n")
    assert not defines_predict(NO_PREDICT_CODE)
    assert not defines_predict("def main():\n    def predict(f): ...\n")
    assert not defines_predict("def predict(:\n")


@pytest.mark.parametrize("code, reason", [(NO_PREDICT_CODE, NO_PREDICT), (SILENT, NO_METRIC)])
def test_contract_breach_fails_at_once_without_review(tmp_path, workspace, code, reason):
    store = SessionStore(tmp_path / "db" / "befair.db")
    coder = CountingCoder([code, GOOD])
    writer = start_session(store, SessionConfig(steps=2, num_drafts=2, step_timeout=60, data=str(workspace.root)),
                           workspace=workspace, coder=coder)
    state = run(store, writer.session_id, coder=coder, workspace=workspace, writer=writer)
    bad, good = state.nodes[1], state.nodes[2]
    assert bad.status == "buggy" and bad.exc_type == reason and bad.failure_reason == reason
    assert not bad.validation, "a node that broke the contract was evaluated"
    assert good.status == "ok" and good.val_auc is not None
    assert coder.reviews == 1, "the contract breach cost a review call"
    store.close()


def test_code_that_cannot_be_audited_says_so_in_its_audited_event(tmp_path, workspace):
    """The runner keeps the audit's note: a node whose code does not parse is "not audited" (badge
    ?, flags unknown), never shown like a clean node."""
    from engine.session import events as ev
    from engine.session import views

    store = SessionStore(tmp_path / "db" / "befair.db")
    coder = CountingCoder(["def predict(:\n    pass\n"])
    writer = start_session(store, SessionConfig(steps=1, num_drafts=1, step_timeout=60, data=str(workspace.root)),
                           workspace=workspace, coder=coder)
    state = run(store, writer.session_id, coder=coder, workspace=workspace, writer=writer)
    audited = [e.payload for e in store.events(writer.session_id) if e.kind == ev.AUDITED]
    assert audited and audited[0]["note"].startswith("not audited: syntax error at line 1")
    node = state.nodes[1]
    assert node.audit_note == audited[0]["note"]
    assert views.audit_badges(node)[0] == views.NOT_AUDITED
    assert views.node_json(state, node)["audit"]["audited"] is False
    assert "[?]" in views.node_line(state, node)
    store.close()
