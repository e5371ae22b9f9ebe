"""The warm evaluation worker (one pre-imported worker per session, forked per evaluation) keeps
the harness's promises across evaluations: nothing one node's predict leaves behind (a process, a
file in /tmp, a planted file in the output folder) reaches the next node's evaluation, a predict
cannot read or drive the worker it was forked from, cannot write into its node folder, and a
timeout or a memory hog ends the whole sandbox, which the next evaluation replaces."""
from __future__ import annotations

import os
import textwrap
import time
import uuid
from pathlib import Path

import pandas as pd
import pytest

from tests.processes import running_with

from engine.evaluation.harness import evaluate
from engine.evaluation.warm_worker import close_warm_workers
from engine.execution.sandbox import Sandbox, check

pytestmark = pytest.mark.skipif(not check().available, reason=f"no sandbox here: {check().explain()}")


@pytest.fixture(scope="module")
def heldout(tmp_path_factory):
    from PIL import Image

    root = tmp_path_factory.mktemp("heldout")
    images = root / "images"
    images.mkdir()
    rows = []
    for i in range(6):
        Image.new("RGB", (8, 8), (40 * i, 20, 20)).save(images / f"img_{i}.png")
        rows.append({"file": f"img_{i}.png", "label": i % 2, "group": f"group_{i % 3}"})
    pd.DataFrame(rows).to_csv(root / "labels.csv", index=False)
    return images, root / "labels.csv"


@pytest.fixture(autouse=True)
def fresh_workers():
    close_warm_workers()
    yield
    close_warm_workers()


def _node(root: Path, name: str, body: str) -> Path:
    node = root / name
    (node / "working").mkdir(parents=True)
    (node / "solution.py").write_text(textwrap.dedent(body))
    return node


def _eval(node: Path, heldout, **kw):
    images, labels = heldout
    return evaluate(node, "solution.py", images, labels, sandbox=Sandbox.create(), warm=True, **kw)


def test_nothing_of_one_evaluation_reaches_the_next(tmp_path, heldout):
    marker = f"befair-warm-{uuid.uuid4().hex}"
    planter = f'''
    import glob, os, subprocess, sys
    def predict(folder):
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "{marker}"],
                         start_new_session=True)
        open("/tmp/{marker}", "w").write("left behind")
        here = os.path.dirname(os.path.abspath(__file__))
        for out in glob.glob("/tmp/befair-warm-*/out"):
            open(os.path.join(out, "planted-{marker}"), "w").write("x")
        try:
            open(os.path.join(here, "written-by-predict"), "w").write("x")
            print("WROTE-NODE-FOLDER")
        except OSError as exc:
            print("blocked", type(exc).__name__)
        return {{n: 0.5 for n in os.listdir(folder)}}
    '''
    first = _node(tmp_path, "node_1", planter)
    out = _eval(first, heldout)
    assert out.verdict == "ok", out.reason
    assert "WROTE-NODE-FOLDER" not in out.log_tail and not (first / "written-by-predict").exists()
    for _ in range(50):
        if not running_with(marker):
            break
        time.sleep(0.1)
    assert running_with(marker) == [], "a process of the first evaluation outlived it"

    looker = f'''
    import glob, os
    def predict(folder):
        seen = [p for p in glob.glob("/tmp/**", recursive=True) if "{marker}" in p]
        seen += [p for p in glob.glob("/tmp/befair-warm-*/stage/*/*") if "node_1" in p]
        print("SEEN:", seen)
        return {{n: 0.9 if seen else 0.5 for n in os.listdir(folder)}}
    '''
    second = _eval(_node(tmp_path, "node_2", looker), heldout)
    assert second.verdict == "ok", second.reason
    assert "SEEN: []" in second.log_tail, second.log_tail


def test_predict_cannot_read_or_drive_the_worker_it_was_forked_from(tmp_path, heldout):
    body = '''
    import os
    def predict(folder):
        parent = os.getppid()
        for what in ("mem", "fd/0", "fd/1", "environ"):
            try:
                with open(f"/proc/{parent}/{what}", "rb" if what != "fd/1" else "wb") as fh:
                    if what == "fd/1":
                        fh.write(b'{"nonce": "forged", "exit": 0}\\n')
                    else:
                        fh.read(16)
                print("REACHED", what)
            except OSError as exc:
                print("blocked", what, type(exc).__name__)
        return {n: 0.5 for n in os.listdir(folder)}
    '''
    out = _eval(_node(tmp_path, "node_1", body), heldout)
    assert out.verdict == "ok", out.reason
    assert "REACHED" not in out.log_tail, out.log_tail
    assert out.log_tail.count("blocked") == 4


