"""The local executor and node workspaces: process groups, timeouts, memory limit, output cap,
streaming, `if __name__ == "__main__":` scripts, read-only input and held-out isolation."""
from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest

from engine.execution import (
    Job, LocalExecutor, check_isolated, exception_type, guard_runs_root, prepare_node_dir,
    prepare_session_input,
)
from engine.errors import BefairError


@pytest.fixture()
def agent_input(tmp_path) -> Path:
    d = tmp_path / "ws" / "agent_input"
    (d / "images").mkdir(parents=True)
    (d / "skin_lesions.csv").write_text("image_name,skin_tone,label\nimage_1,3,benign\n")
    (d / "images" / "image_1.jpg").write_bytes(b"\xff\xd8\xff")
    held = tmp_path / "ws" / "heldout" / "validation"
    held.mkdir(parents=True)
    (held / "labels.csv").write_text("x\n")
    return d


def _node(tmp_path, agent_input, code, node_id=1) -> Path:
    runs = tmp_path / "runs"
    prepare_session_input(runs, "S1", agent_input)
    return prepare_node_dir(runs, "S1", node_id, textwrap.dedent(code))


def _alive(pid: int) -> bool:
    """Running (a zombie left for a non-reaping init counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state not in ("Z", "X")


def _stopped_beating(beat: Path) -> bool:
    """A child that appends to `beat` every 50 ms is gone (pids inside the sandbox are not ours)."""
    time.sleep(0.3)
    before = beat.stat().st_size
    time.sleep(0.5)
    return before > 0 and beat.stat().st_size == before


def _run(node_dir, **kw):
    ex = LocalExecutor(flush_interval=0.05, heartbeat=0.05)
    h = ex.submit(Job(node_id=1, workdir=node_dir, **kw))
    batches = list(ex.stream(h))
    return ex.result(h), batches


def test_main_guarded_script_runs_in_its_workspace(tmp_path, agent_input):
    node = _node(tmp_path, agent_input, """
        import os
        def main():
            rows = open("input/skin_lesions.csv").read().splitlines()
            open("working/model.txt", "w").write("trained")
            print("rows", len(rows))
            print("cwd", os.getcwd())
            print("threads", os.environ["OMP_NUM_THREADS"], os.environ["PYTHONUNBUFFERED"])
            print("Validation AUROC: 0.75")
        if __name__ == "__main__":
            main()
    """)
    res, batches = _run(node, timeout=30)
    assert res.status == "ok" and res.exit_code == 0
    out = "".join(c.text for b in batches for c in b)
    assert "rows 2" in out and "Validation AUROC: 0.75" in out
    assert f"cwd {node}" in out or f"cwd {node.resolve()}" in out
    assert "threads 2 1" in out
    assert (node / "working" / "model.txt").read_text() == "trained"
    assert all(c.text.endswith("\n") for b in batches for c in b)


def test_input_is_read_only_and_copied_once(tmp_path, agent_input):
    runs = tmp_path / "runs"
    first = prepare_session_input(runs, "S1", agent_input)
    mtime = first.stat().st_mtime_ns
    assert prepare_session_input(runs, "S1", agent_input) == first
    assert first.stat().st_mtime_ns == mtime
    node = prepare_node_dir(runs, "S1", 3, """
import os
try:
    open("input/skin_lesions.csv", "a").write("x")
    print("WROTE")
except OSError as e:
    print("refused", type(e).__name__)
try:
    open("input/new.txt", "w").write("x")
    print("CREATED")
except OSError as e:
    print("refused", type(e).__name__)
