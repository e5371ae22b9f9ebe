"""Modals: a yes/no confirmation, the quit-during-a-live-session choice, and error details."""
from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static


class ConfirmModal(ModalScreen[bool]):
    BINDINGS = [
        Binding("y", "answer(True)", "Yes", id="confirm-yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm-no"),
    ]

    def __init__(self, question: str, *, yes: str = "Yes", no: str = "Cancel") -> None:
        super().__init__()
        self.question, self.yes, self.no = question, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.question, classes="question")
            with Horizontal(classes="buttons"):
                yield Button(f"{self.yes} (y)", id="yes", variant="error")
                yield Button(f"{self.no} (n)", id="no")

    def on_mount(self) -> None:
        self.query_one("#no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")

    def action_answer(self, value: bool) -> None:
        self.dismiss(value)


class QuitModal(ModalScreen[str]):
    """Closing during a live session: stop it, leave it running headless, or stay."""

    BINDINGS = [
        Binding("s", "answer('stop')", "Stop session", id="quit-stop"),
        Binding("l", "answer('leave')", "Leave running", id="quit-leave"),
        Binding("escape,c", "answer('cancel')", "Cancel", id="quit-cancel"),
    ]

    def __init__(self, session_id: str, reopen: str | None = None) -> None:
        super().__init__()
        self.session_id = session_id
        self.reopen = reopen or f"befair open {session_id}"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(
                f"Session {self.session_id} is still running.\n\n"
                "Stop it now, or leave it running headless? Either way nothing is lost: "
                f"reopen it later with `{self.reopen}`.",
                classes="question",
            )
            with Horizontal(classes="buttons"):
                yield Button("Stop it (s)", id="stop", variant="error")
                yield Button("Leave running (l)", id="leave", variant="primary")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#leave", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id or "cancel")

    def action_answer(self, value: str) -> None:
        self.dismiss(value)


class MessageModal(ModalScreen[None]):
    """An error or explanation the user must read (no traceback: the reason only)."""

    BINDINGS = [Binding("escape,enter", "close", "Close", id="message-close")]

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text, self.text = title, text

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="title")
            yield Static(self.text, classes="question")
            with Horizontal(classes="buttons"):
                yield Button("Close", id="close", variant="primary")

    def on_button_pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
