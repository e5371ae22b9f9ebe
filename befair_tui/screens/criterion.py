"""What "best" means: the expert chooses the criterion ★ follows (engine.session.selection).

In a live session the choice is a steering command (the search improves the best node by it from
the next step, and the switch is recorded); in a replay or a finished session it changes only
what this screen shows."""
from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from engine.session import selection


class ChoiceModal(ModalScreen[str | None]):
    """One setting's values, each with its meaning in words; Enter chooses, Escape keeps the current one."""

    DEFAULT_CSS = """
    ChoiceModal { align: center middle; }
    ChoiceModal > Vertical { width: 76; max-width: 95%; height: auto; border: round $accent; padding: 1 2;
                             background: $surface; }
    ChoiceModal .choice-why { color: $text-muted; margin-top: 1; }
    ChoiceModal OptionList { height: auto; max-height: 12; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="criterion-cancel")]
    TITLE = ""
    VALUES: tuple[str, ...] = ()
    LABELS: dict[str, str] = {}
    WORDS: dict[str, str] = {}

    def __init__(self, current: str, *, live: bool) -> None:
        super().__init__()
        self.current, self.live = current, live

    def what(self) -> str:
        return ""

    def compose(self) -> ComposeResult:
        options = [Option(f"{'● ' if v == self.current else '  '}{self.LABELS[v]}: {self.WORDS[v]}", id=v)
                   for v in self.VALUES]
        with Vertical():
            yield Static(f"[b]{self.TITLE}[/b]")
            yield OptionList(*options, id="choice-options")
            yield Static(f"{self.what()} Enter chooses, Escape keeps {self.LABELS[self.current]}.",
                         classes="choice-why")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = self.VALUES.index(self.current)
        options.focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)


class CriterionModal(ChoiceModal):
    TITLE = "What should ★ best mean?"
    VALUES = selection.CRITERIA
    LABELS = selection.CRITERION_LABEL
    WORDS = selection.CRITERION_WORDS

    def what(self) -> str:
        return ("From the next step the search improves the best node by this, and the switch is recorded."
                if self.live else "This changes only what you see here: the session's recorded choice stays.")
