"""Studies with people, without a UI (engine.study.people, engine.session.participants,
engine.study.people_report): the spec's [people] table and its counterbalanced order, where a
participant is, their consent, profile and answers stored as study events, their commands only
for their own session (a forged one refused and recorded, by the store and by the runner), the
guidance budget, the time limit, and the report by expertise group × level.

Sessions run for real: detached study workers (real processes, the sandbox, SQLite) with the
fast hash coder of test_study_pool (a session takes seconds)."""
from __future__ import annotations

import csv
import itertools
import sqlite3
import time
from collections import Counter
from pathlib import Path

import pytest

from engine.session import events as ev
from engine.session import participants as log
from engine.session.store import SessionStore
from engine.session.active_time import ActiveClock, active_seconds
from engine.study import grid, people
from engine.study.people_report import (NO_PROFILE, by_expertise, expertise_points, session_rows,
                                        steering_counts, write_sessions_csv)
from engine.study.people_spec import balanced_latin_square
from engine.study.spec import SpecError, load_spec, parse_spec

from .test_study_pool import SLEEP_ENV, assert_events_sound, study_env

__all__ = ["study_env"]

PEOPLE = '''
participants = ["p01", "p02"]
time_limit = {time_limit}

[people]
instructions = "Steer the agent towards a pipeline that is fair to every skin tone."
consent = "I agree that my steering and my answers are recorded for this study."
roles = ["dermatologist", "data scientist"]
guidance_budget = {budget}

[[people.questions]]
id = "fair_dark"
text = "How sure are you that the chosen pipeline is fair to dark skin?"
scale = [1, 7]

[[people.questions]]
id = "comment"
text = "Anything else?"
kind = "text"
'''


def people_spec(path: Path, name: str, *, steps: int = 2, time_limit: float = 600, budget: int = 3) -> Path:
    path.write_text(f'''
name = "{name}"
levels = ["base", "fairness-methods"]
steps = {steps}
seed = 1
step_timeout = 120
{PEOPLE.format(time_limit=time_limit, budget=budget)}
[search]
num_drafts = 2

[coder]
factory = "tests.unit.test_study_pool:fast_coder"
label = "fast"

[data]
synth = {{ n_train = 60, n_test = 40, size = 16 }}
''')
    return path


