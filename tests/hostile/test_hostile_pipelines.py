"""Hostile pipelines, run through the real runner, executor and harness inside the sandbox.

Each pipeline tries what a model-written script could try (issue: "Sandbox that holds"): find
and return the held-out labels, tamper with files outside its node folder, forge events or
commands in the session database, read the API key, reach the network, leave processes behind,
flood its output, exhaust memory. Every act prints a marker when it succeeds; the tests assert no
marker was printed AND check the host side (hashes, database rows, sockets, the process table).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import socket
import sqlite3
import threading
import time
import uuid
from pathlib import Path

import pytest

from tests.processes import running_with

from engine.agent.runner import run
from engine.agent.session_config import SessionConfig
from engine.agent.session_setup import start_session
from engine.coders.protocol import CoderReply, Review
from engine.coders.protocol import CoderBase
from engine.execution import Job, LocalExecutor, Sandbox, prepare_node_dir, prepare_session_input
from engine.execution.sandbox import check
from engine.session.store import SessionStore

pytestmark = pytest.mark.skipif(not check().available, reason=f"no sandbox here: {check().explain()}")

FAKE_KEY = "sk-befair-test-" + uuid.uuid4().hex

THIEF = r'''
import glob, json, os, socket, sqlite3, subprocess, sys, time

TARGETS = json.loads({targets!r})
MARK = {marker!r}

def attempt(tag, fn):
    try:
        result = fn()
        if result:
            print(f"{{tag}}: {{result}}", flush=True)
    except BaseException as exc:  # noqa
        print(f"blocked ({{tag}}) {{type(exc).__name__}}", flush=True)

def find_labels():
    found = [p for p in TARGETS["labels"] if os.path.exists(p)]
    for root, dirs, files in os.walk("/"):
        dirs[:] = [d for d in dirs if os.path.join(root, d) not in ("/proc", "/sys", "/dev", "/usr")]
        found += [os.path.join(root, f) for f in files if f in ("labels.csv", "befair.db", "ddi_metadata.csv")]
    return ", ".join(found[:5])

def read_db():
    con = sqlite3.connect(TARGETS["db"])
    return str(con.execute("select data from sessions").fetchall())[:80]

def forge_db():
    con = sqlite3.connect(TARGETS["db"])
    con.execute("insert into commands (session_id, kind, payload, issued_by, issued_at) "
                "select id, 'stop', '{{}}', 'expert', 0 from sessions")
    con.execute("create table pwned (x)")
    con.commit()
    return "forged a stop command"

def tamper_labels():
    for path in TARGETS["labels"]:
        with open(path, "a") as fh:
            fh.write("evil,1,0\n")
        return "appended to " + path

def write_home():
    open(os.path.join(TARGETS["home"], MARK), "w").write("x")
    return "wrote into $HOME"

def write_tmp():
    open(os.path.join("/tmp", MARK), "w").write("x")
    if os.path.exists(TARGETS["host_tmp_probe"]):
        return "wrote /tmp (private tmp if this is not seen by the host)"
    return None

def write_other_node():
    if os.environ.get("BEFAIR_NODE_ID") == "1":
        return None  # node 1's own folder is its to write
    open(os.path.join(TARGETS["other_node"], "solution.py"), "a").write("# evil\n")
    return "wrote into another node"

def write_input():
    open("input/skin_lesions.csv", "a").write("evil\n")
    return "wrote into the shared input"

def secrets():
    found = []
    if TARGETS["key"] in json.dumps(dict(os.environ)):
        found.append("environ")
    for path in glob.glob("/proc/*/cmdline") + glob.glob("/proc/*/environ"):
        try:
            if TARGETS["key"].encode() in open(path, "rb").read():
                found.append(path)
        except OSError:
            pass
    return ",".join(found)

def network():
    socket.create_connection(("127.0.0.1", TARGETS["port"]), timeout=2).sendall(b"hello")
    return "connected to the host's server"

def daemon():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", MARK], start_new_session=True,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

def all_acts():
    for tag, fn in [("FOUND-LABELS", find_labels), ("READ-DB", read_db), ("FORGED-DB", forge_db),
                    ("TAMPERED-LABELS", tamper_labels), ("WROTE-HOME", write_home), ("WROTE-TMP", write_tmp),
                    ("WROTE-OTHER-NODE", write_other_node), ("WROTE-INPUT", write_input), ("SECRET", secrets),
                    ("NETWORK", network)]:
        attempt(tag, fn)
    daemon()

def predict(folder):
    all_acts()
    labels = {{}}
    for path in TARGETS["labels"]:
        try:
            for line in open(path).read().splitlines()[1:]:
                name, label = line.split(",")[:2]
                labels[name] = float(label)
        except OSError:
            pass
    return {{name: labels.get(name, 0.5) for name in sorted(os.listdir(folder))}}

if __name__ == "__main__":
    all_acts()
    print("Validation AUROC: 0.99")
'''


class ScriptCoder(CoderBase):
    """Returns the same hostile script at every step."""
    name, label, simulated = "hostile", "hostile test coder", True

    def __init__(self, code: str):
        self.code = code

    def _reply(self, ctx, *_):
        return CoderReply(plan="hostile", code=self.code)

    draft = improve = debug = _reply

    def review(self, ctx, node):
        return Review(is_bug=node.status != "ok", summary="", claimed_metric=0.99)


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): _sha(p) for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


class Listener:
    """A TCP server on 127.0.0.1 that counts the connections it accepts."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()
            except OSError:
                continue

    def close(self):
        self.stopped = True
        self.thread.join(2)
        self.sock.close()