def test_timeout_and_memory_end_the_sandbox_and_the_next_evaluation_gets_a_new_one(tmp_path, heldout):
    slow = _node(tmp_path, "node_1", "import time\ndef predict(folder):\n    time.sleep(60)\n")
    out = _eval(slow, heldout, timeout=5)
    assert out.verdict == "timeout" and out.elapsed < 30
    hog = _node(tmp_path, "node_2", "def predict(folder):\n    x = bytearray(1536 * 1024 * 1024)\n"
                                    "    for i in range(0, len(x), 4096):\n        x[i] = 1\n    return {}\n")
    out = _eval(hog, heldout, timeout=60, memory_limit_mb=512)
    assert out.verdict == "out_of_memory" and out.reason == "out of memory (limit 512 MiB)"
    good = _node(tmp_path, "node_3",
                 "import os\ndef predict(folder):\n    return {n: 0.5 for n in os.listdir(folder)}\n")
    assert _eval(good, heldout, timeout=60).verdict == "ok"


def test_staged_node_keeps_its_folder_name_and_input_link(tmp_path, heldout):
    body = '''
    import os
    def predict(folder):
        assert os.path.basename(os.getcwd()) == "node_7", os.getcwd()
        assert open(os.path.join("working", "model.txt")).read() == "0.25"
        return {n: float(open(os.path.join("working", "model.txt")).read()) for n in os.listdir(folder)}
    '''
    node = _node(tmp_path, "node_7", body)
    (node / "working" / "model.txt").write_text("0.25")
    out = _eval(node, heldout)
    assert out.verdict == "ok", out.reason
    assert set(out.predictions.values()) == {0.25}


def test_the_pool_keeps_at_most_two_warm_workers(tmp_path, heldout):
    from PIL import Image

    from engine.evaluation import warm_worker as harness

    good = _node(tmp_path, "node_1",
                 "import os\ndef predict(folder):\n    return {n: 0.5 for n in os.listdir(folder)}\n")
    images, labels = heldout
    workers = []
    for i in range(3):  # three held-out folders: three pool keys
        folder = tmp_path / f"heldout_{i}"
        folder.mkdir()
        for name in os.listdir(images):
            Image.open(images / name).save(folder / name)
        out = evaluate(good, "solution.py", folder, labels, sandbox=Sandbox.create(), warm=True)
        assert out.verdict == "ok", out.reason
        workers += [w for w in harness._POOL.values() if w not in workers]
    assert len(harness._POOL) == 2 and len(workers) == 3
    assert not workers[0].alive and not workers[0].root.exists()


def test_a_warm_worker_that_cannot_start_falls_back_to_a_fresh_process(tmp_path, heldout, monkeypatch):
    from engine.errors import WorkError
    from engine.evaluation import warm_worker as harness

    def refuse(self):
        raise WorkError("the warm evaluation worker did not start")

    monkeypatch.setattr(harness.WarmWorker, "start", refuse)
    good = _node(tmp_path, "node_1",
                 "import os\ndef predict(folder):\n    return {n: 0.25 for n in os.listdir(folder)}\n")
    out = _eval(good, heldout)
    assert out.verdict == "ok" and set(out.predictions.values()) == {0.25}


def test_a_folder_left_by_a_killed_owner_is_swept_and_a_live_owners_is_kept(tmp_path):
    """kill -9 runs no cleanup: the next warm worker removes folders whose owner is gone."""
    import signal
    import subprocess
    import sys

    from engine.evaluation.warm_worker import WARM_PREFIX, sweep_stale_warm_folders

    owner = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    left = tmp_path / f"{WARM_PREFIX}{owner.pid}-abc"
    (left / "stage").mkdir(parents=True)
    mine = tmp_path / f"{WARM_PREFIX}{os.getpid()}-def"
    mine.mkdir()
    unrelated = tmp_path / f"{WARM_PREFIX}xyz"  # an old-style name: not ours to judge
    unrelated.mkdir()
    assert sweep_stale_warm_folders(tmp_path) == []  # its owner still runs
    owner.send_signal(signal.SIGKILL)
    owner.wait()
    assert sweep_stale_warm_folders(tmp_path) == [left]
    assert not left.exists() and mine.exists() and unrelated.exists()
