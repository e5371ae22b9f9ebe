"""Looking for processes from the host side (the host sees every process a sandbox starts)."""
from __future__ import annotations

import os


def running_with(marker: str) -> list[int]:
    """Host pids whose command line holds marker."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if marker.encode() in fh.read():
                    found.append(int(pid))
        except OSError:
            pass
    return found
