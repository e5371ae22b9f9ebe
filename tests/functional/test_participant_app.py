"""The participant's app (befair_tui.participant_app), driven with Pilot: the id and code form, consent,
the participant fields, each session live in a console with steering only, the questions after
it, the closing page; what a participant cannot reach (sessions screen, setup, stop, added steps,
export, delete, replay, unblinding, settings, another session); sealed test figures stay sealed;
a closed app opened again resumes where the participant was; an id without its link's code is
refused; a tab that another took over says so, steers no more, and can take it back.

Sessions run for real in detached study workers with the fast hash coder (tests/unit/test_study_pool)."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from engine.session import events as ev
from engine.session import participants as log
from engine.study import grid, links, people
from engine.study.spec import load_spec

from befair_tui.app import create_app
from befair_tui.participant_app import ParticipantApp
from befair_tui.screens.participant_between import DoneScreen, QuestionsScreen, ReadyScreen
from befair_tui.screens.participant_console import ParticipantConsoleScreen
from befair_tui.screens.participant_profile import ProfileScreen
from befair_tui.screens.participant_signin import ConsentScreen, SignInScreen, TakenOverScreen

from .conftest import screen_text, wait_for

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN_KEYS = ("l", "s", "plus", "u", "q", "ctrl+o", "d", "r", "n", "ctrl+s")


def write_study(path: Path, name: str, *, blind: bool = False, steps: int = 2) -> Path:
    path.write_text(f'''
name = "{name}"
levels = ["base", "fairness-methods"]
participants = ["p01", "p02"]
steps = {steps}
seed = 1
step_timeout = 120
time_limit = 300
blind_test = {"true" if blind else "false"}

[people]
instructions = "Steer the agent towards a fair pipeline."
consent = "I agree that my steering and answers are recorded."
roles = ["dermatologist", "data scientist"]
guidance_budget = 3

[[people.questions]]
id = "fair_dark"
text = "How sure are you that the chosen pipeline is fair to dark skin?"
scale = [1, 7]

[search]
num_drafts = 2

[coder]
factory = "tests.unit.test_study_pool:fast_coder"
label = "fast"

[data]
synth = {{ n_train = 60, n_test = 40, size = 16 }}
''')
    return path


@pytest.fixture
def study(tmp_path, store, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    monkeypatch.setenv("BEFAIR_TEST_PIPELINE_SLEEP", "1")
    spec = load_spec(write_study(tmp_path / "s.toml", "pp"))
    grid.ensure_study(store, spec)
    return spec


def participant_app(db, store, study: str, participant: str, **kw) -> ParticipantApp:
    """The app as `befair participate --participant ID` opens it, with the participant's code."""
    return ParticipantApp(db, study, participant=participant, code=links.codes(store, study)[participant],
                          poll_interval=0.05, **kw)


def defunct_children() -> list[int]:
    """This process's children that ended and were never waited for (shown as <defunct>)."""
    found = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                if Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                    found.append(int(pid))
            except OSError:
                continue
    return found


async def click(pilot, selector: str) -> None:
    """Click a widget and let a button's press effect (0.2 s, during which it ignores clicks) end."""
    await pilot.click(selector)
    await pilot.pause(0.25)


