"""`+` in the console: how many steps to add to the budget (default 5), checked before it is sent."""
from __future__ import annotations

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from befair_tui.settings import LIMITS

DEFAULT_ADD = 5


class AddStepsModal(ModalScreen[int | None]):
    """Dismisses with the number of steps to add, or None (cancelled)."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="add-steps-cancel")]

    def __init__(self, budget: int, used: int, *, default: int = DEFAULT_ADD) -> None:
        super().__init__()
        self.budget, self.used, self.default = budget, used, default
        self.most = max(0, LIMITS["steps"][1] - max(budget, used))

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(f"Add steps to the budget ({self.used} of {self.budget} used). How many more?",
                         classes="question")
            yield Input(str(min(self.default, self.most) or ""), id="add-steps-count", type="integer")
            yield Static("", id="add-steps-problem", classes="hint")
            yield Static(f"Enter: add · Esc: cancel · at most {self.most} (a budget of "
                         f"{LIMITS['steps'][1]} steps in all)", classes="hint")
            with Horizontal(classes="buttons"):
                yield Button("Add", id="add-steps-ok", variant="primary")
                yield Button("Cancel", id="add-steps-no")

    def on_mount(self) -> None:
        field = self.query_one("#add-steps-count", Input)
        field.focus()
        field.select_all()  # typing replaces the default

    def value(self) -> int:
        """The number typed; ValueError with the reason when it cannot be added."""
        raw = self.query_one("#add-steps-count", Input).value.strip()
        if not raw.isdigit():
            raise ValueError(f"Type a whole number of steps, not {raw!r}.")
        n = int(raw)
        if n < 1:
            raise ValueError("Add at least 1 step.")
        if n > self.most:
            raise ValueError(f"At most {self.most} more: a budget holds {LIMITS['steps'][1]} steps in all.")
        return n

    @on(Input.Submitted)
    @on(Button.Pressed, "#add-steps-ok")
    def _ok(self) -> None:
        try:
            n = self.value()
        except ValueError as exc:
            self.query_one("#add-steps-problem", Static).update(f"[red]{exc}[/red]")
            return
        self.dismiss(n)

    @on(Button.Pressed, "#add-steps-no")
    def action_cancel(self) -> None:
        self.dismiss(None)
