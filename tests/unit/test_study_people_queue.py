"""`[people] max_running`: a study's cap on sessions running at once (engine.study.people).

Starts beyond the cap wait and start first come, first started, counted from the database alone
(real SQLite, real detached study workers running short sessions with the fast hash coder), so a
new store on the same file (a restarted `befair serve`) finds the same queue."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

from engine.errors import UsageError
from engine.session import participants as log
from engine.session.store import SessionStore
from engine.study import grid, people
from engine.study.spec import load_spec

from .test_study_people import PEOPLE, wait_for
from .test_study_pool import SLEEP_ENV, study_env

__all__ = ["study_env"]

PARTICIPANTS = ("p01", "p02", "p03", "p04")


def queue_spec(path: Path, name: str, *, max_running: int | None, steps: int = 2) -> Path:
    people = PEOPLE.format(time_limit=600, budget=3).replace('participants = ["p01", "p02"]',
                                                            f"participants = {list(PARTICIPANTS)!r}".replace("'", '"'))
    if max_running is not None:
        people = people.replace("[people]\n", f"[people]\nmax_running = {max_running}\n")
    path.write_text(f'''
name = "{name}"
levels = ["base"]
steps = {steps}
seed = 1
step_timeout = 120
{people}
[search]
num_drafts = 2

[coder]
factory = "tests.unit.test_study_pool:fast_coder"
label = "fast"

[data]
synth = {{ n_train = 60, n_test = 40, size = 16 }}
''')
    return path


def signed_in(tmp_path: Path, name: str, *, max_running: int | None):
    spec = load_spec(queue_spec(tmp_path / f"{name}.toml", name, max_running=max_running))
    store = SessionStore(tmp_path / "db" / "befair.db")
    grid.ensure_study(store, spec)
    for pid in PARTICIPANTS:
        people.consent(store, spec, pid)
        people.give_profile(store, spec, pid, {"role": "dermatologist", "years_dermatology": 3, "years_ml": 1})
    return spec, store


class OpenTabs:
    """The participants' tabs open: each writes its presence every second, as ParticipantApp does."""

    def __init__(self, store: SessionStore, spec, participants=PARTICIPANTS) -> None:
        self.store, self.spec, self.open = store, spec, set(participants)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> "OpenTabs":
        self._touch(self.store)
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def close(self, participant: str) -> None:
        self.open.discard(participant)
        log.leave(self.store, self.spec.name, participant, client=f"tab-{participant}")

    def _touch(self, store: SessionStore) -> None:
        for pid in sorted(self.open):
            log.touch(store, self.spec.name, pid, cell=None, client=f"tab-{pid}")

    def _loop(self) -> None:
        own = SessionStore(self.store.path)
        while not self._stop.wait(1.0):
            self._touch(own)
        own.close()


def press_start(store: SessionStore, spec, participant: str):
    """What the Start button does."""
    return people.start_cell(store, spec, participant, people.where(store, spec, participant))


def cell_of(spec, participant: str):
    return people.participant_cells(spec, participant)[0]


def finished(store: SessionStore, spec, participant: str) -> bool:
    return people.where(store, spec, participant).step == people.QUESTIONS


@pytest.mark.slow
def test_starts_beyond_the_cap_wait_and_go_first_come_first_started(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "1")
    spec, store = signed_in(tmp_path, "capped", max_running=1)
    with OpenTabs(store, spec):
        first = press_start(store, spec, "p01")
        assert first is not None
        assert press_start(store, spec, "p02") is None                      # waits: p01 runs
        assert press_start(store, spec, "p03") is None
        assert people.where(store, spec, "p02").step == people.LIVE         # its console, no session yet
        assert people.waiting_line(store, spec, cell_of(spec, "p02")) == (
            "waiting for a free place: 1 session running (the study runs at most 1 at once); "
            "you start automatically")
        assert people.waiting_line(store, spec, cell_of(spec, "p03")) == (
            "waiting for a free place: 1 session running (the study runs at most 1 at once), 1 participant "
            "ahead of you; you start automatically")
        assert people.waiting_line(store, spec, cell_of(spec, "p01")) is None

        assert first.wait(timeout=240) == 0 and finished(store, spec, "p01")
        # the place is free, but p02 asked first: p03's tab polling first starts nothing
        assert people.ensure_runner(store, spec, cell_of(spec, "p03")) is None
        assert "0 sessions running" in people.waiting_line(store, spec, cell_of(spec, "p03"))
        second = people.ensure_runner(store, spec, cell_of(spec, "p02"))
        assert second is not None
        assert people.ensure_runner(store, spec, cell_of(spec, "p02")) is None   # its worker holds the place
        assert people.ensure_runner(store, spec, cell_of(spec, "p03")) is None
        assert people.queue_place(store, spec, cell_of(spec, "p03")).running == 1
        assert second.wait(timeout=240) == 0 and finished(store, spec, "p02")
        third = people.ensure_runner(store, spec, cell_of(spec, "p03"))
        assert third is not None and third.wait(timeout=240) == 0 and finished(store, spec, "p03")
    order = [store.session(cell_of(spec, p).session_id)["created_at"] for p in ("p01", "p02", "p03")]
    assert order == sorted(order)
    store.close()