@pytest.fixture()
def private_workspace(workspace, tmp_path):
    """A copy of the shared workspace this test may watch (and a later test may damage)."""
    from engine.data.agent_workspace import Workspace

    root = tmp_path / "ws"
    shutil.copytree(workspace.root, root, symlinks=True)
    return Workspace.open(root)


def test_a_hostile_pipeline_is_contained(private_workspace, tmp_path, monkeypatch):
    ws = private_workspace
    monkeypatch.setenv("OPENAI_API_KEY", FAKE_KEY)
    marker = f"befair-hostile-{uuid.uuid4().hex}"
    db = tmp_path / "db" / "befair.db"
    store = SessionStore(db)
    listener = Listener()
    host_tmp_probe = Path("/tmp") / marker
    labels = [Path(ws.validation_labels), Path(ws.test_labels)]
    before = {str(p): _sha(p) for p in labels}
    try:
        writer = start_session(store, SessionConfig(steps=2, num_drafts=2, step_timeout=60, data=str(ws.root)),
                               workspace=ws, coder=ScriptCoder(""))
        sid = writer.session_id
        run_dir = db.parent / "runs" / sid
        targets = {"labels": [str(p) for p in labels], "db": str(db), "home": os.path.expanduser("~"),
                   "host_tmp_probe": str(host_tmp_probe), "other_node": str(run_dir / "node_1"),
                   "key": FAKE_KEY, "port": listener.port}
        import json
        coder = ScriptCoder(THIEF.format(targets=json.dumps(targets), marker=marker))
        input_before = _tree_digest(run_dir / "input")
        state = run(store, sid, coder=coder, workspace=ws, writer=writer)
        # every act, as the pipeline saw it
        output = "".join(e.payload.get("text", "") + e.payload.get("output_head", "") + e.payload.get("output_tail", "")
                         for e in store.events(sid))
        for tag in ("FOUND-LABELS", "READ-DB", "FORGED-DB", "TAMPERED-LABELS", "WROTE-HOME", "WROTE-OTHER-NODE",
                    "WROTE-INPUT", "SECRET", "NETWORK"):
            assert f"{tag}:" not in output, f"the pipeline could do {tag}"
        # the host side
        assert {str(p): _sha(p) for p in labels} == before, "held-out labels changed"
        assert _tree_digest(run_dir / "input") == input_before, "the shared input changed"
        assert not (Path(os.path.expanduser("~")) / marker).exists()
        assert not host_tmp_probe.exists(), "the pipeline's /tmp is the host's"
        assert listener.accepted == 0, "the pipeline reached a server on the host"
        con = sqlite3.connect(db)
        assert con.execute("select count(*) from sqlite_master where name = 'pwned'").fetchone()[0] == 0
        assert con.execute("select count(*) from commands").fetchone()[0] == 0
        con.close()
        node1 = state.nodes[1]
        assert node1.status == "ok"
        assert node1.code == coder.code.replace(FAKE_KEY, "[redacted]"), "the key was stored with the code"
        assert (run_dir / "node_1" / "solution.py").read_text() == coder.code
        # measured on data it never saw: constant predictions, not the labels it hunted for
        for node in state.nodes.values():
            assert node.test and node.test.auc == pytest.approx(0.5)
        # nothing left running
        for _ in range(30):
            if not running_with(marker):
                break
            time.sleep(0.1)
        assert running_with(marker) == []
        # the key is nowhere in the database files
        store.close()
        for path in db.parent.glob("befair.db*"):
            assert FAKE_KEY.encode() not in path.read_bytes()
        assert state.status == "finished"
    finally:
        listener.close()
        store.close()
        host_tmp_probe.unlink(missing_ok=True)
        (Path(os.path.expanduser("~")) / marker).unlink(missing_ok=True)


