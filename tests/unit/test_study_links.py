"""Participant links (engine.study.links) and one live tab per participant
(engine.session.participants.claim_tab), without a UI: each participant's code is made once when
the study is recorded, an id without its code (or with another's) is refused with what to do, a
second tab takes over and the first one's commands are refused and recorded, every command names
its tab, and `befair study links` prints and exports the links. Real SQLite, real subprocesses for
the CLI."""
from __future__ import annotations

import csv
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from engine.session import participants as log
from engine.session.store import SessionStore
from engine.study import grid, links
from engine.study.spec import load_spec

from .test_study_people import people_spec

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def spec(tmp_path):
    return load_spec(people_spec(tmp_path / "links.toml", "lk"))


@pytest.fixture
def store(tmp_path, spec):
    s = SessionStore(tmp_path / "links.db")
    grid.ensure_study(s, spec)
    yield s
    s.close()


def test_recording_a_study_gives_each_participant_an_unguessable_code_once(store, spec):
    codes = links.codes(store, "lk")
    assert sorted(codes) == ["p01", "p02"]
    assert len(set(codes.values())) == 2 and all(len(c) >= 12 for c in codes.values())
    grid.ensure_study(store, spec)                       # recording it again changes nothing
    assert links.codes(store, "lk") == codes
    assert links.ensure_codes(store, spec) == codes


def test_a_database_from_before_links_gets_its_codes_when_asked(tmp_path, spec):
    store = SessionStore(tmp_path / "old.db")
    grid.ensure_study(store, spec)
    store.db.conn.execute("delete from participant_links")  # as a study recorded before 010
    store.db.conn.commit()
    assert links.codes(store, "lk") == {}
    made = links.ensure_codes(store, spec)
    assert sorted(made) == ["p01", "p02"] and links.codes(store, "lk") == made
    store.close()


def test_a_study_without_people_has_no_codes(tmp_path):
    from engine.study.spec import parse_spec

    plain = parse_spec({"name": "plain", "levels": ["base"], "steps": 1}, where="test")
    store = SessionStore(tmp_path / "plain.db")
    grid.ensure_study(store, plain)
    assert links.ensure_codes(store, plain) == {} and links.codes(store, "plain") == {}
    store.close()


def test_an_id_needs_its_own_code(store, spec):
    codes = links.codes(store, "lk")
    assert links.check_participant(store, spec, " p01 ", codes["p01"]) == "p01"
    cases = [("p02", codes["p01"], "this code is not participant p02's", False),   # another's code
             ("p02", None, "the code for participant p02 is missing", False),
             ("p02", codes["p02"].upper() + "x", "this code is not participant p02's", False),
             ("P02", codes["p02"], "'P02' is not a participant of study lk", True),
             ("p99", "whatever", "'p99' is not a participant of study lk", True),
             ("", codes["p01"], "no participant id", False)]
    for participant, code, message, unknown in cases:
        with pytest.raises(links.LinkRefused, match=message) as refused:
            links.check_participant(store, spec, participant, code)
        assert refused.value.unknown is unknown
        assert "link" in str(refused.value)              # what to do: the link, or the researcher


def test_a_participants_link_carries_the_id_and_code(store, spec):
    made = links.participant_links(store, spec, "http://10.0.0.5:8080/")
    codes = links.codes(store, "lk")
    assert [(m.participant, m.link) for m in made] == [
        (p, f"http://10.0.0.5:8080/?participant={p}&code={codes[p]}") for p in ("p01", "p02")]


