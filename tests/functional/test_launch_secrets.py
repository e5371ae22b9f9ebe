"""The LLM API key never reaches a command line or a settings file.

`befair run --api-key K` (console mode) starts a detached `befair run --headless` child: K must
travel in the child's environment (OPENAI_API_KEY), not in its argv, which anyone on the machine
can read in /proc/<pid>/cmdline."""
from __future__ import annotations

import json
import os
import stat
import sys
import time
from pathlib import Path

import pytest

from befair_tui import launch
from befair_tui.cli import build_parser
from befair_tui.cli import console as commands
from befair_tui.settings import SetupChoices, load_choices, save_choices

KEY = "sk-test-SECRET-0123456789"

# A stand-in for the Python interpreter: records its own /proc/self/cmdline and environment.
PROBE = f"""#!{sys.executable}
import json, os, sys
cmdline = open("/proc/self/cmdline", "rb").read().split(b"\\0")
out = os.environ["PROBE_OUT"]
with open(out + ".tmp", "w") as f:
    json.dump({{"cmdline": [c.decode() for c in cmdline if c], "key": os.environ.get("OPENAI_API_KEY")}}, f)
os.replace(out + ".tmp", out)
"""


def _probe(tmp_path: Path, monkeypatch) -> tuple[Path, Path]:
    script = tmp_path / "probe-python"
    script.write_text(PROBE)
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    out = tmp_path / "probe.json"
    monkeypatch.setenv("PROBE_OUT", str(out))
    return script, out


def _read(out: Path, timeout: float = 30) -> dict:
    deadline = time.monotonic() + timeout
    while not out.exists():
        assert time.monotonic() < deadline, "the spawned child never reported"
        time.sleep(0.05)
    return json.loads(out.read_text())


@pytest.mark.parametrize("given", [["--api-key", KEY], [f"--api-key={KEY}"], ["--api-k", KEY], [f"--api={KEY}"]])
def test_split_secrets_moves_the_key_to_the_environment(given):
    argv = ["run", "--coder", "openai", *given, "--steps", "3"]
    rest, env = launch.split_secrets(argv)
    assert rest == ["run", "--coder", "openai", "--steps", "3"]
    assert env == {"OPENAI_API_KEY": KEY}
    assert launch.split_secrets(["run", "--steps", "3"]) == (["run", "--steps", "3"], {})
    assert launch.split_secrets(["run", "--", "--api-key"]) == (["run", "--", "--api-key"], {})


def _run_args(db: Path, *extra: str):
    return build_parser().parse_args(["run", "--coder", "openai", "--api-key", KEY, "--model", "m", "--steps", "2",
                                      "--db", str(db), "--guidance", "weigh the groups", *extra])


def test_the_run_request_holds_no_key(tmp_path):
    from befair_tui.cli.run import write_run_request

    request = tmp_path / "sid-1.request.json"
    config = write_run_request(request, _run_args(tmp_path / "befair.db"))
    text = request.read_text()
    assert KEY not in text and "api_key" not in text
    saved = json.loads(text)
    assert saved["config"] == config.to_dict() and saved["config"]["steps"] == 2
    assert saved["guidance"] == ["weigh the groups"] and saved["model"] == "m"


def test_spawned_child_has_the_key_in_its_environment_not_its_cmdline(tmp_path, monkeypatch):
    """`befair run --coder openai --api-key K` end to end: the real detached child reads its own
    /proc/self/cmdline (no K) and its environment (OPENAI_API_KEY=K)."""
    script, out = _probe(tmp_path, monkeypatch)
    db = tmp_path / "befair.db"
    monkeypatch.setattr(sys, "executable", str(script))  # the child's interpreter: the probe
    apps = []
    monkeypatch.setattr(commands, "_run", lambda app: apps.append(app) or 0)
    args = _run_args(db, "--session-id", "sid-2")
    assert commands.open_console_from_args(args) == 0
    seen = _read(out)
    assert seen["key"] == KEY
    assert not any(KEY in part for part in seen["cmdline"]), seen["cmdline"]
    assert "--api-key" not in seen["cmdline"]
    assert seen["cmdline"][-4:-2] == ["--session-id", "sid-2"] and "--headless" in seen["cmdline"]
    request = Path(seen["cmdline"][seen["cmdline"].index("--request") + 1])
    assert KEY not in request.read_text() and json.loads(request.read_text())["config"]["coder"] == "openai"
    # and a resume started later from this console gets the key the same way
    assert apps[0].child_env == {"OPENAI_API_KEY": KEY}
    proc = apps[0].start_proc
    proc.wait(timeout=30)


def test_spawn_moves_a_key_that_slipped_into_argv(tmp_path, monkeypatch):
    script, out = _probe(tmp_path, monkeypatch)
    db = tmp_path / "befair.db"
    proc = launch.spawn([str(script), "resume", "s", f"--api-key={KEY}"], db, "s")
    proc.wait(timeout=30)
    seen = _read(out)
    assert seen["key"] == KEY and not any(KEY in part for part in seen["cmdline"])


def test_settings_never_hold_a_key(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    path = tmp_path / "settings.json"
    save_choices(SetupChoices(coder="openai", model="gpt-x"), path)
    text = path.read_text()
    assert KEY not in text and "key" not in text.lower()
    assert load_choices(path).model == "gpt-x"
    # a key-like field, should one ever be added, is not written either
    from befair_tui import settings

    monkeypatch.setattr(settings, "asdict", lambda c: {"model": "m", "api_key": KEY, "token": KEY})
    save_choices(SetupChoices(), path)
    assert KEY not in path.read_text()
    assert os.environ["OPENAI_API_KEY"] == KEY  # untouched