""")
    assert os.path.islink(node / "input") and os.readlink(node / "input") == os.path.join("..", "input")
    import stat
    for p in [first, first / "skin_lesions.csv", first / "images", first / "images" / "image_1.jpg"]:
        assert not p.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH), p
    res, _ = _run(node, timeout=30)
    if os.geteuid() == 0:
        pytest.skip("root ignores file permissions (the mode bits were checked above)")
    assert "WROTE" not in res.output and "CREATED" not in res.output


def test_heldout_not_reachable_from_node_dir(tmp_path, agent_input):
    node = _node(tmp_path, agent_input, "print('hi')\n")
    held = tmp_path / "ws" / "heldout"
    assert check_isolated(node, [held]) == []
    assert check_isolated(node.parent, [held]) == []
    # a link into heldout would be caught
    os.symlink(held, node / "working" / "peek")
    assert check_isolated(node, [held])
    with pytest.raises(BefairError):
        guard_runs_root(tmp_path / "ws" / "runs", tmp_path / "ws")
    guard_runs_root(tmp_path / "runs", tmp_path / "ws")


def test_timeout_kills_the_whole_group(tmp_path, agent_input):
    node = _node(tmp_path, agent_input, """
        import subprocess, sys, time
        beat = "import time\\nwhile True:\\n    open('working/beat', 'a').write('.')\\n    time.sleep(0.05)\\n"
        child = subprocess.Popen([sys.executable, "-c", beat])
        print("started", flush=True)
        time.sleep(60)
    """)
    t0 = time.monotonic()
    res, _ = _run(node, timeout=1.5)
    assert time.monotonic() - t0 < 10
    assert res.status == "timeout" and res.exc_type == "TimeoutError", res
    assert _stopped_beating(node / "working" / "beat")


def test_cancel_interrupts(tmp_path, agent_input):
    node = _node(tmp_path, agent_input, "import time\nprint('go', flush=True)\ntime.sleep(60)\n")
    ex = LocalExecutor(heartbeat=0.05)
    h = ex.submit(Job(node_id=1, workdir=node, timeout=60))
    t0 = time.monotonic()
    for _ in ex.stream(h):
        if time.monotonic() - t0 > 0.5:
            ex.cancel(h)
    res = ex.result(h)
    assert res.status == "interrupted" and time.monotonic() - t0 < 10


def test_exception_and_exit_code(tmp_path, agent_input):
    node = _node(tmp_path, agent_input, "import pandas\nrow = {}\nprint('start')\nrow['diagnosis']\n")
    res, _ = _run(node, timeout=60)
    assert res.status == "buggy" and res.exit_code == 1 and res.exc_type == "KeyError"
    assert "KeyError: 'diagnosis'" in res.output


def test_memory_limit(tmp_path, agent_input):
    node = _node(tmp_path, agent_input, "x = bytearray(600 * 1024 * 1024)\nprint('allocated')\n")
    res, _ = _run(node, timeout=60, memory_limit_mb=300)
    assert res.status == "buggy" and res.exc_type == "out of memory (limit 300 MiB)" and res.out_of_memory
    res, _ = _run(node, timeout=60, memory_limit_mb=0)
    assert res.status == "ok"


def test_output_cap_keeps_head_and_tail_and_batches(tmp_path, agent_input):
    node = _node(tmp_path, agent_input, """
        import sys, time
        print("err first", file=sys.stderr, flush=True)
        time.sleep(0.5)  # stdout and stderr are separate pipes: let stderr be read before the cap
        for i in range(20000):
            print(f"line {i:05d}")
            if i % 5000 == 0:
                print(f"err {i}", file=sys.stderr)
    """)
    res, batches = _run(node, timeout=60, output_cap=10_000)
    assert res.status == "ok" and res.truncated
    assert "line 00000" in res.output_head
    assert "line 19999" in res.output_tail
    assert len(res.output_head) + len(res.output_tail) <= 10_000
    streamed = "".join(c.text for b in batches for c in b)
    assert len(streamed) < 10_200 and "output cap reached" in streamed
    chunks = [c for b in batches for c in b]
    assert len(chunks) < 200  # batched, not one event per line
    assert any(c.stream == "stderr" for c in chunks)


def test_exception_type_parser():
    out = "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: bad shape\n"
    assert exception_type(out) == "ValueError"
    assert exception_type("no traceback here\nValueError: x") is None
    out2 = "Traceback (most recent call last):\n  ...\ntorch.OutOfMemoryError: CUDA\n"
    assert exception_type(out2) == "OutOfMemoryError"