def test_a_second_tab_takes_over_and_the_first_steers_no_more(tmp_path, store, spec):
    from engine.study import people

    people.consent(store, spec, "p01")
    first = log.claim_tab(store, "lk", "p01", "tabA", via="link")
    assert first is not None and first.payload == {"tab": "tabA", "previous": None, "previous_online": False,
                                                   "via": "link"}
    assert log.claim_tab(store, "lk", "p01", "tabA", via="reconnect") is None   # the same tab: nothing new
    assert log.touch(store, "lk", "p01", cell=None, client="tabA") is True
    taken = log.claim_tab(store, "lk", "p01", "tabB", via="form")
    assert taken is not None and taken.payload["previous"] == "tabA" and taken.payload["previous_online"] is True
    assert log.touch(store, "lk", "p01", cell=3, client="tabA") is False       # the first tab learns it
    assert log.live_tab(store, "lk", "p01") == ("tabB", taken.ts)
    assert log.participant_of_tab(store, "lk", "tabB") == "p01" and log.participant_of_tab(store, "lk", "tabA") is None

    session = _session_of(store, spec, "p01")
    old = SessionStore(store.path)
    old.tab = "tabA"
    with pytest.raises(log.CommandRefused, match="this tab no longer steers: the session was opened in another tab"):
        log.issue_command(old, "lk", "p01", session, "pause")
    new = SessionStore(store.path)
    new.tab = "tabB"
    command = log.issue_command(new, "lk", "p01", session, "pause")
    assert store.command(command)["issued_by"] == "participant p01 · tab tabB"
    refused = log.events(store, "lk", kinds=(log.COMMAND_REFUSED,))
    assert [(e.payload["kind"], e.payload["tab"]) for e in refused] == [("pause", "tabA")]
    assert [c["issued_by"] for c in store.commands(session)] == ["participant p01 · tab tabB"]
    old.close()
    new.close()


def _session_of(store: SessionStore, spec, participant: str) -> str:
    """The participant's first cell's session row, created as its worker would (no run needed)."""
    from engine.study import people

    cell = people.participant_cells(spec, participant)[0]
    store.create_session({"level": cell.level.level, "participant_id": participant, "study_id": spec.name,
                          "steps": 1}, instruction="", coder={"name": "offline"}, data={},
                         session_id=cell.session_id)
    return cell.session_id


