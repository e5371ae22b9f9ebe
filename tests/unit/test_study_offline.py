"""Studies with the offline coder on tiny SynthDerm (slow): a 2 levels x 2 repeats study through the
local pool with its runner killed midway, and through a real local Ray cluster with a worker killed
midway; each completed by running it again, with no event lost or duplicated and a report equal
to the hand computation from the stored events."""
from __future__ import annotations

import os
import signal

import pytest

from engine.session.store import SessionStore
from engine.study import grid
from engine.study.pool import prepare_data, run_study
from engine.study.report import build_report
from engine.study.spec import load_spec

from .test_study_pool import (_run, assert_events_sound, assert_report_is_hand_computed, kill_study_runner_midway,
                              session_events, study_env, write_spec)

__all__ = ["study_env"]  # the fixture, imported for this module's tests

OFFLINE = 'name = "offline"\nfailure_rate = 0.0'

pytestmark = pytest.mark.slow


def test_offline_study_local_pool_killed_midway_and_completed(tmp_path, study_env):
    spec_path = write_spec(tmp_path / "s.toml", "offline-local", steps=2, coder=OFFLINE)
    db = tmp_path / "db" / "befair.db"
    kill_study_runner_midway(db, spec_path, "offline-local", timeout=600)
    store = SessionStore(db)
    spec = load_spec(spec_path)
    before = {r["session_id"]: session_events(db, r["session_id"])
              for r in grid.grid_rows(store, spec.name) if r["session_id"]}
    assert any(r["state"] == "interrupted" for r in grid.grid_rows(store, spec.name))

    outcome = _run(store, spec)
    assert outcome.counts["finished"] == 4
    for row in grid.grid_rows(store, spec.name):
        old = before.get(row["session_id"], [])
        assert session_events(db, row["session_id"])[:len(old)] == old
        assert_events_sound(db, row["session_id"])
        assert store.state(row["session_id"]).coder["name"] == "offline"
    assert assert_report_is_hand_computed(db, spec.name, build_report(store, spec.name).table) == 4
    store.close()


def test_offline_study_on_a_local_ray_cluster_with_a_worker_killed(tmp_path, study_env):
    pytest.importorskip("ray")
    from engine.study.ray_pool import RayPool

    spec = load_spec(write_spec(tmp_path / "s.toml", "offline-ray", steps=2, coder=OFFLINE))
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    grid.ensure_study(store, spec)
    prepare_data(spec)
    killed: list[str] = []

    def kill_one(rows):
        for row in rows:
            if not killed and row["state"] == "running" and row["session_id"] and row["pid"]:
                if store.state(row["session_id"]).running_node is not None:
                    os.kill(int(row["pid"]), signal.SIGKILL)
                    killed.append(row["session_id"])

    first = run_study(store, spec, RayPool(db, spec.name, resources=spec.resources, num_cpus=2), workers=2,
                      on_tick=kill_one)
    assert killed and first.counts["interrupted"] == 1 and first.counts["finished"] == 3, first.counts
    second = run_study(store, spec, RayPool(db, spec.name, resources=spec.resources, num_cpus=2), workers=2)
    assert second.counts["finished"] == 4 and len(second.ran) == 1
    for row in grid.grid_rows(store, spec.name):
        assert_events_sound(db, row["session_id"])
    resumed = [k for _, k, _ in session_events(db, killed[0]) if k == "session_resumed"]
    assert len(resumed) == 1
    assert assert_report_is_hand_computed(db, spec.name, build_report(store, spec.name).table) == 4
    store.close()
