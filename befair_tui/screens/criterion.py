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


class CriterionModal(ModalScreen[str | None]):
    DEFAULT_CSS = """
    CriterionModal { align: center middle; }
    CriterionModal > Vertical { width: 76; max-width: 95%; height: auto; border: round $accent; padding: 1 2;
                                background: $surface; }
    CriterionModal #criterion-why { color: $text-muted; margin-top: 1; }
    CriterionModal OptionList { height: auto; max-height: 12; }
    """
    BINDINGS = [Binding("escape", "dismiss(None)", "Cancel", id="criterion-cancel")]

    def __init__(self, current: str, *, live: bool) -> None:
        super().__init__()
        self.current, self.live = current, live

    def compose(self) -> ComposeResult:
        options = [Option(f"{'● ' if c == self.current else '  '}{selection.CRITERION_LABEL[c]}: "
                          f"{selection.CRITERION_WORDS[c]}", id=c) for c in selection.CRITERIA]
        what = ("From the next step the search improves the best node by this, and the switch is recorded."
                if self.live else "This changes only what you see here: the session's recorded choice stays.")
        with Vertical():
            yield Static("[b]What should ★ best mean?[/b]")
            yield OptionList(*options, id="criterion-options")
            yield Static(f"{what} Enter chooses, Escape keeps {selection.CRITERION_LABEL[self.current]}.",
                         id="criterion-why")

    def on_mount(self) -> None:
        options = self.query_one(OptionList)
        options.highlighted = selection.CRITERIA.index(self.current)
        options.focus()

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)
