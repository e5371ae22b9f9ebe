"""Opening a session database for a command, and ending a session for good: stopping its
runner (wherever it runs) and removing its run folder. Used by `befair delete`, `befair resume`
and the console's sessions screen."""
from __future__ import annotations

import os
import shutil
import signal
import stat
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import DataError, WorkError
from engine.session.heartbeat import STALE_AFTER, pid_alive, runner_status

if TYPE_CHECKING:
    from engine.session.store import SessionStore


def open_store(path: Path, *, must_exist: bool = True) -> SessionStore:
    """The SessionStore at `path`; a DataError (exit 3) naming the file when there is none (a
    command that only reads must not create a database) or it cannot be used."""
    from engine.session.store import SessionStore

    path = Path(path)
    if must_exist and not path.exists():
        raise DataError(f"no session database at {path} (use --db or $BEFAIR_DB)")
    return SessionStore(path)



def _looks_like_befair(pid: int) -> bool:
    """Whether process `pid` is a befair runner (its command line names befair or the engine), so
    a recycled pid is never signalled. Where /proc is missing, trust the recorded pid."""
    try:
        cmdline = Path(f"/proc/{int(pid)}/cmdline").read_bytes()
    except FileNotFoundError:
        return not Path("/proc/self").exists()
    except OSError:
        return False
    return b"befair" in cmdline or b"engine." in cmdline


def stop_runner(store: SessionStore, session_id: str, *, timeout: float = 20.0, poll: float = 0.1) -> str | None:
    """Stop the session's runner if one is alive, before its rows are deleted: a stop command
    (interrupting the running node) for a runner anywhere, and SIGTERM to its recorded process
    when that is a befair process on this machine (a headless runner treats SIGTERM like Ctrl-C:
    it interrupts the node and records session_finished). Waits up to `timeout` s for the runner to
    end; WorkError (nothing deleted) when it does not. Returns what was done, or None."""
    row = store.session(session_id)
    if runner_status(row) != "alive":
        return None  # ended, or its runner is dead (a pid it recorded may belong to another process now)
    pid = row.get("pid")
    try:
        pid = int(pid) if pid is not None else None
    except (TypeError, ValueError):
        pid = None
    if pid == os.getpid() and not _fresh_heartbeat(row):
        return None  # recorded by this very process, and no runner thread of ours beats for it
    local = pid is not None and pid != os.getpid() and pid_alive(pid) is True and _looks_like_befair(pid)
    store.issue_command(session_id, "stop", {"interrupt": True}, by="delete")
    if local and pid is not None:  # local implies a pid
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            pass
    deadline = time.monotonic() + timeout
    while True:
        row = store.session(session_id)
        proc_gone = not local or pid_alive(pid) is not True
        if proc_gone and runner_status(row) != "alive":
            return f"stopped its runner{f' (process {pid})' if local else ''}"
        if time.monotonic() >= deadline:
            raise WorkError(
                f"session {session_id} is still running{f' (process {pid})' if pid else ''} and did not stop "
                f"within {timeout:g} s; nothing was deleted. Stop it (befair steer {session_id} stop"
                f"{f', or kill {pid}' if local else ''}) and try again")
        time.sleep(poll)


def _fresh_heartbeat(row: dict[str, Any]) -> bool:

    try:
        beat: Any = row.get("heartbeat_at")  # None (never beat) raises TypeError below
        return time.time() - float(beat) <= STALE_AFTER
    except (TypeError, ValueError):
        return False


def _safe_component(name: str) -> bool:
    return bool(name) and name not in (".", "..") and "/" not in name and "\\" not in name \
        and "\0" not in name and (os.altsep is None or os.altsep not in name)


def remove_run_dir(runs_root: Path, session_id: str) -> Path | None:
    """Remove the session's run folder (runs_root/<session_id>): read-only files and folders are
    made writable first (the input copy is read-only); symbolic links are removed, never
    followed. Returns the folder removed, or None when there was none."""
    if not _safe_component(session_id):
        return None
    target = Path(runs_root) / session_id
    if target.is_symlink():
        target.unlink()
        return target
    if not target.is_dir():
        return None
    _make_removable(target)
    shutil.rmtree(target)
    return target


def _make_removable(top: Path) -> None:
    def writable(p: str, extra: int) -> None:
        try:
            st = os.lstat(p)
            if not stat.S_ISLNK(st.st_mode) and (st.st_mode & extra) != extra:
                os.chmod(p, stat.S_IMODE(st.st_mode) | extra)
        except OSError:
            pass

    writable(str(top), stat.S_IRWXU)
    for dirpath, dirnames, filenames in os.walk(top, topdown=True, followlinks=False):
        for name in dirnames:
            writable(os.path.join(dirpath, name), stat.S_IRWXU)
        for name in filenames:
            writable(os.path.join(dirpath, name), stat.S_IWUSR)