def _node(tmp_path, code: str) -> Path:
    agent_input = tmp_path / "agent_input"
    (agent_input / "images").mkdir(parents=True)
    (agent_input / "skin_lesions.csv").write_text("image_name,skin_tone,label\nimage_1,3,benign\n")
    prepare_session_input(tmp_path / "runs", "S", agent_input)
    return prepare_node_dir(tmp_path / "runs", "S", 1, code)


def test_output_flood_is_collected_linearly_and_capped(tmp_path):
    node = _node(tmp_path, "import sys\nblock = ('x' * 1023 + '\\n') * 1024\n"
                           "for _ in range(300):\n    sys.stdout.write(block)\nprint('done')\n")
    ex = LocalExecutor(sandbox=Sandbox.create())
    res = ex.result(ex.submit(Job(node_id=1, workdir=node, timeout=120, output_cap=20_000)))
    assert res.status == "ok"
    assert res.output_chars == 300 * 1024 * 1024 + len("done\n")
    assert len(res.output_head) + len(res.output_tail) <= 20_000
    assert res.output_tail.endswith("done\n")
    assert f"{res.cut_chars:,} characters cut" in res.output


def test_endless_output_still_times_out(tmp_path):
    node = _node(tmp_path, "import sys\nwhile True:\n    sys.stdout.write('y' * 65536 + '\\n')\n")
    ex = LocalExecutor(sandbox=Sandbox.create())
    res = ex.result(ex.submit(Job(node_id=1, workdir=node, timeout=3, output_cap=10_000)))
    assert res.status == "timeout" and res.truncated


def test_memory_limit_holds_in_training_and_in_predict(tmp_path, workspace):
    from engine.evaluation.harness import evaluate

    hog = ("def hog():\n    x = bytearray(1536 * 1024 * 1024)\n    for i in range(0, len(x), 4096):\n"
           "        x[i] = 1\n    return x\n")
    node = _node(tmp_path, hog + "def predict(folder):\n    hog()\n    return {}\n"
                                 "if __name__ == '__main__':\n    hog()\n")
    ex = LocalExecutor(sandbox=Sandbox.create())
    res = ex.result(ex.submit(Job(node_id=1, workdir=node, timeout=60, memory_limit_mb=512)))
    assert res.status == "buggy" and res.exc_type == "out of memory (limit 512 MiB)"
    # no address-space limit: the watchdog alone must catch it (a GPU job has no RLIMIT_AS)
    res = ex.result(ex.submit(Job(node_id=1, workdir=node, timeout=60, memory_limit_mb=512, device="cuda")))
    assert res.status == "buggy" and res.out_of_memory and res.exc_type == "out of memory (limit 512 MiB)"
    out = evaluate(node, "solution.py", workspace.validation_images, workspace.validation_labels, timeout=60,
                   memory_limit_mb=512, sandbox=Sandbox.create())
    assert out.verdict == "out_of_memory" and out.reason == "out of memory (limit 512 MiB)"


def test_changed_labels_stop_the_session(private_workspace, tmp_path):
    ws = private_workspace
    store = SessionStore(tmp_path / "db" / "befair.db")
    code = ("import os\ndef predict(folder):\n    return {n: 0.5 for n in os.listdir(folder)}\n"
            "if __name__ == '__main__':\n    print('Validation AUROC: 0.5')\n")
    writer = start_session(store, SessionConfig(steps=3, num_drafts=3, step_timeout=60, data=str(ws.root)),
                           workspace=ws, coder=ScriptCoder(code))

    def tamper(event, state):
        if event.kind == "evaluated" and event.payload["node_id"] == 1 and event.payload["split"] == "test":
            with open(ws.test_labels, "a") as fh:
                fh.write("\n")

    from engine.errors import BefairError
    with pytest.raises(BefairError, match=str(ws.test_labels.resolve()).replace(".", r"\.")):
        run(store, writer.session_id, coder=ScriptCoder(code), workspace=ws, writer=writer, on_event=tamper)
    state = store.state(writer.session_id)
    assert state.status == "failed" and "changed since the session started" in state.finish_reason
    assert 2 in state.nodes and not state.nodes[2].test, "node 2 was scored against changed labels"
    store.close()
