"""Participant links, one live tab, and a server restart, in a real browser (headless Chromium and
the system's chromedriver, as test_serve_study_browser).

- a link with another participant's id but one's own code is refused (403), an unknown one (404)
  shows its page within a second; neither starts anything;
- p01 opens their link, p02 signs in through the form with their id and code;
- a second tab on p01's link takes over: the first tab says so and steers no more (its Enter on the
  notice takes it back: recorded as a `tab_opened` event by "take-back");
- `befair serve` gets SIGTERM with the two tabs open (and p01's session running): it stops within
  2 s, says what it left running, leaves no tab process behind; both pages say "Reconnecting";
  started again, both tabs come back by themselves as the same tabs (p02 without typing anything).
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .test_serve_browser import CHROMIUM, DRIVER, _free_port
from .test_serve_study_browser import SPEC, Db, Tab, _wait_for_port, wait_until

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow,  # about 2 minutes on a busy 2-core machine; .ci/run runs it
              pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="no chromium and chromedriver installed "
                                 "(apt-get install chromium chromium-driver; .ci/run installs them)")]


class Serve:
    """`befair serve --study` in its own process group; every stderr line kept."""

    def __init__(self, spec: Path, db: Path, port: int, env: dict[str, str]):
        out = (db.parent / "serve-stdout.txt").open("ab")   # what a tab's app wrote to its stderr
        self.proc = subprocess.Popen([sys.executable, "-m", "befair_tui.cli", "serve", "--study", str(spec),
                                      "--db", str(db), "--port", str(port)], cwd=ROOT, env=env,
                                     stdout=out, stderr=subprocess.PIPE, start_new_session=True)
        out.close()
        self.lines: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        wait_until(lambda: any("researcher=" in line for line in self.lines) or self.proc.poll() is not None, 240,
                   "befair serve to start")
        assert self.proc.poll() is None, "befair serve did not start: " + "".join(self.lines)
        _wait_for_port(port)

    def _read(self) -> None:
        for line in iter(self.proc.stderr.readline, b""):
            self.lines.append(line.decode())

    def sigterm(self) -> float:
        """SIGTERM to the server alone (not its process group): seconds until it exited."""
        started = time.monotonic()
        os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.wait(30)
        return time.monotonic() - started

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)


def defunct_children(pid: int) -> list[int]:
    """The process's children that ended and were never waited for (<defunct>)."""
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            try:
                if Path(f"/proc/{child}/stat").read_text().split(") ", 1)[1].startswith("Z"):
                    found.append(int(child))
            except OSError:
                continue
    return found


