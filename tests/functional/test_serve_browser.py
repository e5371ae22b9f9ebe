"""`befair serve` in a real browser: textual-serve serves the console, headless Chromium (the
system's, driven by selenium with the system's chromedriver: nothing is downloaded) opens the
page, and the screenshot must show the setup screen: its blue "Start session" button and the
orange title, drawn by the console process behind the page."""
from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
BUTTON_BLUE = (1, 120, 212)   # Textual's $primary: the setup screen's Start session button
TITLE_ORANGE = (254, 166, 43)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_for_port(port: int, proc: subprocess.Popen, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"befair serve exited: {proc.stderr.read().decode()[-2000:]}")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.2)
    raise AssertionError("befair serve did not listen")


def _count(image, colour, tolerance=12) -> int:
    return sum(1 for px in image.get_flattened_data()
               if all(abs(a - b) <= tolerance for a, b in zip(px, colour, strict=True)))


@pytest.mark.skipif(not (CHROMIUM and DRIVER), reason="no chromium and chromedriver installed "
                    "(apt-get install chromium chromium-driver; .ci/run installs them)")
def test_console_in_a_browser_shows_the_setup_screen(tmp_path):
    pytest.importorskip("textual_serve", reason="textual-serve is not installed (pip install 'befair[serve]')")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (dev extra)")
    from PIL import Image
    from selenium.webdriver.chrome.service import Service

    port = _free_port()
    serve = subprocess.Popen([sys.executable, "-m", "befair_tui.cli", "serve", "--port", str(port),
                              "--db", str(tmp_path / "befair.db")], cwd=tmp_path, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, start_new_session=True)
    driver = None
    try:
        _wait_for_port(port, serve)
        options = webdriver.ChromeOptions()
        for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
                    "--disable-dev-shm-usage"):
            options.add_argument(arg)
        options.binary_location = CHROMIUM
        driver = webdriver.Chrome(service=Service(DRIVER), options=options)
        driver.get(f"http://127.0.0.1:{port}")
        shot = tmp_path / "browser.png"
        blue = orange = 0
        for _ in range(60):  # the console process starts (imports) behind the page
            time.sleep(0.5)
            driver.save_screenshot(str(shot))
            image = Image.open(shot).convert("RGB")
            blue, orange = _count(image, BUTTON_BLUE), _count(image, TITLE_ORANGE, tolerance=20)
            if blue > 2000 and orange > 100:
                break
        assert blue > 2000, f"no Start session button on the page ({blue} blue pixels); see {shot}"
        assert orange > 100, f"no befair title on the page ({orange} orange pixels); see {shot}"
    finally:
        if driver is not None:
            driver.quit()
        serve.terminate()
        try:
            serve.wait(10)
        except subprocess.TimeoutExpired:
            serve.kill()