@pytest.mark.slow
def test_the_queue_is_the_databases_and_an_absent_participant_holds_no_one_up(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "1")
    spec, store = signed_in(tmp_path, "restart", max_running=1)
    with OpenTabs(store, spec) as tabs:
        first = press_start(store, spec, "p01")
        assert first is not None
        for pid in ("p02", "p03", "p04"):
            assert press_start(store, spec, pid) is None
        # a restarted server: a new connection to the same file reads the same queue
        again = SessionStore(store.path)
        assert "2 participants ahead of you" in people.waiting_line(again, spec, cell_of(spec, "p04"))
        tabs.close("p02")                                                     # p02 closed their tab
        assert "1 participant ahead of you" in people.waiting_line(again, spec, cell_of(spec, "p04"))
        assert first.wait(timeout=240) == 0
        assert people.ensure_runner(again, spec, cell_of(spec, "p04")) is None   # p03 asked before p04
        third = people.ensure_runner(again, spec, cell_of(spec, "p03"))
        assert third is not None
        # p02 comes back: their request keeps its place, first in line behind the running session
        tabs.open.add("p02")
        log.touch(again, spec.name, "p02", cell=cell_of(spec, "p02").index, client="tab-p02")
        assert people.waiting_line(again, spec, cell_of(spec, "p02")) == (
            "waiting for a free place: 1 session running (the study runs at most 1 at once); "
            "you start automatically")
        assert "1 participant ahead of you" in people.waiting_line(again, spec, cell_of(spec, "p04"))
        assert third.wait(timeout=240) == 0
        assert people.ensure_runner(again, spec, cell_of(spec, "p04")) is None
        second = people.ensure_runner(again, spec, cell_of(spec, "p02"))
        assert second is not None and second.wait(timeout=240) == 0
    again.close()
    store.close()


def test_tabs_asking_at_once_never_take_more_places_than_the_cap(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "1")
    spec, store = signed_in(tmp_path, "race", max_running=2)
    for pid in PARTICIPANTS:   # the requests recorded first, then every tab asks for a worker at once
        log.append(store, spec.name, log.CELL_STARTED, participant_id=pid, cell=cell_of(spec, pid).index,
                   session_id=cell_of(spec, pid).session_id)
    barrier = threading.Barrier(len(PARTICIPANTS))
    started: dict[str, object] = {}

    def tab(pid: str) -> None:
        own = SessionStore(store.path)
        barrier.wait()
        started[pid] = people.ensure_runner(own, spec, cell_of(spec, pid))
        own.close()

    with OpenTabs(store, spec):
        threads = [threading.Thread(target=tab, args=(pid,)) for pid in PARTICIPANTS]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert sorted(pid for pid, proc in started.items() if proc is not None) == ["p01", "p02"]
        assert "2 sessions running" in people.waiting_line(store, spec, cell_of(spec, "p03"))
        for pid in ("p01", "p02"):   # each worker took the claim made in its name and runs its session
            wait_for(lambda pid=pid: store.state(cell_of(spec, pid).session_id).nodes, what=f"{pid}'s first node")
            assert grid.grid_rows(store, spec.name)[cell_of(spec, pid).index]["state"] == grid.RUNNING
        started["p01"].terminate()   # its session stopped by a signal (interrupted): its place is free
        assert started["p01"].wait(timeout=60) != 0
        # and goes back to it first: p01's start request is the oldest, its tab still open
        assert people.ensure_runner(store, spec, cell_of(spec, "p03")) is None
        resumed = people.ensure_runner(store, spec, cell_of(spec, "p01"))
        assert resumed is not None
        assert "2 sessions running" in people.waiting_line(store, spec, cell_of(spec, "p03"))
        for proc in (started["p02"], resumed):
            proc.terminate()
            proc.wait(timeout=60)
    store.close()


