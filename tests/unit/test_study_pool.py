"""engine.study: a study's grid run by the local pool (real worker processes, one SQLite database),
killed and run again, and its report checked against a hand computation from the stored events.

The agent here is `fast_coder` (a factory coder named in the spec): pipelines that score images by
a hash, so a session takes seconds. The offline coder's studies (and Ray's) are in
test_study_offline.py (slow)."""
from __future__ import annotations

import json
import math
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from engine.coders.protocol import CoderBase, CoderReply, Review
from engine.session.heartbeat import runner_status
from engine.session.selection import DEFAULT_CRITERION
from engine.session.state import fold
from engine.session.store import SessionStore, node_row
from engine.study import grid
from engine.study.aggregate import AUC_GAP, OVERALL_AUC, statistic
from engine.study.pool import LocalPool, default_env, prepare_data, run_study
from engine.study.report import build_report
from engine.study.spec import load_spec

ROOT = Path(__file__).resolve().parents[2]
SLEEP_ENV = "BEFAIR_TEST_PIPELINE_SLEEP"

PIPELINE = '''
import os, sys, time, zlib

def predict(folder):
    return {{n: (zlib.crc32((n + "{salt}").encode()) % 1000) / 1000.0 for n in sorted(os.listdir(folder))}}

if __name__ == "__main__":
    time.sleep({sleep})
    print("Validation AUROC: 0.71")
'''


class FastCoder(CoderBase):
    """Hash-scored pipelines (seeded by the session's seed and step): the pool's mechanics, fast."""
    name, label, simulated = "fast", "fast hash coder (test)", True

    def __init__(self, config):
        self.seed = config.seed
        self.sleep = float(os.environ.get(SLEEP_ENV, "0"))

    def _reply(self, ctx, stage):
        code = PIPELINE.format(salt=f"{self.seed}-{ctx.step}", sleep=self.sleep)
        return CoderReply(plan=f"{stage} {ctx.step}", code=code, components={"stage": stage})

    def draft(self, ctx):
        return self._reply(ctx, "draft")

    def improve(self, ctx, parent):
        return self._reply(ctx, "improve")

    def debug(self, ctx, parent):
        return self._reply(ctx, "debug")

    def review(self, ctx, node):
        ok = node.status == "ok"
        return Review(is_bug=not ok, summary="ok" if ok else "failed", claimed_metric=0.71 if ok else None)


def fast_coder(config):
    return FastCoder(config)


def write_spec(path: Path, name: str, *, steps: int = 2, coder: str | None = None, levels=("base", "fairness-methods"),
               repeats: int = 2, extra: str = "") -> Path:
    coder = coder or f'factory = "{__name__}:fast_coder"\nlabel = "fast"'
    path.write_text(f'''
name = "{name}"
levels = {json.dumps(list(levels))}
repeats = {repeats}
steps = {steps}
seed = 1
step_timeout = 120
{extra}

[search]
num_drafts = 2

[coder]
{coder}

[data]
synth = {{ n_train = 60, n_test = 40, size = 16 }}
''')
    return path


@pytest.fixture()
def study_env(tmp_path_factory, monkeypatch):
    """A SynthDerm cache shared by this module's studies, this checkout importable by workers."""
    home = tmp_path_factory.getbasetemp() / "study-home"
    monkeypatch.setenv("BEFAIR_HOME", str(home))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.chdir(ROOT)
    return home


# --------------------------------------------------------------------------- checks from the database


def session_events(db: Path, sid: str) -> list[tuple[int, str, dict]]:
    con = sqlite3.connect(db)
    try:
        return [(seq, kind, json.loads(p)) for seq, kind, p in
                con.execute("select seq, kind, payload from events where session_id = ? order by seq", [sid])]
    finally:
        con.close()