async def _through_profile(pilot, app):
    """From the consent page to the first Ready page, as a participant clicks through it."""
    await wait_for(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the consent page")
    assert "I agree that my steering and answers are recorded." in screen_text(app)
    await click(pilot, "#consent-continue")
    await pilot.pause()
    assert "Tick \u201cI agree\u201d" in screen_text(app) and isinstance(app.screen, ConsentScreen)
    await click(pilot, "#consent-agree")
    await click(pilot, "#consent-continue")
    await wait_for(pilot, lambda: isinstance(app.screen, ProfileScreen), what="the profile page")
    app.screen.query_one("#field-years_dermatology").value = "12"
    app.screen.query_one("#field-years_ml").value = "1"
    await click(pilot, "#profile-continue")
    await pilot.pause()
    assert "choose your role" in screen_text(app)                    # nothing recorded yet
    await click(pilot, "#role-0")
    await click(pilot, "#profile-continue")
    await wait_for(pilot, lambda: isinstance(app.screen, ReadyScreen), what="the first session's page")


async def test_a_participant_goes_through_the_whole_study(db, store, study):
    app = create_app(db, participant_study="pp", poll_interval=0.05)
    assert isinstance(app, ParticipantApp)
    async with app.run_test(size=(130, 40)) as pilot:
        assert isinstance(app.screen, SignInScreen)
        codes = links.codes(store, "pp")
        app.screen.query_one("#participant-id").value = "p07"
        app.screen.query_one("#participant-code").value = codes["p01"]
        await click(pilot, "#signin-continue")
        await pilot.pause()
        assert "'p07' is not a participant of study pp" in screen_text(app)
        app.screen.query_one("#participant-id").value = "p02"
        await click(pilot, "#signin-continue")
        await pilot.pause()
        assert "this code is not participant p02's" in screen_text(app)   # p01's code for p02's id
        assert isinstance(app.screen, SignInScreen) and not log.events(store, "pp", participant_id="p02")
        app.screen.query_one("#participant-code").value = codes["p02"]
        await click(pilot, "#signin-continue")
        await _through_profile(pilot, app)
        assert log.participant(store, "pp", "p02")["role"] == "dermatologist"
        for number, level in ((1, "fairness-methods"), (2, "base")):   # p02's order: the Latin square's row 2
            text = screen_text(app)
            assert f"Session {number} of 2" in text and f"(level {level})" in text
            await click(pilot, "#ready-go")
            await wait_for(pilot, lambda: isinstance(app.screen, ParticipantConsoleScreen), what="the console")
            console = app.screen
            sid = console.session_id
            assert sid == f"pp-p02-{level}-r0"
            await wait_for(pilot, lambda c=console: c.state.nodes, timeout=120, what="the first node")
            if number == 1:   # pause, guide, resume: typing while it runs, a loaded machine finished the 2 steps first
                await pilot.press("p")
                await wait_for(pilot, lambda c=console: c.state.status == "paused", timeout=60, what="the pause")
                await pilot.press("g")
                await pilot.press(*"reweight dark skin")
                await pilot.press("enter")
                await wait_for(pilot, lambda c=console: c.state.guidance, timeout=60, what="the guidance applied")
                await pilot.press("p")
            assert f"Session {number} of 2 · {level}" in screen_text(app)
            await wait_for(pilot, lambda: isinstance(app.screen, QuestionsScreen), timeout=180,
                           what="the questions after the session")
            await wait_for(pilot, lambda n=number: f"Session {n} of 2 has ended (finished: " in screen_text(app),
                           what="why the session ended, read off the UI thread")
            await click(pilot, "#questions-continue")
            await pilot.pause()
            assert "needs an answer" in screen_text(app)
            await click(pilot, f"#q-fair_dark-{4 + number}")
            await click(pilot, "#questions-continue")
            await wait_for(pilot, lambda: not isinstance(app.screen, QuestionsScreen), what="the next page")
            await pilot.pause(0.2)
        assert isinstance(app.screen, DoneScreen) and "finished all 2 sessions" in screen_text(app)
        await wait_for(pilot, lambda: not app.procs, timeout=10, what="the finished workers reaped")
        assert not defunct_children(), "a finished session worker was left defunct"
    guidance = [e for e in store.events("pp-p02-fairness-methods-r0") if e.kind == ev.GUIDANCE]
    assert [(g.payload["text"], g.payload["participant_id"]) for g in guidance] == [("reweight dark skin", "p02")]
    answers = log.events(store, "pp", kinds=(log.ANSWERS,))
    assert [(e.session_id, e.payload["answers"]) for e in answers] == [
        ("pp-p02-fairness-methods-r0", {"fair_dark": 5}), ("pp-p02-base-r0", {"fair_dark": 6})]
    assert people.where(store, study, "p02").step == people.DONE


async def test_participant_console_offers_steering_only_and_refuses_another_session(db, store, study):
    people.consent(store, study, "p01")
    people.give_profile(store, study, "p01", {"role": "data scientist", "years_dermatology": 0, "years_ml": 4})
    people.consent(store, study, "p02")
    people.give_profile(store, study, "p02", {"role": "dermatologist", "years_dermatology": 9, "years_ml": 0})
    other = people.where(store, study, "p02")
    people.start_cell(store, study, "p02", other).wait(timeout=240)   # p02's first session, finished
    app = participant_app(db, store, "pp", "p01")
    async with app.run_test(size=(130, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReadyScreen), what="p01's first page")
        await click(pilot, "#ready-go")
        await wait_for(pilot, lambda: isinstance(app.screen, ParticipantConsoleScreen), what="the console")
        console = app.screen
        await wait_for(pilot, lambda: console.state.nodes, timeout=120, what="a node")
        for key in FORBIDDEN_KEYS:                     # no other screen, no stop, no steps, no quit
            await pilot.press(key)
            await pilot.pause()
            assert app.screen is console, key
        for action in ("sessions", "stop", "add_steps", "resume_runner", "open_sessions", "export", "delete",
                       "replay", "unblind"):
            assert console.check_action(action, ()) is False, action
        palette = [c.title for c in app.get_system_commands(console)]
        assert "Theme" in palette and {"Pause", "Guide", "Expand", "Prune"} & set(palette)
        assert not {"Quit", "Sessions", "Stop", "Steps", "Screenshot", "Keys", "Resume run"} & set(palette)
        footer = screen_text(app).splitlines()[-1]
        assert "Sessions" not in footer and "Stop" not in footer and "Quit" not in footer

        console.session_id = other.cell.session_id    # a tampered tab aims at p02's session
        assert console._command("pause", {}, note="sent") is False
        console.session_id = f"pp-p01-{people.participant_cells(study, 'p01')[0].level.label}-r0"
        await pilot.pause(0.1)
        assert any("command refused" in n.message for n in app._notifications)
    refused = log.events(store, "pp", kinds=(log.COMMAND_REFUSED,))
    assert [(e.participant_id, e.payload["kind"], e.payload["target"]) for e in refused] == [
        ("p01", "pause", other.cell.session_id)]
    assert not [c for c in store.commands(other.cell.session_id)]


async def test_sealed_figures_stay_sealed_for_a_participant(tmp_path, db, store, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    spec = load_spec(write_study(tmp_path / "b.toml", "blind", blind=True, steps=1))
    grid.ensure_study(store, spec)
    people.consent(store, spec, "p01")
    people.give_profile(store, spec, "p01", {"role": "data scientist", "years_dermatology": 0, "years_ml": 4})
    position = people.where(store, spec, "p01")
    people.start_cell(store, spec, "p01", position).wait(timeout=240)
    sid = position.cell.session_id
    state = store.state(sid)
    tests = [n for n in state.nodes.values() if n.eval_verdicts.get("test") == "ok"]
    assert tests and all(n.test is None for n in tests)     # measured, sealed
    app = participant_app(db, store, "blind", "p01")
    async with app.run_test(size=(130, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, QuestionsScreen), what="the questions")
        # the finished session in the participant's console, as it was before the questions came
        console = ParticipantConsoleScreen(store, sid, position=people.where(store, spec, "p01"), spec=spec,
                                           participant="p01", poll_interval=0.05)
        await app.push_screen(console)
        await wait_for(pilot, lambda: console.state.status == "finished", what="the session folded")
        text = screen_text(app)
        assert "test metrics blinded for this study" in text
        for node in tests:  # the participant's fold never had the sealed figures
            assert console.state.nodes[node.node_id].test is None
            assert console.state.nodes[node.node_id].medfair.get("test") is None
        # a researcher's unblinded fold has them: they exist, sealed
        from engine.session.sealed import open_sealed

        assert all(open_sealed(store, sid, unblind=True).nodes[n.node_id].test for n in tests)


async def test_a_closed_tab_comes_back_where_it_was(db, store, study):
    people.consent(store, study, "p01")
    people.give_profile(store, study, "p01", {"role": "data scientist", "years_dermatology": 0, "years_ml": 4})
    app = participant_app(db, store, "pp", "p01")
    async with app.run_test(size=(130, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReadyScreen), what="the first page")
        await click(pilot, "#ready-go")
        await wait_for(pilot, lambda: isinstance(app.screen, ParticipantConsoleScreen), what="the console")
        sid = app.screen.session_id
        await wait_for(pilot, lambda: app.screen.state.nodes, timeout=120, what="a node")
    assert log.participant(store, "pp", "p01")["client"]  # the tab said where it was
    again = participant_app(db, store, "pp", "p01")
    async with again.run_test(size=(130, 40)) as pilot:
        await wait_for(pilot, lambda: isinstance(again.screen, (ParticipantConsoleScreen, QuestionsScreen)),
                       what="the same session, or its questions")
        if isinstance(again.screen, ParticipantConsoleScreen):
            assert again.screen.session_id == sid
        else:
            assert again.screen.position.cell.session_id == sid
    deadline = time.monotonic() + 120
    while store.session(sid)["status"] == "running" and time.monotonic() < deadline:
        time.sleep(0.5)
    assert [e.kind for e in store.events(sid)].count(ev.SESSION_STARTED) == 1


async def test_participant_help_lists_only_what_a_participant_can_do(db, store, study):
    from befair_tui.screens.participant_help import ParticipantHelp

    app = participant_app(db, store, "pp", "p01")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the consent page")
        await pilot.press("f1")
        await pilot.pause()
        assert isinstance(app.screen, ParticipantHelp)
        text = screen_text(app)
        assert "pause the search" in text and "the sessions screen" not in text and "stop the session" not in text
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(app.screen, ConsentScreen)


async def test_the_researchers_grid_shows_who_is_on_which_cell(db, store, study):
    """`befair study watch` (the researcher's tab): every participant's cells in their order, their
    state, who is online on which cell; Enter opens the whole console on a session, Esc comes back."""
    from tests.demo_session import write_demo_session

    from befair_tui.screens.console import ConsoleScreen
    from befair_tui.screens.study_people import StudyPeopleScreen

    people.consent(store, study, "p02")
    people.give_profile(store, study, "p02", {"role": "dermatologist", "years_dermatology": 9, "years_ml": 0})
    first = people.participant_cells(study, "p02")[0]
    write_demo_session(store, n_nodes=3, seed=2, finished=False, session_id=first.session_id)
    grid.link_session(store, "pp", first.index, first.session_id)
    log.touch(store, "pp", "p02", cell=first.index, client="test")
    app = create_app(db, start="people", study="pp", poll_interval=0.05)
    async with app.run_test(size=(140, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, StudyPeopleScreen), what="the grid")
        screen = app.screen
        await pilot.pause(0.2)
        assert [(r["participant"], r["level"], r["here"]) for r in screen.rows] == [
            ("p01", "base", False), ("p01", "fairness-methods", False),
            ("p02", "fairness-methods", True), ("p02", "base", False)]
        text = screen_text(app)
        assert "2 participants, 1 online now" in text and "▶ on it" in text and "dermatologist" in text
        assert "Back" not in text.splitlines()[-1]  # nothing to go back to
        screen.query_one("DataTable").move_cursor(row=2)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConsoleScreen), what="the console")
        assert app.screen.session_id == first.session_id and "Stop" in screen_text(app).splitlines()[-1]
        app.pop_screen()
        await pilot.pause()
        assert app.screen is screen


