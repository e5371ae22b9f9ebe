"""Start sessions as detached `befair run --headless` processes (the console never runs the search).

The child gets its own process group (start_new_session) so closing the console can leave it
running; its output goes to a log file next to the database.

Secrets never go on a child's command line (anyone on the machine can read /proc/<pid>/cmdline):
`split_secrets` takes `--api-key K` out of an argv and returns it as environment for `spawn`.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from collections.abc import Mapping
from typing import Any

from engine.agent.settings import OPTIONS
from engine.coders.llm.config import LLM_OPTIONS
from engine.session.store import new_session_id

from befair_tui.settings import SetupChoices


def request_argv(request: Path, db: Path, session_id: str) -> list[str]:
    """The detached run of a run request file (befair_tui.cli.run.save_run_request): its settings are
    the file's, never flags."""
    flag = {dest: OPTIONS[dest].flag or "" for dest in ("headless", "quiet", "request", "session_id")}
    return [sys.executable, "-m", "befair_tui.cli", "run", flag["headless"], flag["quiet"], flag["request"],
            str(request), flag["session_id"], session_id, "--db", str(db)]


# option -> the environment variable the child reads it from (engine.coders.llm.config's table)
SECRET_OPTIONS = {o.flag: o.env for o in LLM_OPTIONS if o.name == "api_key" and o.flag and o.env}
API_KEY_ENV = next(iter(SECRET_OPTIONS.values()))   # OPENAI_API_KEY


def _secret_option(name: str) -> str | None:
    """The secret option `name` stands for: itself, or an abbreviation argparse accepts
    (a parsed argv can only hold a prefix of --api-key if it meant --api-key)."""
    if not name.startswith("--") or len(name) < 3:
        return None
    for option in SECRET_OPTIONS:
        if option.startswith(name):
            return option
    return None


def split_secrets(argv: list[str]) -> tuple[list[str], dict[str, str]]:
    """(argv without its secret options, the environment that carries them instead).
    `--api-key K` and `--api-key=K` (or an abbreviation) become OPENAI_API_KEY=K."""
    out: list[str] = []
    env: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if token == "--":
            out.extend(argv[i:])
            break
        name, eq, value = token.partition("=")
        option = _secret_option(name)
        if option is None:
            out.append(token)
            i += 1
            continue
        if eq:
            env[SECRET_OPTIONS[option]] = value
            i += 1
        else:
            if i + 1 < len(argv):
                env[SECRET_OPTIONS[option]] = argv[i + 1]
            i += 2
    return out, env


def key_env(api_key: str | None) -> dict[str, str]:
    """The environment that carries an API key typed in the setup screen to that session's
    process (and to nothing else): {"OPENAI_API_KEY": key}, or {} for no key."""
    key = (api_key or "").strip()
    return {API_KEY_ENV: key} if key else {}


def log_path(db: Path, session_id: str) -> Path:
    folder = Path(db).resolve().parent / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{session_id}.log"


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The child's environment: ours, plus `extra` (secrets), plus this checkout on PYTHONPATH."""
    env = dict(os.environ)
    env.update({k: str(v) for k, v in (extra or {}).items()})
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def spawn(argv: list[str], db: Path, session_id: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[bytes]:
    """Start a detached child; its stdout/stderr go to logs/<session>.log next to the DB.
    `env`: extra environment (a secret such as OPENAI_API_KEY goes here, never into argv)."""
    argv, secrets = split_secrets(list(argv))  # a key that slipped into argv moves to the environment
    log = log_path(db, session_id)
    env = child_env({**(env or {}), **secrets})
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=env, cwd=os.getcwd(),
        )


def start_session(choices: SetupChoices, db: Path,
                  env: Mapping[str, str] | None = None) -> tuple[str, subprocess.Popen[bytes]]:
    """Start the session the setup screen's choices describe: their SessionConfig (built from the
    options' table, as `befair run` builds it from its flags) goes to the child in a run request
    file; the API key, if any, in `env`. Raises ValueError or BefairError for settings that cannot run."""
    from engine.paths import runs_dir

    from befair_tui.cli.run import save_run_request

    config = choices.session_config()
    session_id = new_session_id()
    request = runs_dir(db) / f"{session_id}.request.json"
    save_run_request(request, config, participant=config.participant_id)
    return session_id, spawn(request_argv(request, db, session_id), db, session_id, env=env)


def runner_state(row: Mapping[str, Any], proc: subprocess.Popen[bytes] | None = None) -> str:
    """engine.session.heartbeat.runner_status of a session row, sharpened by what this process
    knows about the child it started for it (`proc`): while that child lives, the session is
    alive (the runner, or a resume about to take over); once it has exited and it was the
    session's runner, it is stopped at once, without waiting for its heartbeat to go stale."""
    from engine.session.heartbeat import runner_status

    status = runner_status(row)
    if proc is None or status == "finished":
        return status
    if proc.poll() is None:
        return "alive"
    if status == "alive" and row.get("pid") == proc.pid:
        return "stopped"
    return status


def resume_argv(db: Path, session_id: str) -> list[str]:
    return [sys.executable, "-m", "befair_tui.cli", "resume", session_id, OPTIONS["headless"].flag or "",
            OPTIONS["quiet"].flag or "", "--db", str(db)]


def log_tail(db: Path, session_id: str, lines: int = 6) -> str:
    try:
        text = log_path(db, session_id).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])