def assert_events_sound(db: Path, sid: str) -> None:
    """No event lost (seq 1..n without a hole) or duplicated (one session_started; each node
    created once, started once, ended once, evaluated at most once per split); the nodes table is
    the fold of the events."""
    events = session_events(db, sid)
    assert [seq for seq, _, _ in events] == list(range(1, len(events) + 1))
    kinds = Counter(kind for _, kind, _ in events)
    assert kinds["session_started"] == 1
    created = [p["node_id"] for _, k, p in events if k == "node_created"]
    assert created == list(range(1, len(created) + 1))
    per_node = Counter((k, p.get("node_id"), p.get("split")) for _, k, p in events if "node_id" in p)
    for node_id in created:
        assert per_node[("code", node_id, None)] <= 1
        assert per_node[("exec_started", node_id, None)] <= 1
        ends = per_node[("exec_finished", node_id, None)] + per_node[("node_interrupted", node_id, None)]
        assert ends == 1, f"node {node_id} of {sid} ended {ends} times"
        for split in ("validation", "test"):
            assert per_node[("evaluated", node_id, split)] <= 1
    store = SessionStore(db)
    try:
        state = fold(store.events(sid), sid)
        table = {r["node_id"]: r for r in store.nodes(sid)}
        assert table == {n: node_row(sid, node) for n, node in state.nodes.items()}
    finally:
        store.close()


def hand_table(db: Path, study: str,
               criterion: str = DEFAULT_CRITERION) -> dict[tuple[str, str], dict[str, list[float]]]:
    """Per (agent, level): the final choice's test AUC and gap of each finished session, read from
    the raw events (no fold, no engine.study)."""
    con = sqlite3.connect(db)
    cells = con.execute("select session_id, agent, level from study_sessions where study = ? order by cell",
                        [study]).fetchall()
    con.close()
    out: dict[tuple[str, str], dict[str, list[float]]] = {}
    for sid, agent, level in cells:
        events = session_events(db, sid)
        finished = [p for _, k, p in events if k == "session_finished"]
        if not finished or finished[-1]["status"] != "finished":
            continue
        choice = [p for _, k, p in events if k == "final_choice"][-1][f"by_{criterion}"]
        test = [p for _, k, p in events if k == "evaluated" and p["node_id"] == choice and p["split"] == "test"]
        if "medfair" not in test[-1]:  # sealed: a blind study keeps its test figures out of the events
            continue
        cols = out.setdefault((agent, level), {OVERALL_AUC: [], AUC_GAP: []})
        cols[OVERALL_AUC].append(test[-1]["medfair"]["Overall AUC"])
        cols[AUC_GAP].append(test[-1]["medfair"]["auc_gap"])
    return out


def assert_report_is_hand_computed(db: Path, study: str, table: list[dict],
                                   criterion: str = DEFAULT_CRITERION) -> int:
    """The report's table (by the study's criterion, robust unless its spec says `best`) equals the
    mean and std computed by hand from the raw events."""
    hand = hand_table(db, study, criterion)
    assert hand, "no finished session to compare"
    for (agent, level), columns in hand.items():
        for column, values in columns.items():
            mean = statistics.mean(values)
            assert statistic(table, agent, level, "mean", column) == pytest.approx(mean, abs=1e-12)
            if len(values) > 1:
                std = statistics.stdev(values)
                half = 1.96 * std / math.sqrt(len(values))
                assert statistic(table, agent, level, "std", column) == pytest.approx(std, abs=1e-12)
                assert statistic(table, agent, level, "ci95_lo", column) == pytest.approx(mean - half, abs=1e-12)
                assert statistic(table, agent, level, "ci95_hi", column) == pytest.approx(mean + half, abs=1e-12)
    return sum(len(c[OVERALL_AUC]) for c in hand.values())


def _run(store, spec, workers=2, **kw):
    return run_study(store, spec, LocalPool(store.path, spec.name, env=default_env()), workers=workers, **kw)


# --------------------------------------------------------------------------- tests