def wait_for(predicate, timeout: float = 180, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def run_cell_to_end(store: SessionStore, spec, participant: str) -> str:
    """Start the participant's current cell through a detached worker and wait until its session ended."""
    position = people.where(store, spec, participant)
    assert position.step == people.READY, position.step
    proc = people.start_cell(store, spec, participant, position)
    assert proc is not None
    proc.wait(timeout=240)
    assert proc.returncode == 0, (position.cell.session_id, proc.returncode)
    return position.cell.session_id


# --------------------------------------------------------------------------- the spec


def test_latin_square_rows_are_balanced():
    for n in (2, 3, 4, 5):
        items = list(range(n))
        rows = [balanced_latin_square(items, r) for r in range(2 * n if n % 2 else n)]
        for row in rows:
            assert sorted(row) == items
        for place in range(n):  # every item at every place equally often
            assert len(set(Counter(row[place] for row in rows).values())) == 1
        follows = Counter((a, b) for row in rows for a, b in itertools.pairwise(row))
        assert set(follows) == {(a, b) for a in items for b in items if a != b}
        assert len(set(follows.values())) == 1  # and each follows each other equally often
    assert balanced_latin_square(["base", "methods"], 0) == ["base", "methods"]
    assert balanced_latin_square(["base", "methods"], 1) == ["methods", "base"]


def test_people_spec_parsed_and_checked(tmp_path):
    spec = load_spec(people_spec(tmp_path / "s.toml", "ppl", time_limit=90, budget=2))
    assert spec.time_limit == 90 and spec.people.guidance_budget == 2
    assert [q.id for q in spec.people.questions] == ["fair_dark", "comment"]
    assert spec.people.fields == ("role", "years_dermatology", "years_ml", "notes")
    config = spec.session_config(spec.cells()[0])
    assert config.time_limit_s == 90 and config.extra["study"]["guidance_budget"] == 2
    assert [c.level.label for c in people.participant_cells(spec, "p01")] == ["base", "fairness-methods"]
    assert [c.level.label for c in people.participant_cells(spec, "p02")] == ["fairness-methods", "base"]
    with pytest.raises(people.UnknownParticipant, match="not a participant"):
        people.participant_cells(spec, "p03")
    raw = {"name": "x", "levels": ["base"], "people": {"consent": "ok"}}
    with pytest.raises(SpecError, match="needs participants"):
        parse_spec(raw)
    with pytest.raises(SpecError, match="scale must be"):
        parse_spec({**raw, "participants": ["a"], "people": {"questions": [{"id": "q", "text": "t", "scale": [3]}]}})
    with pytest.raises(SpecError, match="time_limit"):
        parse_spec({"name": "x", "levels": ["base"], "time_limit": 0})
    dry = people.dry_run_spec(load_spec(people_spec(tmp_path / "s2.toml", "real", time_limit=90, budget=2)))
    assert dry.name == "real-dry-run" and [c.name for c in dry.coders] == ["offline"]
    assert dry.people == spec.people and dry.participants == ["p01", "p02"]


def test_profile_and_answers_are_checked_before_anything_is_recorded(tmp_path):
    spec = load_spec(people_spec(tmp_path / "s.toml", "checks"))
    store = SessionStore(tmp_path / "db.db")
    grid.ensure_study(store, spec)
    assert people.where(store, spec, "p01").step == people.CONSENT
    people.consent(store, spec, "p01")
    assert people.where(store, spec, "p01").step == people.PROFILE
    for bad, why in (({"role": "nurse"}, "choose your role"),
                     ({"role": "dermatologist", "years_dermatology": "lots"}, "number of years"),
                     ({"role": "dermatologist", "years_dermatology": "3", "years_ml": "-1"}, "from 0 to 80")):
        with pytest.raises(ValueError, match=why):
            people.give_profile(store, spec, "p01", bad)
    assert [e.kind for e in log.events(store, spec.name)] == ["consent"]
    people.give_profile(store, spec, "p01", {"role": "dermatologist", "years_dermatology": "12", "years_ml": "0.5",
                                             "notes": "  clinic  "})
    row = log.participant(store, spec.name, "p01")
    assert (row["role"], row["years_dermatology"], row["years_ml"], row["notes"]) == ("dermatologist", 12, 0.5,
                                                                                       "clinic")
    assert people.where(store, spec, "p01").step == people.READY
    question = spec.people.questions[0]
    assert question.check("7") == 7 and spec.people.questions[1].check("") is None
    for bad in ("8", "0", "sure", None):
        with pytest.raises(ValueError):
            question.check(bad)
    store.close()


# --------------------------------------------------------------------------- steering


def test_commands_only_for_the_participants_own_session(tmp_path, study_env, monkeypatch):
    """p02's command for p01's session is refused and recorded by the store; a forged row in the
    commands table (p02's id on p01's session) is refused and recorded by the runner; p01's own
    commands are carried out and every event they cause names p01; the guidance budget holds."""
    monkeypatch.setenv(SLEEP_ENV, "1.5")
    spec = load_spec(people_spec(tmp_path / "s.toml", "steer", steps=3, budget=1))
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    grid.ensure_study(store, spec)
    for pid in ("p01", "p02"):
        people.consent(store, spec, pid)
        people.give_profile(store, spec, pid, {"role": "dermatologist", "years_dermatology": 3, "years_ml": 1})
    position = people.where(store, spec, "p01")
    proc = people.start_cell(store, spec, "p01", position)
    sid = position.cell.session_id
    wait_for(lambda: store.state(sid).nodes, what="p01's first node")

    with pytest.raises(log.CommandRefused, match="p01's, not p02's"):
        people.steer(store, spec, "p02", sid, "stop", {"interrupt": True})
    with pytest.raises(log.CommandRefused, match="no session"):
        people.steer(store, spec, "p02", "steer-p01-nope", "pause")
    refused = log.events(store, spec.name, kinds=(log.COMMAND_REFUSED,))
    assert [(e.participant_id, e.payload["kind"], e.payload["target"]) for e in refused] == [
        ("p02", "stop", sid), ("p02", "pause", "steer-p01-nope")]
    assert not [c for c in store.commands(sid) if c["kind"] == "stop"]   # nothing reached the session

    forged = store.issue_command(sid, "stop", {"interrupt": True}, by="participant p02", participant_id="p02")
    guide = people.steer(store, spec, "p01", sid, "guide", {"text": "reweight by skin tone"})
    second = people.steer(store, spec, "p01", sid, "guide", {"text": "and select by the worst group"})
    node = min(store.state(sid).nodes)
    prune = people.steer(store, spec, "p01", sid, "prune", {"node_id": node})
    for command in (forged, guide, second, prune):
        assert store.wait_command(command, timeout=60) is not None
    assert store.command(forged)["result"].startswith("rejected: participant p02 may not steer")
    assert store.command(second)["result"] == "rejected: the guidance budget of this session (1) is spent"
    proc.wait(timeout=240)
    state = store.state(sid)
    assert state.status == "finished" and not state.stop_requested
    errors = [e for e in store.events(sid) if e.kind == ev.ERROR and e.payload.get("where") == "command"]
    assert {e.payload["participant_id"] for e in errors} == {"p02", "p01"}
    steering = [e for e in store.events(sid) if e.kind in (ev.GUIDANCE, ev.PRUNED)]
    assert [(e.kind, e.payload["participant_id"], e.payload["by"]) for e in steering] == [
        ("guidance", "p01", "participant p01"), ("pruned", "p01", "participant p01")]
    counts = steering_counts(store.events(sid), "p01")
    assert (counts["guidance"], counts["guidance_chars"], counts["prunes"], counts["refused"]) == (
        1, len("reweight by skin tone"), 1, 1)
    assert_events_sound(db, sid)
    store.close()


def test_time_limit_ends_the_session_finished_with_a_final_choice(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "4")
    spec = load_spec(people_spec(tmp_path / "s.toml", "timed", steps=50, time_limit=12))
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    grid.ensure_study(store, spec)
    people.consent(store, spec, "p01")
    people.give_profile(store, spec, "p01", {"role": "data scientist", "years_dermatology": 0, "years_ml": 5})
    sid = run_cell_to_end(store, spec, "p01")
    state = store.state(sid)
    assert state.status == "finished" and state.finish_reason == "time limit of 12 s reached"
    assert 0 < state.agent_steps < 50 and state.final_choice is not None
    stops = [e.payload for e in store.events(sid) if e.kind == ev.STOP_REQUESTED]
    assert [p["by"] for p in stops] == ["time limit"]
    assert 12 <= active_seconds(store.events(sid)) < 12 + 120
    assert people.where(store, spec, "p01").step == people.QUESTIONS
    assert_events_sound(db, sid)
    store.close()


def test_active_time_leaves_out_the_gaps_between_runners():
    def event(kind, ts):
        return ev.Event(seq=0, kind=kind, ts=ts)

    events = [event("session_started", 100), event("node_created", 130), event("session_resumed", 500),
              event("node_created", 520)]
    assert active_seconds(events) == 30 + 20
    assert active_seconds(events, now=600) == 30 + 100
    clock = ActiveClock()
    for e in events:
        clock.add(e)
    assert clock.seconds() == 50 and clock.seconds(now=600) == 130


# --------------------------------------------------------------------------- a whole pilot, and its report


def test_two_participants_pilot_and_the_report_by_expertise(tmp_path, study_env):
    """Two participants of different roles each through their two cells (in their own order, the
    sessions run by detached workers at the same time), answering after each; the report by
    expertise group × level and its long CSV agree with the events."""
    spec = load_spec(people_spec(tmp_path / "s.toml", "pilot"))
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    grid.ensure_study(store, spec)
    roles = {"p01": "dermatologist", "p02": "data scientist"}
    for pid, role in roles.items():
        people.consent(store, spec, pid)
        people.give_profile(store, spec, pid, {"role": role, "years_dermatology": 10 if pid == "p01" else 0,
                                               "years_ml": 1 if pid == "p01" else 6, "notes": ""})
    for round_ in range(2):
        procs = {}
        for pid in roles:  # both participants' sessions at once
            position = people.where(store, spec, pid)
            assert (position.step, position.number, position.total) == (people.READY, round_ + 1, 2)
            procs[pid] = (people.start_cell(store, spec, pid, position), position.cell)
        for pid, (proc, cell) in procs.items():
            assert proc.wait(timeout=240) == 0
            assert people.where(store, spec, pid).step == people.QUESTIONS
            with pytest.raises(ValueError, match="needs an answer"):
                people.answer(store, spec, pid, cell, {"comment": "no scale answer"})
            people.answer(store, spec, pid, cell, {"fair_dark": 2 + round_ + (pid == "p02"), "comment": f"r{round_}"})
    for pid in roles:
        assert people.where(store, spec, pid).step == people.DONE
    kinds = [e.kind for e in log.events(store, spec.name)]
    assert Counter(kinds) == {"consent": 2, "profile": 2, "cell_started": 4, "answers": 4, "completed": 2}
    seqs = [e.seq for e in log.events(store, spec.name)]
    assert seqs == list(range(1, len(seqs) + 1))

    rows = session_rows(store, spec)
    assert [(r["participant"], r["level"], r["position"]) for r in rows] == [
        ("p01", "base", 1), ("p01", "fairness-methods", 2), ("p02", "fairness-methods", 1), ("p02", "base", 2)]
    for row in rows:
        assert row["status"] == "finished" and row["excluded"] is None and row["role"] == roles[row["participant"]]
        assert row["test_auc"] is not None and row["seconds_to_first_measured"] is not None
        # the final choice's own 95 % test interval, from its kept predictions
        assert row["test_auc_ci_lo"] <= row["test_auc"] <= row["test_auc_ci_hi"]
        assert_events_sound(db, row["session_id"])
        final = store.state(row["session_id"]).final_choice[f"by_{spec.best}"]
        test = [e.payload for e in store.events(row["session_id"])
                if e.kind == ev.EVALUATED and e.payload["node_id"] == final and e.payload["split"] == "test"][-1]
        assert row["test_auc"] == test["medfair"]["Overall AUC"]
    assert [r["q_fair_dark"] for r in rows] == [2, 3, 3, 4] and rows[0]["q_comment"] == "r0"

    entries = by_expertise(spec, rows)
    assert [(e["group"], e["level"], e["n"]) for e in entries] == [
        ("dermatologist", "base", 1), ("dermatologist", "fairness-methods", 1),
        ("data scientist", "base", 1), ("data scientist", "fairness-methods", 1)]
    assert entries[0]["answers"]["fair_dark"]["mean"] == 2 and entries[0]["answers"]["comment"]["texts"] == ["r0"]
    assert entries[0]["test_auc"]["mean"] == rows[0]["test_auc"] and entries[0]["test_auc"]["std"] is None
    points = expertise_points(entries)
    assert {(p.group, p.level) for p in points} == {(e["group"], e["level"]) for e in entries}

    path = write_sessions_csv(rows, tmp_path / "sessions.csv")
    read = list(csv.DictReader(path.open()))
    assert len(read) == 4 and read[0]["role"] == "dermatologist" and read[3]["q_fair_dark"] == "4"
    assert float(read[1]["test_auc"]) == rows[1]["test_auc"]

    from befair_tui.cli import main

    figure = tmp_path / "fig.png"
    assert main(["study", "report", spec.name, "--db", str(db), "--json", "--figure", str(figure),
                 "--sessions-csv", str(tmp_path / "s2.csv")]) == 0
    assert figure.stat().st_size > 20_000 and (tmp_path / "s2.csv").read_text() == path.read_text()
    store.close()


def test_report_of_a_participant_without_a_profile_or_sessions(tmp_path):
    spec = load_spec(people_spec(tmp_path / "s.toml", "empty"))
    store = SessionStore(tmp_path / "db.db")
    grid.ensure_study(store, spec)
    rows = session_rows(store, spec)
    assert {r["role"] for r in rows} == {NO_PROFILE} and {r["excluded"] for r in rows} == {"no session yet"}
    assert [e["n"] for e in by_expertise(spec, rows)] == [0, 0]
    store.close()


def test_migration_adds_the_study_log_and_the_commands_participant(tmp_path):
    store = SessionStore(tmp_path / "db.db")
    con = sqlite3.connect(tmp_path / "db.db")
    assert {"study_events", "study_participants"} <= {r[0] for r in con.execute(
        "select name from sqlite_master where type = 'table'")}
    assert "participant_id" in {r[1] for r in con.execute("pragma table_info(commands)")}
    assert "participant_id" in {r[1] for r in con.execute("pragma table_info(command_log)")}
    assert "008_participants" in [r[0] for r in con.execute("select name from migrations")]
    con.close()
    store.close()


# --------------------------------------------------------------------------- the command line


def test_study_run_refuses_a_study_with_people_and_serve_an_agent_without_a_key(tmp_path, monkeypatch, capsys):
    from befair_tui.cli import main

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_MODEL", "BEFAIR_LLM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    spec = people_spec(tmp_path / "s.toml", "cli")
    assert main(["study", "run", str(spec), "--db", str(tmp_path / "db.db")]) == 2
    assert "steered by people" in capsys.readouterr().err
    llm = tmp_path / "llm.toml"
    llm.write_text(spec.read_text().replace('factory = "tests.unit.test_study_pool:fast_coder"\nlabel = "fast"',
                                            'name = "openai"\nmodel = "gpt-4.1-mini"'))
    assert main(["serve", "--study", str(llm), "--db", str(tmp_path / "db2.db"), "--port", "8999"]) == 2
    err = capsys.readouterr().err
    assert "cannot reach a model" in err and "--dry-run" in err
    assert main(["serve", "--host", "0.0.0.0", "--db", str(tmp_path / "db3.db")]) == 2
    assert "this machine only" in capsys.readouterr().err
    assert main(["serve", "--study", str(spec), "--researcher", "--host", "0.0.0.0"]) == 2
    capsys.readouterr()
    assert main(["participate", "--study", "nope", "--db", str(tmp_path / "db2.db")]) == 2
    assert "no study 'nope'" in capsys.readouterr().err


@pytest.mark.slow
def test_a_dry_run_of_an_llm_study_with_the_offline_coder_and_no_key(tmp_path, study_env, monkeypatch, capsys):
    """The whole study, every participant's cells, headless with the offline coder as NAME-dry-run;
    the real study's name is untouched."""
    from befair_tui.cli import main

    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_LLM_MODEL", "BEFAIR_LLM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    spec = people_spec(tmp_path / "s.toml", "dry", steps=1)
    spec.write_text(spec.read_text().replace('factory = "tests.unit.test_study_pool:fast_coder"\nlabel = "fast"',
                                             'name = "openai"\nmodel = "gpt-4.1-mini"'))
    db = tmp_path / "db.db"
    assert main(["study", "run", str(spec), "--dry-run", "--workers", "2", "--quiet", "--db", str(db)]) == 0
    store = SessionStore(db)
    assert grid.study_names(store) == ["dry-dry-run"]
    rows = grid.grid_rows(store, "dry-dry-run")
    assert [r["state"] for r in rows] == ["finished"] * 4
    assert {store.state(r["session_id"]).coder["name"] for r in rows} == {"offline"}
    assert main(["study", "report", "dry-dry-run", "--db", str(db), "--sessions-csv", str(tmp_path / "s.csv")]) == 0
    assert "by expertise × level" in capsys.readouterr().out
    store.close()
