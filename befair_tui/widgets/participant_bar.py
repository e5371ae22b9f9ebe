"""A participant's line under the console: which session of theirs this is, its steps taken of its
budget (engine.session.views.steps, the count every surface shows), the time left of its time
limit, and the guidance left of its budget."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine.session.views import StepCount


def mmss(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 60:02d}:{seconds % 60:02d}"


class ParticipantBar(Static):
    DEFAULT_CSS = """
    ParticipantBar { height: 1; background: $panel; padding: 0 1; }
    """

    def sync(self, *, number: int, total: int, level: str, time_left: float | None, guidance_left: int | None,
             note: str = "", steps: StepCount | None = None) -> None:
        compact = 0 < self.size.width < 110
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(f"Session {number} of {total}", style="bold")
        text.append(f" · {level}")
        if steps is not None:
            text.append(f" · {steps.words(compact=compact)}")
        if time_left is not None:
            text.append(" · time left ")
            text.append(mmss(time_left), style="bold red" if time_left < 60 else "bold")
        if guidance_left is not None:
            text.append(f" · guidance left {guidance_left}")
        if note:
            text.append(f" · {note}", style="bold yellow")
        else:
            text.append(" · ? help" if compact else " · ends at its step budget or time limit · ? help", style="dim")
        if text.plain != getattr(self, "_last", None):
            self._last = text.plain
            self.update(text, layout=False)
