"""A study with people in a real browser: `befair serve --study` and headless Chromium (the system's,
driven by selenium with the system's chromedriver: nothing is downloaded).

Two participants in two tabs at once run a pilot of a 2-level study end to end: p01 signs in by
their link (id and code in the URL), p02 by the form (id and code typed); each gives consent and
their profile, steers their own sessions (pause, guidance, prune), answers the questions after each,
and reaches the closing page. Midway, with both sessions paused, `befair serve` is killed (SIGKILL,
its whole process group) and p02's session worker with it; the server is started again, both tabs
reload, both participants resume where they were, and no event is lost or duplicated. A wrong
researcher token and a forged websocket ticket are refused; the researcher's tab shows the live
grid. Afterwards the report by expertise and its long CSV come from `befair study report`.

What each tab shows is checked where it lands (the study's events and each session's events in
the database) and kept as screenshots; the participant's view is the README's screenshot
(BEFAIR_SCREENSHOTS=DIR saves them there)."""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.unit.test_study_pool import assert_events_sound, session_events

from .test_serve_browser import CHROMIUM, DRIVER, _count, _free_port

ROOT = Path(__file__).resolve().parents[2]
TITLE_ORANGE = (254, 166, 43)

SPEC = '''
name = "pilot"
levels = ["base", "fairness-methods"]
participants = ["p01", "p02"]
steps = 3
seed = 1
step_timeout = 120
time_limit = 600

[people]
instructions = "Steer the agent towards a pipeline that is fair to every skin tone."
consent = "I agree that my steering and my answers are recorded for this study."
roles = ["dermatologist", "data scientist"]
guidance_budget = 3

[[people.questions]]
id = "fair_dark"
text = "How sure are you that the chosen pipeline is fair to dark skin?"
scale = [1, 7]

[[people.questions]]
id = "comment"
text = "Anything else?"
kind = "text"

[search]
num_drafts = 2

[coder]
factory = "tests.unit.test_study_pool:fast_coder"
label = "fast"

[data]
synth = { n_train = 60, n_test = 40, size = 16 }
'''

pytestmark = [pytest.mark.slow,  # ~4 min on a busy 2-core machine; .ci/run runs it
              pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="no chromium and chromedriver installed "
                                 "(apt-get install chromium chromium-driver; .ci/run installs them)")]


