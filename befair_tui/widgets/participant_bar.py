"""A participant's line under the console: which session of theirs this is, the time left of its
time limit, and the guidance left of its budget."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static


def mmss(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


class ParticipantBar(Static):
    DEFAULT_CSS = """
    ParticipantBar { height: 1; background: $panel; padding: 0 1; }
    """

    def sync(self, *, number: int, total: int, level: str, time_left: float | None, guidance_left: int | None,
             note: str = "") -> None:
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"Session {number} of {total}", style="bold")
        text.append(f" · {level}")
        if time_left is not None:
            text.append(" · time left ")
            text.append(mmss(time_left), style="bold red" if time_left < 60 else "bold")
        if guidance_left is not None:
            text.append(f" · guidance left {guidance_left}")
        text.append(f" · {note}" if note else " · ends at its step budget or time limit · ? help",
                    style="bold yellow" if note else "dim")
        if text.plain != getattr(self, "_last", None):
            self._last = text.plain
            self.update(text, layout=False)
