"""Counting calls from outside an object (product classes keep no counters for tests): a console
screen's redraws, a store's reads."""
from __future__ import annotations

from typing import Any


def count_redraws(screen: Any) -> list[float]:
    """Count `screen._redraw` calls (one per sync of its widgets)."""
    return count_calls(screen, "_redraw")


def count_calls(obj: Any, name: str) -> list[float]:
    """Wrap `obj.<name>` on this instance; the list grows by one per call (from any thread)."""
    calls: list[float] = []
    real = getattr(obj, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1.0)
        return real(*args, **kwargs)

    setattr(obj, name, counted)
    return calls