def test_local_pool_runs_the_grid_resumably_and_reports_it(tmp_path, study_env, capsys):
    spec = load_spec(write_spec(tmp_path / "s.toml", "pool2x2", steps=1))
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    assert grid.ensure_study(store, spec) is True
    assert [r["state"] for r in grid.grid_rows(store, spec.name)] == ["queued"] * 4   # all cells up front
    prepare_data(spec)
    ticks = []
    outcome = _run(store, spec, on_tick=lambda rows: ticks.append(grid.counts(rows)))
    assert outcome.counts["finished"] == 4 and sorted(outcome.ran) == [0, 1, 2, 3]
    assert max(t["running"] for t in ticks) == 2                  # two at a time, never more
    rows = grid.grid_rows(store, spec.name)
    for row in rows:
        assert row["state"] == "finished" and row["exit_code"] == 0 and row["attempts"] == 1
        assert_events_sound(db, row["session_id"])
        session = store.session(row["session_id"])                # the sessions table keeps the study's keys
        assert (session["study_id"], session["repeat_index"], session["level"]) == \
            (spec.name, row["repeat_index"], row["instruction_level"])
    n_events = sqlite3.connect(db).execute("select count(*) from events").fetchone()[0]

    again = _run(store, spec)                                     # nothing left to run
    assert again.ran == [] and again.counts["finished"] == 4
    assert sqlite3.connect(db).execute("select count(*) from events").fetchone()[0] == n_events
    assert grid.ensure_study(store, spec) is False

    report = build_report(store, spec.name)
    assert assert_report_is_hand_computed(db, spec.name, report.table) == 4
    assert report.n == {"fast · base": 2, "fast · fairness-methods": 2}

    from befair_tui.cli import main

    csv_path, png = tmp_path / "agg.csv", tmp_path / "fig.png"
    assert main(["study", "report", spec.name, "--db", str(db), "--json", "--csv", str(csv_path),
                 "--figure", str(png)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert_report_is_hand_computed(db, spec.name, printed["table"])
    assert [r["statistic"] for r in printed["table"]] == ["mean", "std", "ci95_hi", "ci95_lo"] * 2
    assert csv_path.read_text().splitlines()[0].startswith(",statistic,model,prompt,Test Overall AUC,")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    assert main(["sessions", "--study", spec.name, "--db", str(db), "--json"]) == 0
    assert sorted(r["id"] for r in json.loads(capsys.readouterr().out)) == sorted(r["session_id"] for r in rows)
    assert main(["study", "status", spec.name, "--db", str(db)]) == 0
    out = capsys.readouterr().out
    assert "4 finished" in out and "generated data (SynthDerm)" in out
    store.close()


def _running_session_with_a_node(db: Path, study: str) -> bool:
    if not db.exists():
        return False
    con = sqlite3.connect(db, timeout=30)
    try:
        return con.execute(
            "select count(*) from study_sessions g join sessions s on s.id = g.session_id "
            "where g.study = ? and s.status = 'running' and s.n_nodes >= 2", [study]).fetchone()[0] >= 1
    except sqlite3.OperationalError:
        return False
    finally:
        con.close()


def kill_study_runner_midway(db: Path, spec_path: Path, study: str, timeout: float = 240) -> None:
    """Start `befair study run` as a process, SIGKILL it once a session is under way, and wait
    until its workers have stopped their sessions."""
    proc = subprocess.Popen([sys.executable, "-m", "befair_tui.cli", "study", "run", str(spec_path), "--workers", "2",
                             "--db", str(db), "--quiet"], cwd=ROOT, env=default_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while not _running_session_with_a_node(db, study):
        assert proc.poll() is None, proc.stderr.read().decode() if proc.stderr else ""
        assert time.monotonic() < deadline, "no session got under way"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = SessionStore(db)
    try:
        deadline = time.monotonic() + 60
        while any(runner_status(store, r["session_id"]) == "alive"
                  for r in grid.grid_rows(store, study) if r["session_id"]):
            assert time.monotonic() < deadline, "a worker outlived its study runner"
            time.sleep(0.3)
    finally:
        store.close()


@pytest.mark.slow
def test_killing_the_study_runner_then_running_it_again_loses_and_duplicates_nothing(tmp_path, study_env,
                                                                                     monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "1.0")
    spec_path = write_spec(tmp_path / "s.toml", "killed", steps=3)
    db = tmp_path / "db" / "befair.db"
    kill_study_runner_midway(db, spec_path, "killed")

    store = SessionStore(db)
    spec = load_spec(spec_path)
    rows = grid.grid_rows(store, spec.name)
    states = Counter(r["state"] for r in rows)
    assert states["interrupted"] >= 1 and states["running"] == 0, states
    before = {r["session_id"]: session_events(db, r["session_id"]) for r in rows if r["session_id"]}

    outcome = _run(store, spec)
    assert outcome.counts["finished"] == 4
    for row in grid.grid_rows(store, spec.name):
        after = session_events(db, row["session_id"])
        old = before.get(row["session_id"], [])
        assert after[:len(old)] == old                           # nothing recorded before the kill was lost
        assert_events_sound(db, row["session_id"])
        if old and not (old[-1][1] == "session_finished" and old[-1][2]["status"] == "finished"):
            assert any(k == "session_resumed" for _, k, _ in after[len(old):])  # resumed, not started over
    assert_report_is_hand_computed(db, spec.name, build_report(store, spec.name).table)
    store.close()


@pytest.mark.slow
def test_a_worker_killed_mid_session_reads_interrupted_and_is_resumed(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "2.0")
    spec = load_spec(write_spec(tmp_path / "s.toml", "workerkill", steps=2, levels=("base",)))
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    grid.ensure_study(store, spec)
    prepare_data(spec)
    killed: list[str] = []

    def kill_one(rows):
        for row in rows:
            if not killed and row["state"] == "running" and row["session_id"] and row["n_nodes"]:
                state = store.state(row["session_id"])
                if state.running_node is not None:
                    os.kill(int(row["pid"]), signal.SIGKILL)
                    killed.append(row["session_id"])

    first = _run(store, spec, on_tick=kill_one)
    assert killed and first.counts == {"queued": 0, "running": 0, "finished": 1, "failed": 0, "interrupted": 1}
    row = next(r for r in grid.grid_rows(store, spec.name) if r["session_id"] == killed[0])
    assert row["exit_code"] == -signal.SIGKILL and row["status"] == "interrupted"

    second = _run(store, spec)
    assert second.ran == [row["cell"]] and second.counts["finished"] == 2
    events = session_events(db, killed[0])
    resumed = [p for _, k, p in events if k == "session_resumed"]
    assert len(resumed) == 1 and resumed[0]["interrupted"]       # the node the kill cut short
    interrupted = [p for _, k, p in events if k == "node_interrupted"]
    assert [p["node_id"] for p in interrupted] == resumed[0]["interrupted"]
    assert_events_sound(db, killed[0])
    assert grid.grid_rows(store, spec.name)[row["cell"]]["attempts"] == 2
    store.close()


@pytest.mark.slow
def test_a_blind_study_reports_its_sealed_test_metrics_only_unblinded(tmp_path, study_env):
    spec = load_spec(write_spec(tmp_path / "s.toml", "blind", steps=1, levels=("base",), extra="blind_test = true"))
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    grid.ensure_study(store, spec)
    assert _run(store, spec).counts["finished"] == 2
    sealed = build_report(store, spec.name)                       # what a participant may see
    assert sealed.n == {} and len(sealed.excluded) == 2
    assert all("sealed (a blind study)" in e["reason"] for e in sealed.excluded)
    assert hand_table(db, spec.name) == {}                        # no figures in the events: a study keeps them
    report = build_report(store, spec.name, unblind=True)         # a researcher's
    assert report.n == {"fast · base": 2}
    con = sqlite3.connect(db)
    aucs = []
    for row in grid.grid_rows(store, spec.name):
        choice = store.state(row["session_id"]).final_choice[f"by_{spec.best}"]
        (payload,) = con.execute("select payload from sealed_metrics where session_id = ? and node_id = ? "
                                 "and split = 'test'", [row["session_id"], choice]).fetchone()
        aucs.append(json.loads(payload)["medfair"]["Overall AUC"])
    con.close()
    assert statistic(report.table, "fast", "base", "mean", OVERALL_AUC) == pytest.approx(statistics.mean(aucs))
    store.close()


# --------------------------------------------------------------------------- the grid's bookkeeping


def test_cell_status_reconciles_the_grid_with_the_session():
    now = time.time()
    dead_pid = 2 ** 22 + 12345
    mine = grid.runner_id()
    base = {"session_id": "s", "heartbeat_at": None, "pid": None, "updated_at": now}
    assert grid.cell_status({"session_id": None, "session_status": None, "status": "queued"}) == "queued"
    assert grid.cell_status({"session_id": None, "session_status": None, "status": "running", "runner": mine}) \
        == "running"
    assert grid.cell_status({"session_id": None, "session_status": None, "status": "running",
                             "runner": mine.rsplit(":", 1)[0] + f":{dead_pid}"}) == "queued"
    assert grid.cell_status({"session_id": None, "session_status": None, "status": "failed"}) == "failed"
    assert grid.cell_status({**base, "session_status": "finished", "status": "running"}) == "finished"
    assert grid.cell_status({**base, "session_status": "failed", "status": "running"}) == "failed"
    assert grid.cell_status({**base, "session_status": "stopped", "status": "running"}) == "interrupted"
    assert grid.cell_status({**base, "session_status": "running", "heartbeat_at": now}, now=now) == "running"
    # its worker just ended (settled), the heartbeat it left still fresh: not a live runner
    assert grid.cell_status({**base, "session_status": "running", "heartbeat_at": now - 1, "status": "interrupted",
                             "finished_at": now}, now=now) == "interrupted"
    assert grid.cell_status({**base, "session_status": "running", "heartbeat_at": now, "status": "interrupted",
                             "finished_at": now - 30}, now=now) == "running"        # resumed by someone since
    assert grid.cell_status({**base, "session_status": "running", "heartbeat_at": now - 60, "pid": dead_pid},
                            now=now) == "interrupted"


def test_cli_refusals(tmp_path, study_env, capsys):
    from befair_tui.cli import main

    spec_path = write_spec(tmp_path / "s.toml", "refusals")
    db = tmp_path / "befair.db"
    assert main(["study", "run", str(spec_path), "--workers", "0", "--db", str(db)]) == 2
    assert main(["study", "run", str(spec_path), "--ray-address", "auto", "--db", str(db)]) == 2
    (tmp_path / "bad.toml").write_text('name = "x"\nlevels = ["best"]\n')
    assert main(["study", "run", str(tmp_path / "bad.toml"), "--db", str(db)]) == 3
    SessionStore(db).close()
    assert main(["study", "status", "nope", "--db", str(db)]) == 2
    assert main(["study", "report", "nope", "--db", str(db)]) == 2
    store = SessionStore(db)
    grid.ensure_study(store, load_spec(spec_path))
    store.close()
    write_spec(spec_path, "refusals", steps=5)                    # another spec under the same name
    assert main(["study", "run", str(spec_path), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "unknown level 'best'" in err and "with another spec" in err and "no study 'nope'" in err
    assert main(["study", "report", "refusals", "--db", str(db), "--figure", str(tmp_path / "f.gif")]) == 2
    capsys.readouterr()
    assert main(["study", "status", "--db", str(db), "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed == [{"name": "refusals", "counts": {"queued": 4, "running": 0, "finished": 0, "failed": 0,
                                                      "interrupted": 0}}]
