"""Is a session's runner still alive? A heartbeat the runner writes, and the reading of it.

The runner (`befair run --headless`, `Runner.run`) holds a `Heartbeat` for as long as its search
loop runs: a daemon thread that, every second, writes `sessions.heartbeat_at = time.time()` on
its own SQLite connection (one connection per thread; WAL lets it write between the runner's
transactions). A process killed with SIGKILL cannot say it is gone, so readers (the console,
`befair sessions`) decide from the row:

- the session's status says it ended (finished / stopped / failed)  -> "finished"
- its heartbeat is fresh (younger than `stale_after` seconds)        -> "alive"
- otherwise the recorded pid decides, on this machine only           -> "alive" or "stopped"

The heartbeat age works across processes; the pid check only works on the machine that ran the
session. Sessions recorded before the heartbeat existed (heartbeat_at NULL) rely on the pid.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Literal, Protocol
from collections.abc import Callable, Mapping
from types import TracebackType

from engine.session.store.heartbeat import HeartbeatConnection
from engine.session.state import ENDED

RunnerStatus = Literal["alive", "stopped", "finished"]

INTERVAL = 1.0        # seconds between beats
STALE_AFTER = 3.0     # a heartbeat older than this is a dead (or frozen) runner
BUSY_TIMEOUT_MS = 2_000
# A runner's last event lands at most about one interval after its last beat; an event later
# than this after the last beat was written by another process (a resume taking over).
TAKEOVER_MARGIN = 1.5 * INTERVAL


class LivenessSource(Protocol):
    """What runner_status reads of the store (engine.session.store.SessionStore)."""

    def liveness_row(self, session_id: str) -> dict[str, Any]: ...


class Heartbeat:
    """`with Heartbeat(db_path, session_id): ...` keeps `sessions.heartbeat_at` fresh.

    Never raises out of its thread: a failed beat (database locked, disk full, no such column in
    an old database) is counted in `failures` / `last_error` and retried on the next beat.
    """

    def __init__(self, db_path: str | os.PathLike[str], session_id: str, *, interval: float = INTERVAL,
                 clock: Callable[[], float] = time.time) -> None:
        self.db_path = Path(db_path)
        self.session_id = session_id
        self.interval = float(interval)
        self.clock = clock
        self.beats = 0
        self.failures = 0
        self.last_error: str | None = None
        self._stop = threading.Event()
        self._first = threading.Event()
        self._thread: threading.Thread | None = None

    # -- context manager --------------------------------------------------------------------
    def __enter__(self) -> "Heartbeat":
        self.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 _tb: TracebackType | None) -> Literal[False]:
        self.stop()
        return False

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{self.session_id}", daemon=True)
        self._thread.start()
        self._first.wait(timeout=max(0.5, self.interval))  # the first beat lands before the loop starts

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # -- the thread ---------------------------------------------------------------------------
    def _connect(self) -> HeartbeatConnection:
        return HeartbeatConnection(self.db_path, busy_timeout_ms=BUSY_TIMEOUT_MS)

    def beat(self, conn: HeartbeatConnection) -> None:
        conn.beat(self.session_id, float(self.clock()))

    def _loop(self) -> None:
        conn: HeartbeatConnection | None = None
        try:
            while True:
                try:
                    if conn is None:
                        conn = self._connect()
                    self.beat(conn)
                    self.beats += 1
                    self.last_error = None
                except Exception as exc:  # noqa: BLE001 - never raise out of the thread
                    self.failures += 1
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    _close(conn)
                    conn = None
                finally:
                    self._first.set()
                if self._stop.wait(self.interval):
                    break
        except BaseException:  # noqa: BLE001 - interpreter shutdown and the like: just end
            pass
        finally:
            _close(conn)


def _close(conn: HeartbeatConnection | None) -> None:
    if conn is not None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001
            pass
    return None


# -- reading it --------------------------------------------------------------------------------

def pid_alive(pid: Any, *, own_counts: bool = True) -> bool | None:
    """Whether process `pid` runs on this machine: True, False, or None when unknown (no pid).
    A zombie (killed, not yet reaped by its parent) counts as dead. This process's own pid is
    alive, unless `own_counts=False` (recover: a session this very process recorded is held by
    no other process)."""
    try:
        pid = int(pid)
    except (TypeError, ValueError):
        return None
    if pid <= 0:
        return None
    if pid == os.getpid():
        return own_counts
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, owned by someone else
    except (OverflowError, OSError):
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return True


def runner_status(row_or_store: Mapping[str, Any] | LivenessSource, session_id: str | None = None, *,
                  now: float | None = None, stale_after: float = STALE_AFTER) -> RunnerStatus:
    """"alive", "stopped" (the session says running or paused but nothing runs it: killed,
    crashed, frozen) or "finished" (the session ended).

    `row_or_store`: a row of the sessions table (a mapping), or a SessionStore (then the row of
    `session_id` is read: one small query; SessionNotFound when there is none)."""
    if isinstance(row_or_store, Mapping):
        row = row_or_store
    else:
        if session_id is None:
            raise TypeError("runner_status(store, session_id): the session id is missing")
        row = row_or_store.liveness_row(session_id)
    if (row.get("status") or "") in ENDED:
        return "finished"
    now = time.time() if now is None else float(now)
    beat = _float(row.get("heartbeat_at"))
    if beat is not None and now - beat <= stale_after:
        return "alive"
    alive = pid_alive(row.get("pid"))
    if alive is not True:
        return "stopped"
    if beat is None:
        return "alive"  # before the first beat (setting up), or a session from before heartbeats
    # A stale heartbeat and a live pid: a process that took the session over after the last beat
    # (a resume still setting up: its session_resumed event is newer than the beat) is alive; the
    # same process gone quiet (frozen, stopped) or a recycled pid is not.
    updated = _float(row.get("updated_at"))
    if updated is not None and updated > beat + TAKEOVER_MARGIN:
        return "alive"
    return "stopped"


def _float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


__all__ = ["Heartbeat", "runner_status", "pid_alive", "RunnerStatus", "INTERVAL", "STALE_AFTER"]
