"""The replay timeline: play state, speed, position, session time and the current event."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine.session.views import clock


class TimelineBar(Static):
    DEFAULT_CSS = """
    TimelineBar { height: 1; background: $boost; padding: 0 1; }
    """

    def sync(self, *, playing: bool, speed: str, position: int, total: int, seconds: float,
             event: str | None) -> None:
        width = 20
        filled = int(width * position / total) if total else 0
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("▶ playing" if playing else "⏸ paused", style="bold green" if playing else "bold yellow")
        text.append(f" · {speed} · event {position}/{total} · +{clock(seconds)} ")
        text.append("█" * filled, style="cyan")
        text.append("░" * (width - filled), style="dim")
        if event:
            text.append(f" {event}", style="dim")
        self.update(text)
