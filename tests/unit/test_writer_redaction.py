"""The writer redacts a typed event's fields and keeps the typed event it wrote on the Event."""
from __future__ import annotations

import json

import pytest

from engine.session import event_types as et
from engine.session.redact import MARK, Redactor
from engine.session.store import SessionStore

SECRET = "sk-test-0123456789abcdef"
CONFIG = {"level": "base", "steps": 3, "best": "validation"}
CODER = {"name": "offline", "label": "offline coder (simulated)", "simulated": True}


@pytest.fixture
def writer(tmp_path):
    store = SessionStore(tmp_path / "s.db")
    w = store.create_session(dict(CONFIG), instruction="x", coder=dict(CODER), data={"kind": "synth"})
    yield w
    store.close()


def _stored(writer, seq):
    row = writer.store.db.conn.execute("select payload from events where session_id = ? and seq = ?",
                                       (writer.session_id, seq)).fetchone()
    return json.loads(row[0])


def test_a_secret_in_any_field_is_never_written(writer):
    writer.redactor = Redactor([SECRET], from_env=False)
    writer.emit(et.NodeCreated(node_id=1, parent_id=None, stage="draft", step=1, plan=f"use key {SECRET}",
                               guidance_ids=[]))
    event = writer.emit(et.Code(node_id=1, code=f"KEY = '{SECRET}'\n"))
    error = writer.emit(et.Error(message=f"failed: {SECRET}",
                                 extra={"detail": {"url": f"https://x/?token={SECRET}", "n": [SECRET, 3]}}))
    for e in (event, error):
        assert SECRET not in json.dumps(_stored(writer, e.seq))
        assert SECRET not in repr(e.typed.to_payload())   # what the reducer folds is redacted too
    assert _stored(writer, error.seq)["detail"] == {"url": f"https://x/?token={MARK}", "n": [MARK, 3]}
    assert writer.state.nodes[1].code == f"KEY = '{MARK}'\n"
    assert SECRET not in writer.state.nodes[1].plan


def test_the_written_typed_event_is_kept_and_not_copied_without_a_secret(writer):
    writer.redactor = Redactor([SECRET], from_env=False)
    typed = et.Code(node_id=1, code="print('no secret here')\n")
    writer.emit(et.NodeCreated(node_id=1, parent_id=None, stage="draft", step=1, plan="p", guidance_ids=[]))
    event = writer.emit(typed)
    assert event.typed is typed
    assert event.payload == typed.to_payload() == _stored(writer, event.seq)
