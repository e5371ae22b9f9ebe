"""The heartbeat's own connection (engine.session.heartbeat.Heartbeat): one per heartbeat thread,
writing `sessions.heartbeat_at` between the runner's transactions (WAL, set by the store)."""
from __future__ import annotations

import os
import sqlite3


class HeartbeatConnection:
    """A short-timeout connection that writes one session's heartbeat; made and used on one thread."""

    def __init__(self, db_path: str | os.PathLike[str], *, busy_timeout_ms: int):
        self.conn = sqlite3.connect(db_path, timeout=busy_timeout_ms / 1000, isolation_level=None,
                                    check_same_thread=True)
        try:
            self.conn.execute(f"PRAGMA busy_timeout={int(busy_timeout_ms)}")
            self.conn.execute("PRAGMA synchronous=NORMAL")  # no fsync per beat
        except BaseException:
            self.conn.close()
            raise

    def beat(self, session_id: str, at: float) -> None:
        self.conn.execute("update sessions set heartbeat_at = ? where id = ?", (at, session_id))

    def close(self) -> None:
        self.conn.close()