async def test_an_id_without_its_code_is_refused_on_the_sign_in_page(db, store, study):
    """A link whose code is wrong opens the sign-in page saying so, with the id kept; the right code
    goes on to the consent page, whose box shows nothing until it is ticked."""
    app = ParticipantApp(db, "pp", participant="p01", code=links.codes(store, "pp")["p02"], poll_interval=0.05)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, SignInScreen), what="the sign-in page")
        text = " ".join(screen_text(app).split())   # the message wraps
        assert "this code is not participant p01's" in text and "ask the researcher for your link" in text, text
        assert app.screen.query_one("#participant-id").value == "p01"
        assert app.focused is app.screen.query_one("#participant-code")
        await pilot.press(*links.codes(store, "pp")["p01"], "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConsentScreen), what="the consent page")
        box = app.screen.query_one("#consent-agree")
        assert "X" not in str(box.render()) and "✓" not in str(box.render())   # nothing looks chosen
        await click(pilot, "#consent-agree")
        assert box.value and "✓" in str(box.render())
    opened = log.events(store, "pp", kinds=(log.TAB_OPENED,))
    assert [(e.participant_id, e.payload["tab"], e.payload["via"]) for e in opened] == [("p01", app.tab, "form")]


async def test_a_tab_another_took_over_says_so_and_can_take_it_back(db, store, study):
    people.consent(store, study, "p01")
    people.give_profile(store, study, "p01", {"role": "data scientist", "years_dermatology": 0, "years_ml": 4})
    app = participant_app(db, store, "pp", "p01", tab="tabA", via="link")
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, ReadyScreen), what="p01's first page")
        taken = log.claim_tab(store, "pp", "p01", "tabB", via="link")          # p01's link in another browser
        await wait_for(pilot, lambda: isinstance(app.screen, TakenOverScreen), timeout=15, what="the notice")
        await pilot.pause(0.2)
        at = time.strftime("%H:%M", time.localtime(taken.ts))
        text = " ".join(screen_text(app).split())
        assert f"This session was opened in another tab or browser at {at}; this tab no longer steers." in text
        assert log.live_tab(store, "pp", "p01")[0] == "tabB"                    # the notice changed nothing
        await click(pilot, "#takeover-go")
        await wait_for(pilot, lambda: isinstance(app.screen, ReadyScreen), what="p01's page again")
    opened = log.events(store, "pp", kinds=(log.TAB_OPENED,))
    assert [(e.payload["tab"], e.payload["previous"], e.payload["via"]) for e in opened] == [
        ("tabA", None, "link"), ("tabB", "tabA", "link"), ("tabA", "tabB", "take-back")]
    assert opened[1].payload["previous_online"] is True
