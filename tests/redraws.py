"""Counting a console screen's redraws from outside it (the screen keeps no counter for tests)."""
from __future__ import annotations

from typing import Any


def count_redraws(screen: Any) -> list[float]:
    """Wrap `screen._redraw` (one call per sync of its widgets); the list grows by one per call."""
    calls: list[float] = []
    real = screen._redraw

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1.0)
        return real(*args, **kwargs)

    screen._redraw = counted
    return calls
