"""Bad input, everywhere a user can give it: every file the CLI reads, fed hostile contents, ends in
one `befair: ...` line on stderr and a documented exit code (engine.errors), never a traceback,
and nothing already stored is lost.

Exit codes: 0 ok, 1 the work failed, 2 usage, 3 bad input data, 130 interrupted, 141 stdout closed.
"""
from __future__ import annotations

import csv
import hashlib
import itertools
import json
import os
import signal
import sqlite3
import struct
import subprocess
import sys
import time
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from befair_tui.cli import main
from engine.errors import EXIT_BROKEN_PIPE, BefairError, DatabaseError, DataError, SchemaTooNew, UsageError
from engine.paths import runs_dir
from tests.demo_session import write_demo_session
from engine.session.schema import MIGRATIONS, check_schema, known_schema_version
from engine.session.store import SessionStore, database_error

REPO = Path(__file__).resolve().parents[2]
# BEFAIR_FUZZ_EXAMPLES=500 for a longer hunt; 40 keeps this file under a minute.
FUZZ = settings(max_examples=int(os.environ.get("BEFAIR_FUZZ_EXAMPLES", "40")), deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
_counter = itertools.count()


# --------------------------------------------------------------------------- helpers


def cli(capsys, *argv) -> tuple[int, str, str]:
    """Run `befair ARGV` in this process: (exit code, stdout, stderr)."""
    capsys.readouterr()
    try:
        rc = main([str(a) for a in argv])
    except SystemExit as exc:  # argparse's own usage errors
        rc = exc.code if isinstance(exc.code, int) else 2
    out, err = capsys.readouterr()
    return rc, out, err


def assert_clean(rc: int, err: str, *, codes=(0, 1, 2, 3)) -> None:
    """No traceback; a documented code; when it failed, exactly one `befair: ` line."""
    assert "Traceback" not in err, err
    assert rc in codes, (rc, err)
    if rc != 0:
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("befair: "), err


def one_error(rc: int, err: str, code: int, *needles: str) -> str:
    assert_clean(rc, err)
    assert rc == code, (rc, err)
    for needle in needles:
        assert needle in err, (needle, err)
    return err.strip()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def snapshot(folder: Path) -> dict[str, str]:
    """Every file under `folder` with its hash: nothing may be added, removed or changed."""
    return {str(p.relative_to(folder)): digest(p) for p in sorted(folder.rglob("*")) if p.is_file()}


def png_header(width: int, height: int) -> bytes:
    """A PNG whose header claims width x height (PIL refuses it on open above its bomb limit)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 16)) + chunk(b"IEND", b"")


@pytest.fixture
def good_db(tmp_path) -> Path:
    path = tmp_path / "good" / "befair.db"
    store = SessionStore(path)
    write_demo_session(store, n_nodes=4)
    store.close()
    return path


@pytest.fixture(scope="module")
def synth(tmp_path_factory) -> Path:
    """A tiny SynthDerm (train: Fitzpatrick17k format, test: DDI format)."""
    out = tmp_path_factory.mktemp("synth") / "data"
    assert main(["data", "synth", "--out", str(out), "--n-train", "21", "--n-test", "18", "--size", "16"]) == 0
    return out


def _bad_databases(tmp: Path, good: Path) -> dict[str, Path]:
    tmp.mkdir(parents=True, exist_ok=True)
    made = {}
    made["text"] = tmp / "text.db"
    made["text"].write_text("session,status\nx,running\n" * 50)
    made["random"] = tmp / "random.db"
    made["random"].write_bytes(os.urandom(8192))
    made["sqlite-header-garbage"] = tmp / "garbled.db"
    made["sqlite-header-garbage"].write_bytes(b"SQLite format 3\x00" + os.urandom(8192))
    made["truncated"] = tmp / "truncated.db"
    data = good.read_bytes()
    made["truncated"].write_bytes(data[: len(data) // 3])
    made["foreign"] = tmp / "foreign.db"
    con = sqlite3.connect(made["foreign"])
    con.execute("create table sessions (a, b)")
    con.execute("insert into sessions values (1, 'not ours')")
    con.commit()
    con.close()
    made["folder"] = tmp / "folder.db"
    made["folder"].mkdir()
    return made


SESSION_COMMANDS = [
    ["sessions"], ["sessions", "--json"], ["show", "last"], ["show", "last", "--json"],
    ["steer", "last", "pause"], ["delete", "last", "--yes"], ["resume", "last"],
    ["baselines", "list"],
]


# --------------------------------------------------------------------------- 1. unusable databases


def test_every_session_command_on_an_unusable_database(tmp_path, good_db, capsys):
    bad = _bad_databases(tmp_path / "bad", good_db)
    before = snapshot(tmp_path / "bad")
    for db in bad.values():
        for argv in [*SESSION_COMMANDS, ["export", "last", "--out", tmp_path / "export"]]:
            rc, out, err = cli(capsys, *argv, "--db", db)
            one_error(rc, err, 3, str(db))
        rc, out, err = cli(capsys, "import-aide", tmp_path / "nothing.json", "--db", db)
        assert_clean(rc, err)
        assert rc == 3
    assert snapshot(tmp_path / "bad") == before  # nothing written into anybody's file
    assert not (tmp_path / "export").exists()


def test_messages_say_what_is_wrong(tmp_path, good_db, capsys):
    bad = _bad_databases(tmp_path / "bad", good_db)
    expect = {"text": "not a befair session database", "random": "not a befair session database",
              "sqlite-header-garbage": "not a befair session database", "truncated": "damaged",
              "foreign": "not a befair session database (its tables: sessions)", "folder": "is a folder"}
    for kind, db in bad.items():
        rc, _, err = cli(capsys, "sessions", "--db", db)
        one_error(rc, err, 3, expect[kind])


def test_missing_database_or_folder(tmp_path, capsys):
    db = tmp_path / "no" / "such" / "dir" / "befair.db"
    for argv in (["show", "last"], ["steer", "last", "stop"], ["export", "last", "--out", tmp_path / "x"],
                 ["delete", "last", "--yes"], ["resume", "last"]):
        rc, _, err = cli(capsys, *argv, "--db", db)
        one_error(rc, err, 3, "no session database at", str(db))
    rc, out, err = cli(capsys, "sessions", "--db", db)
    assert rc == 0 and "no sessions yet" in out
    assert not (tmp_path / "no").exists()  # reading commands create nothing


def test_database_folder_cannot_be_created(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    rc, _, err = cli(capsys, "import-aide", tmp_path / "j.json", "--db", blocker / "sub" / "befair.db")
    assert_clean(rc, err)
    assert rc == 3


def test_read_only_database(good_db, capsys, monkeypatch):
    """Opened read-only (as a read-only file or a read-only mount makes it), commands that
    write refuse it in one line (reading ones may work) and the file is untouched. Root ignores
    file modes, so the read-only connection is forced here; test_read_only_database_file_mode
    checks the file-mode case."""
    import engine.session.store.connection as store_mod

    real = sqlite3.connect

    def read_only(path, *a, **kw):
        if isinstance(path, (str, os.PathLike)) and not str(path).startswith("file:"):
            kw["uri"] = True
            path = f"{Path(path).resolve().as_uri()}?mode=ro"
        return real(path, *a, **kw)

    before = digest(good_db)
    monkeypatch.setattr(store_mod.sqlite3, "connect", read_only)
    for argv in SESSION_COMMANDS:
        rc, out, err = cli(capsys, *argv, "--db", good_db)
        if argv[0] in ("sessions", "show", "baselines") and rc == 0:
            assert "demo-0-4" in out or argv[0] == "baselines"  # reading may work on a read-only file
        elif argv[0] == "resume":
            one_error(rc, err, 2, "already finished")  # refused before it would write
        else:
            one_error(rc, err, 3, str(good_db), "read-only")
    monkeypatch.undo()
    assert digest(good_db) == before
    rc, out, _ = cli(capsys, "sessions", "--db", good_db)
    assert rc == 0 and "demo-0-4" in out


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes read-only files")
def test_read_only_database_file_mode(good_db, capsys):
    good_db.chmod(0o444)
    good_db.parent.chmod(0o555)
    try:
        rc, _, err = cli(capsys, "steer", "last", "pause", "--db", good_db)
        one_error(rc, err, 3, str(good_db))
    finally:
        good_db.parent.chmod(0o755)
        good_db.chmod(0o644)


def test_database_error_mapping(tmp_path):
    ro = tmp_path / "ro.db"
    sqlite3.connect(ro).close()
    con = sqlite3.connect(f"{ro.as_uri()}?mode=ro", uri=True)
    with pytest.raises(sqlite3.OperationalError) as info:
        con.execute("create table t (a)")
    err = database_error(info.value, ro)
    assert isinstance(err, DatabaseError) and err.exit_code == 3 and "read-only" in str(err) and str(ro) in str(err)
    assert database_error(sqlite3.OperationalError("database is locked"), ro).exit_code == 1


# --------------------------------------------------------------------------- 2. newer schema


def _add_migration(db: Path, name: str) -> None:
    con = sqlite3.connect(db)
    con.execute("insert into migrations (name, applied_at) values (?, 0)", [name])
    con.commit()
    con.close()


def test_a_database_from_a_newer_befair_is_refused(good_db, capsys):
    ours = known_schema_version()
    assert ours == max(int(name.split("_")[0]) for name, _ in MIGRATIONS)
    _add_migration(good_db, f"{ours + 1:03d}_from_the_future")
    before = digest(good_db)
    for argv in [*SESSION_COMMANDS, ["import-aide", good_db.parent / "j.json"]]:
        rc, _, err = cli(capsys, *argv, "--db", good_db)
        one_error(rc, err, 3, str(good_db), f"newer befair (schema {ours + 1}; this version knows up to {ours})")
    assert digest(good_db) == before
    with pytest.raises(SchemaTooNew):
        SessionStore(good_db)


def test_unknown_unnumbered_migration_and_foreign_migrations(tmp_path, good_db):
    _add_migration(good_db, "zzz_branch")
    with pytest.raises(SchemaTooNew, match="zzz_branch"):
        SessionStore(good_db)
    other = tmp_path / "other.db"
    con = sqlite3.connect(other)
    con.execute("create table migrations (name text)")
    con.execute("insert into migrations values ('0001_django')")
    con.commit()
    with pytest.raises(DatabaseError, match="not a befair session database"):
        check_schema(con, other)
    con.close()


def test_current_and_empty_databases_open(tmp_path, good_db):
    SessionStore(good_db).close()
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    store = SessionStore(empty)
    assert store.sessions() == []


# --------------------------------------------------------------------------- 3. flag values


@pytest.mark.parametrize("flags, needle", [
    (["--steps", "0"], "--steps"), (["--steps", "-3"], "--steps"),
    (["--failure-rate", "1.5"], "--failure-rate"), (["--debug-prob", "-0.1"], "--debug-prob"),
    (["--step-timeout", "0"], "--step-timeout"), (["--step-timeout", "nan"], "--step-timeout"),
    (["--num-drafts", "0"], "--num-drafts"), (["--memory-limit", "-1"], "--memory-limit"),
    (["--synth-n-train", "0"], "--synth-n-train"),
])
def test_run_rejects_bad_flag_values(tmp_path, capsys, flags, needle):
    db = tmp_path / "run.db"
    for mode in (["--headless"], []):  # the console path validates the same way, before opening anything
        rc, _, err = cli(capsys, "run", *mode, *flags, "--db", db)
        one_error(rc, err, 2, needle)
    assert not db.exists()


def test_argparse_usage_errors_are_code_2(capsys):
    rc, _, err = cli(capsys, "run", "--headless", "--steps", "many")
    assert rc == 2 and "Traceback" not in err


# --------------------------------------------------------------------------- 4. labels with empty cells


def _ddi(tmp: Path, rows: list[list[str]]) -> Path:
    path = tmp / f"meta-{next(_counter)}.csv"
    with path.open("w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["", "DDI_ID", "DDI_file", "skin_tone", "malignant", "disease"])
        for i, r in enumerate(rows):
            w.writerow([i, i + 1, *r, "x"])
    return path


def _preds(tmp: Path, names=("a.png", "b.png", "c.png")) -> Path:
    path = tmp / f"pred-{next(_counter)}.csv"
    path.write_text("DDI_file,predicted_probability\n" + "".join(f"{n},0.{i + 1}\n" for i, n in enumerate(names)))
    return path


@pytest.mark.parametrize("rows, needles", [
    ([["a.png", "12", "True"], ["b.png", "", "False"], ["c.png", "56", "True"]], ["empty skin_tone", "line 3"]),
    ([["a.png", "12", "True"], ["b.png", "34", ""], ["c.png", "56", "True"]], ["malignant", "line 3"]),
    ([["a.png", "12", "True"], ["", "34", "False"], ["c.png", "56", "True"]], ["empty DDI_file", "line 3"]),
    ([["a.png", "7", "True"], ["b.png", "34", "False"], ["c.png", "1e400", "True"]], ["skin_tone", "lines 2, 4"]),
    ([["a.png", "12", "maybe"], ["b.png", "34", "False"], ["c.png", "56", "True"]], ["'maybe'", "line 2"]),
    ([["a.png", "12", "True"], ["a.png", "34", "False"], ["c.png", "56", "True"]], ["duplicate", "line 3"]),
])
def test_score_names_file_and_line_of_a_bad_label_cell(tmp_path, capsys, rows, needles):
    meta = _ddi(tmp_path, rows)
    rc, _, err = cli(capsys, "score", "--predictions", _preds(tmp_path), "--metadata", meta)
    one_error(rc, err, 3, str(meta), *needles)


def test_load_labels_reads_text_labels_and_keeps_good_rows(tmp_path):
    from engine.evaluation.heldout import load_labels

    meta = _ddi(tmp_path, [["a.png", "12", "True"], ["b.png", "34", "false"], ["c.png", "56.0", "1"]])
    out = load_labels(meta)
    assert out.to_dict("list") == {"file": ["a.png", "b.png", "c.png"], "label": [1, 0, 1],
                                   "group": ["group_0", "group_1", "group_2"]}
    ws = tmp_path / "ws.csv"
    ws.write_text("file,label,group\na.png,1,group_0\nb.png,0,\n")
    with pytest.raises(DataError, match=r"empty group cell on line 3"):
        load_labels(ws)


# --------------------------------------------------------------------------- 5. oversized images


def test_oversized_image_is_a_data_error_naming_the_file(tmp_path, synth, capsys):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(synth, data)
    victim = sorted((data / "train" / "images").iterdir())[0]
    victim.write_bytes(png_header(30_000, 30_000))
    rc, _, err = cli(capsys, "data", "prepare", "--fitzpatrick", data / "train" / "fitzpatrick17k.csv",
                     "--images", data / "train" / "images", "--out", tmp_path / "ws")
    one_error(rc, err, 3, victim.name, "too large")
    test_victim = sorted((data / "test" / "images").iterdir())[0]
    test_victim.write_bytes(png_header(40_000, 40_000))
    rc, _, err = cli(capsys, "data", "prepare", "--fitzpatrick", synth / "train" / "fitzpatrick17k.csv",
                     "--images", synth / "train" / "images", "--out", tmp_path / "ws2",
                     "--ddi", data / "test" / "ddi_metadata.csv", "--ddi-images", data / "test" / "images")
    one_error(rc, err, 3, test_victim.name, "too large")


def test_oversized_image_in_hashing_and_batch_decoding(tmp_path):
    from engine.data.cleaning import hash_images
    from engine.data.common import find_unreadable_image

    bomb = tmp_path / "imgs" / "big.jpg"
    bomb.parent.mkdir()
    bomb.write_bytes(png_header(30_000, 30_000))
    with pytest.raises(DataError, match=r"big\.jpg is too large"):
        hash_images([bomb])
    found = find_unreadable_image([tmp_path])
    assert found is not None and found[0] == bomb
    from befair_tui.cli.baselines import _image_failure

    err = _image_failure(RuntimeError("decoder"), [tmp_path])
    assert isinstance(err, DataError) and "big.jpg" in str(err)


# --------------------------------------------------------------------------- 6. journals


@pytest.mark.parametrize("content, needle", [
    (b"\xff\xfe\x00\x81garbage\x90", "not UTF-8"),
    (b"{not json", "not JSON"),
    (b'{"nodes": 5}', "not a list"),
    (b'"a string"', "not an AIDE journal"),
    (b"[]", "holds no nodes"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"nodes": [{"id": "a", "step": 1, "ctime": 1}], "node2parent": {"a": "a"}}', None),
])
def test_import_aide_of_a_bad_journal(tmp_path, good_db, capsys, content, needle):
    journal = tmp_path / "journal.json"
    journal.write_bytes(content)
    before = [s["id"] for s in SessionStore(good_db).sessions()]
    rc, _, err = cli(capsys, "import-aide", journal, "--db", good_db)
    if needle is None:
        assert_clean(rc, err)
    else:
        one_error(rc, err, 3, str(journal), needle)
        assert [s["id"] for s in SessionStore(good_db).sessions()] == before  # nothing half-imported


def test_a_bad_aide_config_is_a_data_error(tmp_path, good_db, capsys):
    journal = tmp_path / "journal.json"
    journal.write_text(json.dumps({"nodes": [{"id": "a", "step": 0, "code": "x = 1"}]}))
    (tmp_path / "config.yaml").write_text("exec:\n  timeout: soon\n")
    rc, _, err = cli(capsys, "import-aide", journal, "--db", good_db)
    one_error(rc, err, 3, str(journal))
    assert [s["id"] for s in SessionStore(good_db).sessions()] == ["demo-0-4"]


def test_a_node_failing_mid_import_leaves_no_half_import(tmp_path, good_db, capsys, monkeypatch):
    import engine.imports.aide as aide

    journal = tmp_path / "journal.json"
    journal.write_text(json.dumps({"nodes": [{"id": "a", "step": 0, "code": "x = 1"},
                                             {"id": "b", "step": 1, "code": "y = 2"}]}))

    def odd_node(*args, **kwargs):
        raise ValueError("a node of an unexpected shape")

    monkeypatch.setattr(aide, "_audit", odd_node)  # fails after the session row and a node exist
    rc, _, err = cli(capsys, "import-aide", journal, "--db", good_db)
    one_error(rc, err, 3, str(journal), "unexpected shape")
    store = SessionStore(good_db)
    assert [s["id"] for s in store.sessions()] == ["demo-0-4"]
    assert store.db.execute("select count(*) from events where session_id != 'demo-0-4'").fetchone()[0] == 0


# --------------------------------------------------------------------------- 7. closed stdout


def _befair(*argv, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "befair_tui.cli", *map(str, argv)], cwd=REPO,
                            stderr=subprocess.PIPE, **kw)


@pytest.mark.parametrize("argv", [["sessions"], ["sessions", "--json"], ["show", "last"]])
def test_closed_stdout_is_quiet(good_db, argv):
    proc = _befair(*argv, "--db", good_db, stdout=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before anything is written
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == EXIT_BROKEN_PIPE, err
    assert err.decode() == ""


def test_pipe_into_head(tmp_path):
    db = tmp_path / "many.db"
    store = SessionStore(db)
    for i in range(40):
        write_demo_session(store, n_nodes=1, seed=i, ts0=1_700_000_000.0 + i)
    store.close()
    done = subprocess.run(["bash", "-o", "pipefail", "-c",
                           f"{sys.executable} -m befair_tui.cli sessions --db {db} | head -1"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.stdout.startswith("session") and done.stderr == ""
    assert done.returncode in (0, EXIT_BROKEN_PIPE)


# --------------------------------------------------------------------------- 8. deleting a running session


def _wait(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the runner ended early ({proc.returncode}): {proc.stderr.read()[-3000:]}")
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_deleting_a_running_session_stops_it_first(tmp_path, capsys):
    db = tmp_path / "live" / "befair.db"
    env = dict(os.environ, BEFAIR_HOME=str(tmp_path / "home"))
    proc = subprocess.Popen(
        [sys.executable, "-m", "befair_tui.cli", "run", "--headless", "--quiet", "--steps", "50", "--db", str(db),
         "--synth-n-train", "300", "--synth-n-test", "120", "--synth-size", "32",
         "--session-id", "live-one"],
        cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    run_dir = runs_dir(db) / "live-one"
    outside = tmp_path / "outside.txt"
    outside.write_text("keep me")
    try:
        def running():
            if not db.exists() or not run_dir.is_dir():
                return False
            con = sqlite3.connect(db)
            try:
                row = con.execute("select status from sessions where id = 'live-one'").fetchone()
                started = con.execute("select count(*) from events where session_id = 'live-one' "
                                      "and kind = 'exec_started'").fetchone()[0]
            except sqlite3.Error:
                return False
            finally:
                con.close()
            return row is not None and row[0] == "running" and started > 0

        _wait(running, 240, "the session to run a node", proc)
        # hostile bits in the run folder: a read-only folder and file, a link to a file outside
        ro = run_dir / "locked"
        ro.mkdir()
        (ro / "file.txt").write_text("x")
        (ro / "file.txt").chmod(0o444)
        (run_dir / "link-out").symlink_to(outside)
        ro.chmod(0o555)

        rc, out, err = cli(capsys, "delete", "live-one", "--yes", "--db", db)
        assert rc == 0, err
        assert "Traceback" not in err and "deleted live-one" in out
        assert f"stopped its runner (process {proc.pid})" in err  # it was running, and was stopped first
        # a clean stop: the stop command (0) or the SIGTERM (130, interrupted) reached it first
        assert proc.wait(timeout=60) in (0, 130)
        assert "Traceback" not in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
    con = sqlite3.connect(db)
    for table in ("sessions", "events", "nodes", "commands"):
        column = "id" if table == "sessions" else "session_id"
        assert con.execute(f"select count(*) from {table} where {column} = 'live-one'").fetchone()[0] == 0, table
    con.close()
    assert not run_dir.exists() and outside.read_text() == "keep me"


def test_delete_needs_yes_and_removes_the_run_folder(good_db, capsys):
    run_dir = runs_dir(good_db) / "demo-0-4"
    (run_dir / "input").mkdir(parents=True)
    (run_dir / "input" / "a.csv").write_text("x")
    (run_dir / "input" / "a.csv").chmod(0o444)
    (run_dir / "input").chmod(0o555)
    rc, _, err = cli(capsys, "delete", "demo-0-4", "--db", good_db)
    one_error(rc, err, 2, "--yes")
    assert run_dir.exists()
    rc, out, err = cli(capsys, "delete", "demo-0-4", "--yes", "--db", good_db)
    assert rc == 0 and not run_dir.exists() and SessionStore(good_db).sessions() == []


def test_delete_of_a_session_whose_runner_died(tmp_path, capsys):
    db = tmp_path / "dead.db"
    store = SessionStore(db)
    write_demo_session(store, n_nodes=3, finished=False)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    store.db.conn.execute("update sessions set pid = ?", [dead.pid])
    store.close()
    started = time.monotonic()
    rc, out, err = cli(capsys, "delete", "demo-0-3-live", "--yes", "--db", db)
    assert rc == 0, err
    assert time.monotonic() - started < 10
    assert SessionStore(db).sessions() == []


def test_remove_run_dir_never_leaves_its_folder(tmp_path):
    from engine.session.runner_control import remove_run_dir

    root = tmp_path / "runs"
    root.mkdir()
    (tmp_path / "precious").mkdir()
    for sid in ("..", ".", "", "../precious", "a/b"):
        assert remove_run_dir(root, sid) is None
    assert (tmp_path / "precious").is_dir()
    (root / "linked").symlink_to(tmp_path / "precious")
    assert remove_run_dir(root, "linked") == root / "linked"
    assert (tmp_path / "precious").is_dir() and not (root / "linked").exists()


# --------------------------------------------------------------------------- 9. resume of a finished session


def test_resume_of_a_finished_session(good_db, capsys):
    before = SessionStore(good_db).last_seq("demo-0-4")
    rc, _, err = cli(capsys, "resume", "demo-0-4", "--db", good_db)
    one_error(rc, err, 2, "session demo-0-4 already finished (finished", "nothing to resume")
    assert SessionStore(good_db).last_seq("demo-0-4") == before


def test_a_raised_budget_lets_a_finished_session_resume(good_db):
    from befair_tui.cli.run import _budget_raised

    store = SessionStore(good_db)
    state = store.state("demo-0-4")
    assert not _budget_raised(store, "demo-0-4", state)
    store.issue_command("demo-0-4", "set_budget", {"steps": state.agent_steps + 3})
    assert _budget_raised(store, "demo-0-4", state)


def test_resume_of_an_imported_session_is_refused(tmp_path, good_db, capsys):
    journal = tmp_path / "journal.json"
    journal.write_text(json.dumps({"nodes": [{"id": "a", "step": 0, "code": "x = 1"}]}))
    rc, out, err = cli(capsys, "import-aide", journal, "--json", "--db", good_db)
    assert rc == 0, err
    sid = json.loads(out)["session_id"]
    rc, _, err = cli(capsys, "resume", sid, "--db", good_db)
    one_error(rc, err, 2, "imported")


# --------------------------------------------------------------------------- 10. UNSANDBOXED everywhere


@pytest.fixture
def trust_db(tmp_path) -> Path:
    db = tmp_path / "trust.db"
    store = SessionStore(db)
    # legacy: recorded before the sandbox existed (no `sandbox` setting): it ran without one
    for sid, mode in (("boxed", "bwrap"), ("open", "none"), ("legacy", None)):
        write_demo_session(store, n_nodes=3, session_id=sid)
        config = json.loads(store.session(sid)["config"])
        config.pop("sandbox", None)
        events = store.events(sid)
        payload = {**events[0].payload, "config": dict(config)}
        if mode is not None:
            config["sandbox"] = payload["config"]["sandbox"] = mode
        store.db.conn.execute("update sessions set config = ? where id = ?", [json.dumps(config), sid])
        store.db.conn.execute("update events set payload = ? where session_id = ? and seq = 1",
                              [json.dumps(payload), sid])
    journal = tmp_path / "journal.json"
    journal.write_text(json.dumps({"nodes": [{"id": "a", "step": 0, "code": "x = 1"}]}))
    from engine.imports.aide import import_aide

    import_aide(store, journal)
    store.close()
    return db


def _imported_id(db: Path) -> str:
    return next(s["id"] for s in SessionStore(db).sessions() if s["origin"] == "import")


def test_unsandboxed_in_session_listings(trust_db, capsys):
    imported = _imported_id(trust_db)
    rc, out, _ = cli(capsys, "sessions", "--db", trust_db)
    assert rc == 0
    lines = {line.split()[0]: line for line in out.splitlines()
             if line and not line.startswith(("session", "UNSANDBOXED"))}
    assert "UNSANDBOXED" in lines["open"] and "UNSANDBOXED" in lines["legacy"]
    assert "UNSANDBOXED" not in lines["boxed"] and "UNSANDBOXED" not in lines[imported]
    assert "UNSANDBOXED: agent code ran on this machine without the sandbox" in out
    rc, out, _ = cli(capsys, "sessions", "--json", "--db", trust_db)
    rows = {r["id"]: (r["sandbox"], r["unsandboxed"]) for r in json.loads(out)}
    assert rows == {"open": ("none", True), "legacy": ("none", True), "boxed": ("bwrap", False),
                    imported: ("imported", False)}


def test_unsandboxed_in_show_and_export(trust_db, tmp_path, capsys):
    imported = _imported_id(trust_db)
    for sid, mode, marked in (("open", "none", True), ("boxed", "bwrap", False), (imported, "imported", False)):
        rc, out, _ = cli(capsys, "show", sid, "--db", trust_db)
        assert rc == 0 and (("UNSANDBOXED" in out.splitlines()[0]) is marked)
        rc, out, _ = cli(capsys, "show", sid, "--json", "--db", trust_db)
        data = json.loads(out)
        assert (data["sandbox"], data["unsandboxed"]) == (mode, marked)
        dest = tmp_path / f"export-{sid}"
        rc, _, err = cli(capsys, "export", sid, "--out", dest, "--db", trust_db)
        assert rc == 0, err
        tree = json.loads((dest / "tree.json").read_text())
        assert (tree["sandbox"], tree["unsandboxed"]) == (mode, marked)
        with (dest / "nodes.csv").open() as fh:
            rows = list(csv.DictReader(fh))
        assert rows and all((r["sandbox"], r["unsandboxed"]) == (mode, str(int(marked))) for r in rows)
        if (dest / "solution.py").exists():
            assert ("UNSANDBOXED" in (dest / "solution.py").read_text()) is marked


# --------------------------------------------------------------------------- the error hierarchy


def test_exit_codes_of_the_error_kinds():
    assert (BefairError.exit_code, UsageError.exit_code, DataError.exit_code, DatabaseError.exit_code) == (2, 2, 3, 3)
    assert issubclass(SchemaTooNew, DataError)


# --------------------------------------------------------------------------- fuzzing the file inputs

PRED_HEADER = "DDI_file,predicted_probability"
DDI_HEADER = ",DDI_ID,DDI_file,skin_tone,malignant,disease"
WS_HEADER = "file,label,group"
FITZ_HEADER = ("md5hash,fitzpatrick_scale,fitzpatrick_centaur,label,nine_partition_label,three_partition_label,"
               "qc,url,url_alphanum")
HEADERS = [PRED_HEADER, DDI_HEADER, WS_HEADER, FITZ_HEADER, "a,b,c", "", "DDI_file", "\ufeffDDI_file,skin_tone"]
CELLS = st.one_of(
    st.sampled_from(["", " ", "12", "34", "56", "-1", "0", "1", "True", "False", "nan", "inf", "-inf", "1e400",
                     "9" * 40, "-0", "0.5", "a.png", "000001.png", "malignant", "benign", "non-neoplastic",
                     '"', '""', "\"a,b\"", "\\", "\x00", "é", "\u202e", "NULL", "None", "[]", "{}"]),
    st.text(max_size=12),
    st.integers(min_value=-(10 ** 30), max_value=10 ** 30).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)


@st.composite
def csv_bytes(draw) -> bytes:
    header = draw(st.sampled_from(HEADERS))
    width = max(1, header.count(",") + 1) + draw(st.integers(-1, 1))
    rows = draw(st.lists(st.lists(CELLS, min_size=max(0, width), max_size=max(0, width)), max_size=8))
    text = "\n".join([header, *(",".join(r) for r in rows)])
    data = text.encode("utf-8", "surrogatepass")
    mangle = draw(st.sampled_from(["none", "truncate", "latin1", "bytes", "crlf"]))
    if mangle == "truncate" and data:
        data = data[: draw(st.integers(0, len(data)))]
    elif mangle == "latin1":
        data = text.encode("latin-1", "replace") + b"\xe9\xff"
    elif mangle == "bytes":
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=16)) + data[at:]
    elif mangle == "crlf":
        data = data.replace(b"\n", b"\r\n")
    return data


JSON = st.deferred(lambda: st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
                   | st.lists(JSON, max_size=3) | st.dictionaries(st.text(max_size=6), JSON, max_size=3))
AIDE_KEYS = ["id", "step", "ctime", "parent", "code", "plan", "metric", "is_buggy", "exc_type", "_term_out",
             "exec_time", "analysis"]


@st.composite
def journal_bytes(draw) -> bytes:
    kind = draw(st.sampled_from(["bytes", "json", "nodes", "csv"]))
    if kind == "bytes":
        return draw(st.binary(max_size=512))
    if kind == "csv":
        return draw(csv_bytes())
    if kind == "json":
        return json.dumps(draw(JSON)).encode()
    node = st.dictionaries(st.sampled_from(AIDE_KEYS), JSON, max_size=8)
    doc = {"nodes": draw(st.one_of(st.lists(node, max_size=5), JSON)),
           "node2parent": draw(st.one_of(st.dictionaries(st.text(max_size=3), JSON, max_size=3), JSON))}
    return json.dumps(doc).encode()


@st.composite
def database_file(draw, folder: Path) -> Path:
    path = folder / f"fuzz-{next(_counter)}.db"
    kind = draw(st.sampled_from(["bytes", "sqlite-header", "foreign", "csv", "empty"]))
    if kind == "bytes":
        path.write_bytes(draw(st.binary(min_size=1, max_size=4096)))
    elif kind == "sqlite-header":
        path.write_bytes(b"SQLite format 3\x00" + draw(st.binary(max_size=4096)))
    elif kind == "csv":
        path.write_bytes(draw(csv_bytes()))
    elif kind == "empty":
        path.write_bytes(b"")
    else:
        con = sqlite3.connect(path)
        names = draw(st.lists(st.sampled_from(["sessions", "migrations", "events", "nodes", "commands", "t", "x_1"]),
                              min_size=1, max_size=4, unique=True))
        for name in names:
            cols = draw(st.lists(st.sampled_from(["id", "name", "session_id", "a", "status"]), min_size=1,
                                 max_size=3, unique=True))
            con.execute(f"create table {name} ({', '.join(cols)})")
            for _ in range(draw(st.integers(0, 2))):
                con.execute(f"insert into {name} values ({', '.join('?' * len(cols))})",
                            [draw(st.sampled_from(["001_initial", "999_future", "x", None, 7]))
                             for _ in cols])
        con.commit()
        con.close()
    return path


def _fresh_folder(tmp_path: Path) -> Path:
    folder = tmp_path / f"ex-{next(_counter)}"
    folder.mkdir()
    return folder


@FUZZ
@given(pred=csv_bytes(), meta=csv_bytes(), which=st.sampled_from(["pred", "meta", "both"]))
def test_fuzz_score(tmp_path, synth, capsys, pred, meta, which):
    folder = _fresh_folder(tmp_path)
    p, m = folder / "pred.csv", folder / "meta.csv"
    p.write_bytes(pred)
    m.write_bytes(meta)
    good_meta = synth / "test" / "ddi_metadata.csv"
    argv = {"pred": ["--predictions", p, "--metadata", good_meta], "meta": ["--predictions", p, "--metadata", m],
            "both": ["--predictions", p, "--metadata", m]}[which]
    rc, _, err = cli(capsys, "score", *argv)
    assert_clean(rc, err)


@FUZZ
@given(data=st.data(), command=st.sampled_from([["sessions"], ["sessions", "--json"], ["show", "last"],
                                                ["show", "last", "--json"], ["steer", "last", "stop"]]))
def test_fuzz_session_database(tmp_path, capsys, data, command):
    folder = _fresh_folder(tmp_path)
    db = data.draw(database_file(folder))
    rc, _, err = cli(capsys, *command, "--db", db)
    assert_clean(rc, err)


@FUZZ
@given(content=journal_bytes())
def test_fuzz_import_aide(tmp_path, capsys, content):
    folder = _fresh_folder(tmp_path)
    db = folder / "befair.db"
    store = SessionStore(db)
    write_demo_session(store, n_nodes=2)
    before = store.events("demo-0-2")
    store.close()
    journal = folder / "journal.json"
    journal.write_bytes(content)
    rc, out, err = cli(capsys, "import-aide", journal, "--db", db)
    assert_clean(rc, err)
    store = SessionStore(db)
    assert store.events("demo-0-2") == before  # what was stored stays
    ids = {s["id"] for s in store.sessions()}
    assert (ids == {"demo-0-2"}) if rc != 0 else (len(ids) == 2)  # a failed import leaves nothing behind
    store.close()


@FUZZ
@given(fitz=csv_bytes(), ddi=csv_bytes(), which=st.sampled_from(["fitz", "ddi"]))
def test_fuzz_data_prepare(tmp_path, synth, capsys, fitz, ddi, which):
    folder = _fresh_folder(tmp_path)
    f, d = folder / "fitz.csv", folder / "ddi.csv"
    f.write_bytes(fitz)
    d.write_bytes(ddi)
    if which == "fitz":
        argv = ["--fitzpatrick", f, "--images", synth / "train" / "images"]
    else:
        argv = ["--fitzpatrick", synth / "train" / "fitzpatrick17k.csv", "--images", synth / "train" / "images",
                "--ddi", d, "--ddi-images", synth / "test" / "images"]
    rc, _, err = cli(capsys, "data", "prepare", *argv, "--out", folder / "ws")
    assert_clean(rc, err)


def test_version_and_json_errors(capsys, tmp_path):
    import json as _json

    from befair_tui.cli import main

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.startswith("befair ")
    db = tmp_path / "b.db"
    from engine.session.store import SessionStore

    SessionStore(db).close()
    code = main(["show", "no-such-session", "--json", "--db", str(db)])
    out, err = capsys.readouterr()
    answer = _json.loads(out)
    assert code == answer["exit_code"] != 0 and "no-such-session" in answer["error"]
    assert err.startswith("befair: ") and "Traceback" not in err


def test_the_be_fair_protocol_from_the_command_line(tmp_path):
    from befair_tui.cli import build_parser
    from befair_tui.cli.run import validate_run_args

    def config(*argv):
        return validate_run_args(build_parser().parse_args(["run", "--headless", "--db", str(tmp_path / "b.db"),
                                                           *argv]))

    study = config("--protocol", "be-fair", "--coder", "openai", "--model", "m")
    assert (study.protocol, study.best, study.blind_test) == ("be-fair", "claimed", True)
    assert (config().protocol, config().best) == ("befair", "validation")  # the default at every level
    with pytest.raises(UsageError, match="offline coder"):
        config("--protocol", "be-fair")
    with pytest.raises(BefairError, match="best must be 'claimed'"):
        config("--protocol", "be-fair", "--coder", "openai", "--best", "minimax")