def test_study_links_prints_and_exports_the_links(tmp_path, store):
    codes = links.codes(store, "lk")
    out_csv = tmp_path / "links.csv"
    command = [sys.executable, "-m", "befair_tui.cli", "study", "links", "lk", "--db", str(store.path),
               "--base-url", "https://study.example.org"]
    printed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    assert f"p01  https://study.example.org/?participant=p01&code={codes['p01']}\n" in printed.stdout
    log.claim_tab(store, "lk", "p02", "tabA", via="link")
    log.claim_tab(store, "lk", "p02", "tabB", via="link")                # while tabA is open: a takeover
    printed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert f"participant=p02&code={codes['p02']}   (2 tabs opened, 1 took over an open one)" in printed.stdout
    run = subprocess.run([*command, "--csv", str(out_csv)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "2 participant links written" in run.stderr, run.stderr
    rows = list(csv.DictReader(out_csv.open()))
    assert [(r["participant"], r["code"]) for r in rows] == [("p01", codes["p01"]), ("p02", codes["p02"])]
    assert rows[1]["link"] == f"https://study.example.org/?participant=p02&code={codes['p02']}"
    bad = subprocess.run([sys.executable, "-m", "befair_tui.cli", "study", "links", "nope", "--db", str(store.path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "no study 'nope'" in bad.stderr and "Traceback" not in bad.stderr


def test_study_links_from_a_spec_records_the_study(tmp_path):
    spec_path = people_spec(tmp_path / "fresh.toml", "fresh")
    db = tmp_path / "fresh.db"
    run = subprocess.run([sys.executable, "-m", "befair_tui.cli", "study", "links", str(spec_path), "--db", str(db)],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    con = sqlite3.connect(db)
    codes = dict(con.execute("select participant_id, code from participant_links where study = 'fresh'"))
    con.close()
    assert sorted(codes) == ["p01", "p02"]
    assert f"http://127.0.0.1:8000/?participant=p02&code={codes['p02']}" in run.stdout


def test_participate_in_a_terminal_refuses_an_id_without_its_code(store):
    """`befair participate --participant ID` without the link's code (or with another's) says why, at once."""
    codes = links.codes(store, "lk")
    base = [sys.executable, "-m", "befair_tui.cli", "participate", "--study", "lk", "--db", str(store.path),
            "--participant", "p02"]
    for extra, message in (([], "the code for participant p02 is missing"),
                           (["--code", codes["p01"]], "this code is not participant p02's")):
        run = subprocess.run([*base, *extra], cwd=ROOT, capture_output=True, text=True, timeout=120,
                             stdin=subprocess.DEVNULL)
        assert run.returncode == 2 and message in run.stderr and "ask the researcher for your link" in run.stderr, (
            run.returncode, run.stderr)
        assert "Traceback" not in run.stderr


async def test_the_server_refuses_a_link_at_once_and_gives_a_good_one_its_tab(store):
    """`befair serve --study`'s pages over real HTTP (aiohttp's test server; no tab's app is started
    until a page's websocket connects): what each link gets, and the tab a page is given."""
    pytest.importorskip("textual_serve", reason="textual-serve is not installed (pip install 'befair[serve]')")
    from aiohttp.test_utils import TestClient, TestServer

    from befair_tui.cli.serve import BefairServer

    codes = links.codes(store, "lk")
    server = BefairServer(store.path, study="lk", researcher_only=False, token="tok", host="127.0.0.1", port=8000)
    async with TestClient(TestServer(await server._make_app())) as client:
        for query, status, words in (
                (f"participant=p02&code={codes['p01']}", 403, "this code is not participant p02&#x27;s"),
                ("participant=p02", 403, "the code for participant p02 is missing"),
                (f"participant=p99&code={codes['p01']}", 404, "&#x27;p99&#x27; is not a participant of study lk"),
                ("participant=p%3Cb%3E&code=x", 400, "this link is damaged"),
                ("researcher=wrong", 403, "wrong researcher token")):
            answer = await client.get(f"/?{query}")
            body = await answer.text()
            assert answer.status == status and words in body, (query, answer.status, body)
            assert "<b>" not in body
        page = await client.get(f"/?participant=p01&code={codes['p01']}")
        body = await page.text()
        assert page.status == 200 and "Reconnecting to the server" in body and "Session ended" not in body
        tab = body.split('data-tab="')[1].split('"')[0]
        assert len(tab) >= 16
        command, _ = next(iter(server.tickets.values()))
        assert command.participant == "p01" and command.tab == tab and command.env == {
            "BEFAIR_PARTICIPANT_CODE": codes["p01"]}
        assert codes["p01"] not in command.command and "--via=link" in command.command   # the code off the command line
        again = await client.get(f"/?participant=p01&code={codes['p01']}&tab={tab}")   # a reload, no app running
        assert again.status == 200 and f'data-tab="{tab}"' in await again.text()
        assert "--via=reconnect" in list(server.tickets.values())[-1][0].command
        state = await client.get(f"/tab?tab={tab}")
        assert await state.json() == {"state": "unknown"}              # this server runs no app for it: reload
    assert not log.events(store, "lk")                                  # a page starts nothing by itself


async def test_a_tab_signed_in_through_the_form_comes_back_by_its_id_alone(store):
    """After a restart, a page with no id in its URL but its tab's id reconnects as the participant that
    tab signed in (their live tab), with nothing typed; any other tab id gets the sign-in form."""
    pytest.importorskip("textual_serve", reason="textual-serve is not installed (pip install 'befair[serve]')")
    from aiohttp.test_utils import TestClient, TestServer

    from befair_tui.cli.serve import BefairServer

    live, other = "T" * 16, "U" * 16
    log.claim_tab(store, "lk", "p02", live, via="form")
    server = BefairServer(store.path, study="lk", researcher_only=False, token="tok", host="127.0.0.1", port=8000)
    async with TestClient(TestServer(await server._make_app())) as client:
        for tab, participant in ((live, "p02"), (other, None)):
            answer = await client.get(f"/?tab={tab}")
            assert answer.status == 200
            command = list(server.tickets.values())[-1][0]
            assert (command.participant, command.tab) == (participant, tab)
            assert ("--via=reconnect" if participant else "--via=form") in command.command


def test_codes_and_tab_ids_never_read_as_command_line_flags():
    from befair_tui.cli.serve_web import _participant_argv
    from engine.study import links as participant_links

    codes = {participant_links.new_code() for _ in range(2000)}
    assert len(codes) == 2000 and all(c.isalnum() and len(c) == 12 for c in codes)
    argv = _participant_argv("x.db", "lk", "p01", code="-old-code", tab="-tab-id")   # a code made before
    assert "--code=-old-code" in argv and "--tab=-tab-id" in argv
    from befair_tui.cli import build_parser  # noqa: E402

    args = build_parser().parse_args(argv[3:])
    assert (args.code, args.tab) == ("-old-code", "-tab-id")