class Serve:
    """`befair serve --study` as a process group of its own; its researcher token read from stderr."""

    def __init__(self, spec: Path, db: Path, port: int, env: dict[str, str]):
        self.proc = subprocess.Popen([sys.executable, "-m", "befair_tui.cli", "serve", "--study", str(spec),
                                      "--db", str(db), "--port", str(port)], cwd=ROOT, env=env,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        self.lines: list[str] = []
        deadline = time.monotonic() + 240
        while not any("researcher=" in line for line in self.lines):
            line = self.proc.stderr.readline().decode()
            if not line and self.proc.poll() is not None or time.monotonic() > deadline:
                raise AssertionError("befair serve did not start: " + "".join(self.lines))
            self.lines.append(line)
        self.token = re.search(r"researcher=(\S+)", "".join(self.lines)).group(1)
        threading.Thread(target=self.proc.stderr.read, daemon=True).start()  # never let its pipe fill
        _wait_for_port(port)

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()


def _wait_for_port(port: int) -> None:
    import socket

    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("befair serve did not listen")


class Tab:
    """One browser tab: keys go to its terminal, screenshots come from it."""

    def __init__(self, driver, handle: str, shots: Path):
        self.driver, self.handle, self.shots = driver, handle, shots

    def show(self):
        self.driver.switch_to.window(self.handle)
        return self

    def open(self, url: str) -> "Tab":
        self.show().driver.get(url)
        self.wait_painted()
        return self

    def wait_painted(self, timeout: float = 90) -> None:
        """Until the app behind the page has drawn (its orange titles or keys)."""
        from PIL import Image

        deadline = time.monotonic() + timeout
        path = self.shots / "painted.png"
        while time.monotonic() < deadline:
            time.sleep(0.5)
            self.driver.save_screenshot(str(path))
            image = Image.open(path).convert("RGB")
            if _count(image, TITLE_ORANGE, tolerance=20) > 50:
                time.sleep(0.5)
                return
        raise AssertionError(f"the tab did not draw the app; see {path}")

    def keys(self, *keys: str, pause: float = 0.35) -> None:
        from selenium.webdriver.common.action_chains import ActionChains
        from selenium.webdriver.common.by import By

        self.show()
        box = self.driver.find_element(By.CSS_SELECTOR, ".xterm-helper-textarea")
        self.driver.execute_script("arguments[0].focus()", box)
        for key in keys:
            ActionChains(self.driver).send_keys(key).perform()
            time.sleep(pause)

    def shot(self, name: str) -> Path:
        path = self.shots / f"{name}.png"
        self.show().driver.save_screenshot(str(path))
        return path


def wait_until(predicate, timeout: float = 120, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


class Db:
    def __init__(self, path: Path):
        self.path = path

    def rows(self, sql: str, *params) -> list[tuple]:
        con = sqlite3.connect(self.path, timeout=30)
        try:
            return con.execute(sql, params).fetchall()
        except sqlite3.OperationalError:
            return []
        finally:
            con.close()

    def study_events(self, kind: str, participant: str | None = None) -> list[tuple]:
        sql = "select seq, participant_id, session_id, cell, payload from study_events where study = 'pilot' " \
              "and kind = ?" + (" and participant_id = ?" if participant else "") + " order by seq"
        return self.rows(sql, kind, *([participant] if participant else []))

    def current_session(self, participant: str) -> str | None:
        found = self.study_events("cell_started", participant)
        return found[-1][2] if found else None

    def kinds(self, session: str) -> list[str]:
        return [k for (k,) in self.rows("select kind from events where session_id = ? order by seq", session)]

    def status(self, session: str) -> str | None:
        found = self.rows("select status from sessions where id = ?", session)
        return found[0][0] if found else None


def codes(db: Db) -> dict[str, str]:
    """Each participant's link code (engine.study.links), as `befair study links` prints it."""
    return dict(db.rows("select participant_id, code from participant_links where study = 'pilot'"))


def sign_in_and_profile(tab: Tab, db: Db, pid: str, role: int, years: tuple[str, str], *, code: str | None = None):
    if code is not None:
        tab.keys(*pid, "\ue007", *code, "\ue007")   # the form: the id, Enter, the link's code, Enter
    tab.keys(" ", "\ue004", "\ue007")             # consent: tick, Tab to Continue, Enter
    wait_until(lambda: db.study_events("consent", pid), 30, f"{pid}'s consent")
    time.sleep(1.5)                                 # the profile page drawn: a key before it is lost
    tab.keys(*(["\ue015"] * (role + 1)), "\ue007")  # role: nothing highlighted at first; Down to it, Enter
    tab.keys("\ue004", *years[0], "\ue004", *years[1], "\ue004", *"lab", "\ue007")
    wait_until(lambda: db.study_events("profile", pid), 30, f"{pid}'s profile")


def start_cell(tab: Tab, db: Db, pid: str, number: int) -> str:
    tab.keys("\ue007")  # the Start button has the focus
    wait_until(lambda: len(db.study_events("cell_started", pid)) >= number, 30, f"{pid}'s session {number} started")
    session = db.current_session(pid)
    wait_until(lambda: "node_created" in db.kinds(session), 180, f"a node in {session}")
    return session


def answer(tab: Tab, db: Db, pid: str, number: int, scale: int, comment: str) -> None:
    tab.keys(*(["\ue014"] * scale), " ")   # the scale: nothing highlighted at first; Right to the value, Space
    tab.keys("\ue004", *comment, "\ue007")         # Tab to the comment, Enter saves
    wait_until(lambda: len(db.study_events("answers", pid)) >= number, 30, f"{pid}'s answers {number}")


def test_two_participants_pilot_in_two_tabs_with_serve_killed_midway(tmp_path):
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
    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1300,860",
                "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    try:
        # -- the researcher's token is needed, a forged ticket refused ---------------------------
        for bad in (f"{url}/?researcher=wrong", f"{url}/ws/forged-ticket"):
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(bad, timeout=10)
            assert refused.value.code == 403

        # -- two tabs at once: p01 by the URL, p02 by the form -----------------------------------
        code = codes(db)
        a = Tab(driver, driver.current_window_handle, shots).open(f"{url}/?participant=p01&code={code['p01']}")
        driver.switch_to.new_window("tab")
        b = Tab(driver, driver.current_window_handle, shots).open(url)
        sign_in_and_profile(a, db, "p01", 0, ("12", "1"))
        sign_in_and_profile(b, db, "p02", 1, ("0", "6"), code=code["p02"])
        a_first, b_first = start_cell(a, db, "p01", 1), start_cell(b, db, "p02", 1)
        assert (a_first, b_first) == ("pilot-p01-base-r0", "pilot-p02-fairness-methods-r0")  # the Latin square

        # -- steering, each in their own session; the sessions screen does not open ------------
        a.keys("p")
        wait_until(lambda: "paused" in db.kinds(a_first), 30, "p01's pause")
        a.keys("l")  # the console's key for the sessions screen: nothing in a participant's tab
        a.keys("g", *"reweight by skin tone", "\ue007")
        wait_until(lambda: "guidance" in db.kinds(a_first), 30, "p01's guidance")
        a.keys("x", "y")
        wait_until(lambda: "pruned" in db.kinds(a_first), 30, "p01's prune")
        a.shot("participant-console")
        b.keys("p")
        wait_until(lambda: "paused" in db.kinds(b_first), 30, "p02's pause")
        b.keys("g", *"select by the worst group", "\ue007")
        wait_until(lambda: "guidance" in db.kinds(b_first), 30, "p02's guidance")

        # -- the researcher's view in a third tab ------------------------------------------------
        driver.switch_to.new_window("tab")
        r = Tab(driver, driver.current_window_handle, shots).open(f"{url}/?researcher={serve.token}")
        time.sleep(3)
        r.shot("researcher-grid")
        driver.close()

        # -- serve killed mid-study (and p02's worker with it), then started again --------------
        before = {s: session_events(db_path, s) for s in (a_first, b_first)}
        assert db.status(a_first) == db.status(b_first) == "paused"
        b_worker = db.rows("select pid from sessions where id = ?", b_first)[0][0]
        serve.kill()
        os.kill(int(b_worker), signal.SIGKILL)
        time.sleep(1)
        serve = Serve(spec, db_path, port, env)
        a.open(f"{url}/?participant=p01&code={code['p01']}")
        b.open(url)
        b.keys(*"p02", "\ue007", *code["p02"], "\ue007")
        # p02's worker was killed: the tab resumes the session (running again, as `befair resume` does)
        wait_until(lambda: "session_resumed" in db.kinds(b_first), 90, "p02's session resumed")
        # running again, or already at its end: 3 steps on an idle machine can finish between two polls
        wait_until(lambda: db.status(b_first) in ("running", "finished"), 60, "p02's session running again")
        # p01's worker ran on, paused: p01 resumes it from the reloaded tab
        assert db.status(a_first) == "paused"
        a.keys("p")
        wait_until(lambda: db.status(a_first) == "running", 60, "p01's session resumed by p01")
        for session, old in before.items():
            assert session_events(db_path, session)[:len(old)] == old   # nothing lost
        assert db.kinds(a_first).count("session_resumed") == 0         # p01's worker ran on

        # -- the questions, the second sessions, the closing page --------------------------------
        for pid, tab, session in (("p01", a, a_first), ("p02", b, b_first)):
            wait_until(lambda s=session: db.status(s) == "finished", 240, f"{session} finished")
            time.sleep(3)  # the console moves on to the questions
            answer(tab, db, pid, 1, 3 if pid == "p01" else 5, f"{pid} first")
        second = {pid: start_cell(tab, db, pid, 2) for pid, tab in (("p01", a), ("p02", b))}
        b.keys("g", *"keep the worst group's AUC up", "\ue007")
        wait_until(lambda: db.kinds(second["p02"]).count("evaluated") >= 4, 180, "two measured nodes")
        b.shot("participant-view")
        for pid, tab in (("p01", a), ("p02", b)):
            wait_until(lambda s=second[pid]: db.status(s) == "finished", 240, f"{second[pid]} finished")
            time.sleep(3)
            answer(tab, db, pid, 2, 4 if pid == "p01" else 6, f"{pid} second")
            wait_until(lambda p=pid: db.study_events("completed", p), 30, f"{pid}'s closing page")
        b.shot("closing-page")
    finally:
        driver.quit()
        serve.stop()

    # -- nothing lost or duplicated; every action names its participant ---------------------------
    sessions = [a_first, b_first, second["p01"], second["p02"]]
    for session in sessions:
        assert db.status(session) == "finished"
        assert_events_sound(db_path, session)
    assert db.kinds(b_first).count("session_resumed") == 1
    steering = [(s, k, json.loads(p).get("participant_id")) for s in sessions
                for k, p in db.rows("select kind, payload from events where session_id = ? and kind in "
                                    "('paused', 'resumed', 'guidance', 'pruned')", s)]
    assert {(s.split("-")[1], pid) for s, _, pid in steering} == {("p01", "p01"), ("p02", "p02")}
    assert Counter(k for _, k, _ in steering) == {"paused": 2, "resumed": 1, "guidance": 3, "pruned": 1}
    events = db.rows("select seq, kind from study_events where study = 'pilot' order by seq")
    assert [s for s, _ in events] == list(range(1, len(events) + 1))
    assert Counter(k for _, k in events) == {"consent": 2, "profile": 2, "cell_started": 4, "answers": 4,
                                             "completed": 2, "tab_opened": 4}   # each tab opened anew after the kill

    # -- the report by expertise, and its long CSV ------------------------------------------------
    sessions_csv, figure = tmp_path / "sessions.csv", tmp_path / "figure2.png"
    out = subprocess.run([sys.executable, "-m", "befair_tui.cli", "study", "report", "pilot", "--db", str(db_path),
                          "--sessions-csv", str(sessions_csv), "--figure", str(figure)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "by expertise × level" in out.stdout
    for line in ("dermatologist · base", "dermatologist · fairness-methods", "data scientist · base",
                 "data scientist · fairness-methods"):
        assert line in out.stdout
    rows = list(csv.DictReader(sessions_csv.open()))
    assert [(r["participant"], r["role"], r["level"], r["q_fair_dark"]) for r in rows] == [
        ("p01", "dermatologist", "base", "3"), ("p01", "dermatologist", "fairness-methods", "4"),
        ("p02", "data scientist", "fairness-methods", "5"), ("p02", "data scientist", "base", "6")]
    assert rows[0]["guidance"] == "1" and rows[0]["prunes"] == "1" and rows[0]["pauses"] == "1"
    assert figure.stat().st_size > 20_000
    saved = os.environ.get("BEFAIR_SCREENSHOTS")
    if saved:
        for name in ("participant-view", "participant-console", "researcher-grid", "closing-page"):
            shutil.copy(shots / f"{name}.png", Path(saved) / f"study-{name}.png")
