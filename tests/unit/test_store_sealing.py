"""The writer seals and reveals blinded test figures itself: revealing at the end appends the
opened evaluations before `session_finished`, in the same transaction, without calling `emit`
from inside an append (which the old sealed.seal -> reveal -> writer.emit did)."""
from __future__ import annotations

from engine.session import events as ev
from engine.session.store import SessionStore, SessionWriter
from tests.unit.test_views_sealed import TEST_AUC, _blinded_session
from engine.session.event_types import parse


def test_revealing_appends_before_the_end_without_re_entering_emit(tmp_path, monkeypatch):
    store = SessionStore(tmp_path / "s.db")
    writer = _blinded_session(store, "run")
    depth, deepest = [0], [0]
    emit = SessionWriter.emit

    def counted(self, *args, **kwargs):
        depth[0] += 1
        deepest[0] = max(deepest[0], depth[0])
        try:
            return emit(self, *args, **kwargs)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(SessionWriter, "emit", counted)
    writer.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "best_node": 1, "reason": "done"}))
    assert deepest[0] == 1
    tail = store.events("run")[-2:]
    assert [e.kind for e in tail] == [ev.EVALUATED, ev.SESSION_FINISHED]
    assert tail[0].payload["revealed"] and tail[0].payload["summary"]["auc"] == TEST_AUC
    assert store.sealed_figures("run") and store.nodes("run")[0]["test_auc"] == TEST_AUC


def test_a_study_keeps_them_sealed_at_the_end(tmp_path):
    store = SessionStore(tmp_path / "s.db")
    writer = _blinded_session(store, "run", study="s1")
    writer.emit(parse(ev.SESSION_FINISHED, {"status": "finished", "best_node": 1, "reason": "done"}))
    assert [e.kind for e in store.events("run")[-2:]] == [ev.EVALUATED, ev.SESSION_FINISHED]
    assert store.events("run")[-2].payload["sealed"] and store.nodes("run")[0]["test_auc"] is None
