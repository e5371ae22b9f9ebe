"""How times, token counts and the coder read, on every surface."""
from __future__ import annotations

import time
from typing import Any

from engine.session.state import SessionState


def clock(seconds: float | None) -> str:
    """"01:32", "1:02:03"; "--:--" when unknown."""
    if seconds is None or seconds < 0:
        return "--:--"
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def tokens(n: int) -> str:
    return f"{n / 1000:.1f}k" if n >= 1000 else str(n)


def date(ts: float | None) -> str:
    if not ts:
        return "–"
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(ts))


def elapsed(state: SessionState, *, read_only: bool, now: float | None = None) -> float | None:
    """Elapsed session time. Read-only views use event timestamps only (deterministic)."""
    if state.started_ts is None:
        return None
    if state.finished_ts is not None:
        return state.finished_ts - state.started_ts
    if read_only or now is None:
        return (state.last_ts or state.started_ts) - state.started_ts
    return now - state.started_ts


def paused_clock_words(runs: bool) -> str:
    """What a paused session's clock does (a study's `clock_runs_when_paused`), in the status line."""
    return "the clock keeps running" if runs else "clock stopped"


def coder_label(coder: dict[str, Any]) -> str:
    """The coder as the status bar names it: its label and model, or the offline coder's name."""
    if not coder:
        return "coder ?"
    if coder.get("simulated"):
        return "offline coder (simulated agent)"
    label = str(coder.get("label") or coder.get("name") or "coder")
    model = coder.get("model")
    return f"{label} · {model}" if model and model not in label else label