@pytest.mark.slow
def test_no_cap_starts_every_session_at_once(tmp_path, study_env, monkeypatch):
    monkeypatch.setenv(SLEEP_ENV, "1")
    spec, store = signed_in(tmp_path, "free", max_running=None)
    procs = [press_start(store, spec, pid) for pid in ("p01", "p02")]
    assert all(proc is not None for proc in procs)
    assert people.waiting_line(store, spec, cell_of(spec, "p02")) is None
    monkeypatch.setenv(people.MAX_RUNNING_ENV, "1")   # befair serve --max-running 1: over the spec's
    assert press_start(store, spec, "p03") is None
    assert people.waiting_line(store, spec, cell_of(spec, "p03")).startswith(
        "waiting for a free place: 2 sessions running (the study runs at most 1 at once)")
    monkeypatch.setenv(people.MAX_RUNNING_ENV, "none")
    with pytest.raises(UsageError, match="BEFAIR_MAX_RUNNING must be a whole number of 1 or more, not 'none'"):
        people.ensure_runner(store, spec, cell_of(spec, "p03"))
    monkeypatch.delenv(people.MAX_RUNNING_ENV)
    assert [proc.wait(timeout=240) for proc in procs] == [0, 0]
    store.close()


@pytest.mark.slow
async def test_the_participants_console_says_it_waits_and_starts_by_itself(tmp_path, study_env, monkeypatch):
    from engine.study import links

    from befair_tui.participant_app import ParticipantApp
    from befair_tui.screens.participant_console import ParticipantConsoleScreen
    from tests.functional.conftest import screen_text
    from tests.functional.conftest import wait_for as wait_in_app

    monkeypatch.setenv(SLEEP_ENV, "1")
    spec, store = signed_in(tmp_path, "console", max_running=1)
    other = press_start(store, spec, "p02")          # p02's session takes the only place (their tab closed)
    assert other is not None
    assert press_start(store, spec, "p01") is None
    sid = cell_of(spec, "p01").session_id
    app = ParticipantApp(store.path, spec.name, participant="p01", code=links.ensure_codes(store, spec)["p01"],
                         poll_interval=0.05)
    async with app.run_test(size=(140, 42)) as pilot:
        await wait_in_app(pilot, lambda: isinstance(app.screen, ParticipantConsoleScreen), what="p01's console")
        line = "waiting for a free place: 1 session running (the study runs at most 1 at once); you start automatically"
        await wait_in_app(pilot, lambda: "waiting for a free place: 1 session running" in screen_text(app),
                          timeout=60, what="the waiting line in the participant's bar")
        assert app.screen._note == line == people.waiting_line(store, spec, cell_of(spec, "p01"))
        assert any(n.message == line[0].upper() + line[1:] + "." for n in app._notifications)   # the whole line
        assert "interrupted" not in screen_text(app) and "cannot start" not in screen_text(app)
        other.terminate()                             # p02's session stopped: the place is free
        assert other.wait(timeout=60) != 0
        await wait_in_app(pilot, lambda: sid in app.procs, timeout=60, what="p01's worker started by the tab")
        await wait_in_app(pilot, lambda: store.state(sid).status != "new", timeout=120, what="p01's session")
        assert "interrupted" not in screen_text(app)
        assert app.procs[sid].wait(timeout=240) == 0
    store.close()


@pytest.mark.slow
def test_a_session_a_researcher_stopped_frees_its_place(tmp_path, study_env, monkeypatch):
    """Stopped by a person, a session is over (its participant answers the questions): it neither
    holds a place nor waits for one, though its cell reads interrupted in the grid."""
    monkeypatch.setenv(SLEEP_ENV, "2")
    spec, store = signed_in(tmp_path, "stopped", max_running=1)
    with OpenTabs(store, spec):
        first = press_start(store, spec, "p01")
        assert first is not None and press_start(store, spec, "p02") is None
        sid = cell_of(spec, "p01").session_id
        wait_for(lambda: store.state(sid).nodes, what="p01's first node")
        store.issue_command(sid, "stop", {"interrupt": True}, by="researcher")
        assert first.wait(timeout=240) != 0
        assert store.state(sid).stop_requested and finished(store, spec, "p01")
        assert grid.grid_rows(store, spec.name)[cell_of(spec, "p01").index]["state"] == grid.INTERRUPTED
        assert people.ensure_runner(store, spec, cell_of(spec, "p01")) is None    # over: not resumed
        assert people.waiting_line(store, spec, cell_of(spec, "p02")) is None
        second = people.ensure_runner(store, spec, cell_of(spec, "p02"))
        assert second is not None and second.wait(timeout=240) == 0
    store.close()