def tab_processes(db: Path) -> list[int]:
    """The `befair participate` processes on this database still alive (zombies excluded)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if b"participate" in cmdline and str(db).encode() in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


def fetch(url: str) -> tuple[int, str, float]:
    started = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, answer.read().decode(), time.monotonic() - started
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), time.monotonic() - started


def page_text(tab: Tab, element_id: str) -> str:
    from selenium.webdriver.common.by import By

    return tab.show().driver.find_element(By.ID, element_id).text


def live_tabs(db: Db) -> dict[str, tuple[str, float | None]]:
    return {p: (c, s) for p, c, s in db.rows("select participant_id, client, seen_at from study_participants "
                                             "where study = 'pilot'")}


def test_links_one_live_tab_and_a_restart_in_a_browser(tmp_path):
    pytest.importorskip("textual_serve", reason="textual-serve is not installed (pip install 'befair[serve]')")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (dev extra)")
    from selenium.webdriver.chrome.service import Service

    spec = tmp_path / "pilot.toml"
    spec.write_text(SPEC)
    db_path = tmp_path / "pilot.db"
    db = Db(db_path)
    shots = tmp_path / "shots"
    shots.mkdir()
    env = dict(os.environ, BEFAIR_HOME=str(tmp_path / "home"), BEFAIR_TEST_PIPELINE_SLEEP="2",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_DB"):
        env.pop(var, None)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    serve = Serve(spec, db_path, port, env)
    codes = dict(db.rows("select participant_id, code from participant_links where study = 'pilot'"))
    assert sorted(codes) == ["p01", "p02"] and codes["p01"] != codes["p02"]
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,860",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        # -- links that open nothing, each with its page at once ------------------------------------
        status, body, took = fetch(f"{url}/?participant=p02&code={codes['p01']}")   # p01's code, p02's id
        assert status == 403 and "this code is not participant p02&#x27;s" in body and took < 1.0
        status, body, took = fetch(f"{url}/?participant=p99&code={codes['p01']}")
        assert status == 404 and "is not a participant of study pilot" in body and took < 1.0
        status, body, _ = fetch(f"{url}/?participant=p01")
        assert status == 403 and "the code for participant p01 is missing" in body
        a = Tab(driver, driver.current_window_handle, shots)
        a.show().driver.get(f"{url}/?participant=P02&code={codes['p02']}")
        assert "not a participant of study pilot" in page_text(a, "problem")
        assert "ask the researcher for your link" in page_text(a, "problem")
        shown_ms = driver.execute_script("const n = performance.getEntriesByType('navigation')[0];"
                                         "return n.domContentLoadedEventEnd - n.startTime;")
        assert shown_ms < 1000, f"the unknown link's page took {shown_ms:.0f} ms to show"   # the browser's own clock
        assert not db.rows("select * from study_events where study = 'pilot'") and not tab_processes(db_path)

        # -- p01 by the link, p02 by the form with the code ---------------------------------------
        a.open(f"{url}/?participant=p01&code={codes['p01']}")
        a.keys(" ", "\ue004", "\ue007")                      # consent: tick, Tab to Continue, Enter
        wait_until(lambda: db.study_events("consent", "p01"), 30, "p01's consent")
        driver.switch_to.new_window("tab")
        b = Tab(driver, driver.current_window_handle, shots).open(url)
        b.keys(*"p02", "\ue007", *codes["p02"], "\ue007")    # the form: id, Enter, the link's code, Enter
        wait_until(lambda: "p02" in live_tabs(db), 30, "p02 signed in")
        tab_a, tab_b = live_tabs(db)["p01"][0], live_tabs(db)["p02"][0]

        # -- a second tab on p01's link takes over; the first says so, and takes it back ----------
        driver.switch_to.new_window("tab")
        c = Tab(driver, driver.current_window_handle, shots).open(f"{url}/?participant=p01&code={codes['p01']}")
        wait_until(lambda: live_tabs(db)["p01"][0] not in (tab_a, None), 30, "the second tab took over")
        opened = [json.loads(p) for *_, p in db.study_events("tab_opened", "p01")]
        assert [(o["previous"], o["via"]) for o in opened] == [(None, "link"), (tab_a, "link")]
        assert opened[1]["previous_online"] is True
        time.sleep(4)                                         # the first tab's next presence write
        a.shot("taken-over")
        a.keys("\ue007")                                      # Enter on "Steer from this tab"
        wait_until(lambda: live_tabs(db)["p01"][0] == tab_a, 30, "the first tab took it back")
        assert json.loads(db.study_events("tab_opened", "p01")[-1][4])["via"] == "take-back"
        c.show()
        driver.close()
        driver.switch_to.window(a.handle)

        # -- p01's session runs; the server is stopped with the two tabs open ---------------------
        time.sleep(1.5)                                       # the profile page drawn
        a.shot("profile")
        a.keys("\ue015", "\ue007")                            # profile: Down to the first role, Enter
        a.keys("\ue004", *"3", "\ue004", *"2", "\ue004", *"lab", "\ue007")
        wait_until(lambda: db.study_events("profile", "p01"), 30, "p01's profile")
        a.keys("\ue007")                                      # Start
        wait_until(lambda: db.current_session("p01") and db.status(db.current_session("p01")) == "running", 120,
                   "p01's session running")
        wait_until(lambda: len(tab_processes(db_path)) == 2, 15, "the closed tab's app to stop")
        assert not defunct_children(serve.proc.pid)           # the server reaped it
        took = serve.sigterm()
        print(f"befair serve stopped {took:.2f} s after SIGTERM with 2 tabs open")
        assert took < 2.0, f"befair serve took {took:.1f} s to stop on SIGTERM"
        said = "".join(serve.lines)
        assert "befair: stopped (2 open tabs closed in" in said
        assert "left 1 participant session running: p01 (base)" in said
        assert not tab_processes(db_path)                     # no tab's app left behind
        for tab in (a, b):
            wait_until(lambda t=tab: "Reconnecting" in page_text(t, "closed-message"), 15, "the reconnecting note")
        b.shot("reconnecting")
        stopped_at = time.time()

        # -- started again: both tabs come back by themselves, as the same tabs -------------------
        serve = Serve(spec, db_path, port, env)
        wait_until(lambda: all((s or 0) > stopped_at for _, s in live_tabs(db).values()), 60,
                   "both tabs back (their presence written again)")
        assert {p: c for p, (c, _) in live_tabs(db).items()} == {"p01": tab_a, "p02": tab_b}
        assert len(db.study_events("tab_opened")) == 4        # a reconnection is no new tab
        for tab in (a, b):
            tab.wait_painted(30)
            assert f"tab={tab_a if tab is a else tab_b}" in tab.show().driver.current_url
        assert "participant=" not in b.driver.current_url      # p02 typed nothing again
        b.shot("reconnected")
    finally:
        driver.quit()
        serve.stop()


def test_four_participant_tabs_at_once_each_their_own_and_the_researchers_grid(tmp_path):
    """Four participants open their links at the same time: each tab is its own participant's (their
    consent under their id only, four distinct live tabs), and the researcher's grid sees all four."""
    pytest.importorskip("textual_serve", reason="textual-serve is not installed (pip install 'befair[serve]')")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (dev extra)")
    from selenium.webdriver.chrome.service import Service

    from engine.session.store import SessionStore
    from engine.study import grid, people

    spec = tmp_path / "pilot.toml"
    spec.write_text(SPEC.replace('participants = ["p01", "p02"]', 'participants = ["p01", "p02", "p03", "p04"]'))
    db_path = tmp_path / "pilot.db"
    db = Db(db_path)
    shots = tmp_path / "shots"
    shots.mkdir()
    env = dict(os.environ, BEFAIR_HOME=str(tmp_path / "home"),
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "BEFAIR_DB"):
        env.pop(var, None)
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    serve = Serve(spec, db_path, port, env)
    codes = dict(db.rows("select participant_id, code from participant_links where study = 'pilot'"))
    token = next(line.split("researcher=")[1].split()[0] for line in serve.lines if "researcher=" in line)
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1100,700",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        tabs: dict[str, Tab] = {}
        for number, pid in enumerate(sorted(codes)):
            if number:
                driver.switch_to.new_window("tab")
            tabs[pid] = Tab(driver, driver.current_window_handle, shots)
            tabs[pid].show().driver.get(f"{url}/?participant={pid}&code={codes[pid]}")  # all four start at once
        for tab in tabs.values():
            tab.wait_painted(120)
            tab.keys(" ", "\ue004", "\ue007")                  # consent: tick, Tab to Continue, Enter
        wait_until(lambda: len(db.study_events("consent")) == 4, 60, "four consents")
        assert sorted(pid for _, pid, *_ in db.study_events("consent")) == ["p01", "p02", "p03", "p04"]
        live = {p: c for p, (c, _) in live_tabs(db).items()}
        assert sorted(live) == ["p01", "p02", "p03", "p04"] and len(set(live.values())) == 4
        for pid, tab in tabs.items():                          # each page is its own participant's tab
            assert f"tab={live[pid]}" in tab.show().driver.current_url
        opened = db.study_events("tab_opened")
        assert sorted((pid, json.loads(p)["tab"]) for _, pid, _, _, p in opened) == sorted(live.items())

        driver.switch_to.new_window("tab")
        Tab(driver, driver.current_window_handle, shots).open(f"{url}/?researcher={token}").shot("researcher-grid-4")
        store = SessionStore(db_path)
        try:
            rows = people.live_grid(store, grid.stored_spec(store, "pilot"))   # what the researcher's grid shows
        finally:
            store.close()
        assert {r["participant"] for r in rows if r["online"]} == {"p01", "p02", "p03", "p04"}
        assert len(tab_processes(db_path)) == 4
    finally:
        driver.quit()
        serve.stop()
