"""Where bubblewrap cannot create namespaces, `befair run` refuses model-written code and says
why; `--sandbox none` runs anyway and the session is recorded as unsandboxed."""
from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

FAKE_BWRAP = "#!/bin/sh\necho 'bwrap: setting up uid map: Permission denied' >&2\nexit 1\n"
ARGS = ["--headless", "--steps", "1", "--num-drafts", "1", "--synth-n-train", "300", "--synth-n-test", "120",
        "--synth-size", "32", "--step-timeout", "120"]


def _befair(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    bwrap = tmp_path / "bwrap"
    bwrap.write_text(FAKE_BWRAP)
    bwrap.chmod(0o755)
    env = dict(os.environ, BEFAIR_BWRAP=str(bwrap))
    return subprocess.run([sys.executable, "-m", "befair_tui.cli", "run", *args], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)


def test_run_refuses_without_namespaces_and_says_how_to_fix(tmp_path):
    db = tmp_path / "db" / "befair.db"
    done = _befair(tmp_path, *ARGS, "--db", str(db))
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "user namespaces are not allowed" in done.stderr and "--sandbox none" in done.stderr
    assert "sysctl" in done.stderr
    if db.exists():  # nothing was recorded as if it had run
        assert sqlite3.connect(db).execute("select count(*) from sessions").fetchone()[0] == 0


def test_sandbox_none_runs_and_is_recorded(tmp_path):
    db = tmp_path / "db" / "befair.db"
    done = _befair(tmp_path, *ARGS, "--db", str(db), "--sandbox", "none")
    assert done.returncode == 0, done.stderr
    con = sqlite3.connect(db)
    (config,) = con.execute("select config from sessions").fetchone()
    assert json.loads(config)["sandbox"] == "none"
    started = [json.loads(p) for (p,) in con.execute("select payload from events where kind = 'exec_started'")]
    assert started and all(p["sandbox"] == "none" for p in started)
