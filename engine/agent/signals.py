"""SIGTERM ends a headless session as Ctrl-C does: the running node is interrupted, the session stopped.

    install_sigterm_handler()     # once, in the main thread of a process that runs sessions
    raise_if_signalled()          # the runner polls it: the handler's KeyboardInterrupt can be lost
"""
from __future__ import annotations

import signal
import threading
from types import FrameType

INTERRUPTED = "interrupted (Ctrl-C or SIGTERM)"  # the finish reason of a session ended by a signal


# Set by the SIGTERM handler. Python may swallow the KeyboardInterrupt it raises (e.g. when it lands
# in an at-fork callback while a worker thread starts a subprocess), so the runner also polls this.
SIGNALLED = threading.Event()


def raise_if_signalled() -> None:
    if SIGNALLED.is_set():
        raise KeyboardInterrupt


def install_sigterm_handler() -> None:
    """SIGTERM ends a headless session like Ctrl-C: the running node is interrupted, the session stopped."""
    def handler(_signum: int, _frame: FrameType | None) -> None:
        SIGNALLED.set()
        raise KeyboardInterrupt

    try:
        signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread
        pass


__all__ = ["INTERRUPTED", "SIGNALLED", "install_sigterm_handler", "raise_if_signalled"]
