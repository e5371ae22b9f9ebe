"""Start sessions as detached `befair run --headless` processes (the console never runs the search).

The child gets its own process group (start_new_session) so closing the console can leave it
running; its output goes to a log file next to the database.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine.session.store import new_session_id

from befair_tui.settings import SetupChoices


def run_argv(choices: SetupChoices, db: Path, session_id: str) -> list[str]:
    argv = [
        sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--quiet",
        "--session-id", session_id, "--db", str(db),
        "--level", choices.level, "--steps", str(int(choices.steps)),
        "--coder", choices.coder, "--best", choices.best,
        "--step-timeout", str(float(choices.step_timeout)), "--seed", str(int(choices.seed)),
    ]
    if choices.level == "custom":
        argv += ["--custom-text", choices.custom_text]
    if choices.data == "workspace":
        argv += ["--data", choices.workspace]
    else:
        argv += ["--data", "synth", "--synth-n-train", str(choices.synth_n_train),
                 "--synth-n-test", str(choices.synth_n_test), "--synth-size", str(choices.synth_size)]
    if choices.coder == "openai" and choices.model:
        argv += ["--model", choices.model]
    if choices.blind_test:
        argv.append("--blind-test")
    if choices.participant.strip():
        argv += ["--participant", choices.participant.strip()]
    return argv


def log_path(db: Path, session_id: str) -> Path:
    folder = Path(db).resolve().parent / "logs"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{session_id}.log"


def spawn(argv: list[str], db: Path, session_id: str) -> subprocess.Popen:
    """Start a detached child; its stdout/stderr go to logs/<session>.log next to the DB."""
    log = log_path(db, session_id)
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    with open(log, "ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=env, cwd=os.getcwd(),
        )


def start_session(choices: SetupChoices, db: Path) -> tuple[str, subprocess.Popen]:
    session_id = new_session_id()
    return session_id, spawn(run_argv(choices, db, session_id), db, session_id)


def resume_argv(db: Path, session_id: str) -> list[str]:
    return [sys.executable, "-m", "befair_tui.cli", "resume", session_id, "--headless", "--quiet",
            "--db", str(db)]


def log_tail(db: Path, session_id: str, lines: int = 6) -> str:
    try:
        text = log_path(db, session_id).read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.strip().splitlines()[-lines:])
