"""The pages between a participant's sessions: what comes next (Start), the spec's questions after a
session ended (an `answers` study event), and the closing page."""
from __future__ import annotations

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, RadioSet, Static

from engine.study import people
from engine.study.people import Position
from engine.study.spec import StudySpec
from engine.task import instruction_text

from befair_tui.format import reflow
from befair_tui.messages import FinishReasonRead
from befair_tui.navigation import participant_flow
from befair_tui.screens.participant_profile import ChoiceSet
from befair_tui.screens.participant_signin import PAGE_CSS, focus_first, page_button
from befair_tui.widgets.toggles import PlainRadioButton


def minutes(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"


class ReadyScreen(Screen[None]):
    """What the next session is; its Start button starts it (the time limit counts from then)."""

    DEFAULT_CSS = PAGE_CSS.format(screen="ReadyScreen") + """
    ReadyScreen #ready-instruction { padding: 0 0 1 2; color: $text; text-style: italic; }
    """
    BINDINGS = [Binding("ctrl+s", "start", "Start the session", id="ready-start", priority=True)]

    def __init__(self, spec: StudySpec, position: Position) -> None:
        super().__init__()
        self.spec, self.position = spec, position

    def compose(self) -> ComposeResult:
        cell = self.position.cell
        assert cell is not None
        p = people.people_of(self.spec)
        limits = [f"a budget of {self.spec.steps} steps (candidate pipelines)"]
        if self.spec.time_limit:
            limits.append(f"a time limit of {minutes(self.spec.time_limit)}")
        guidance = (f"You may give up to {p.guidance_budget} guidance messages." if p.guidance_budget is not None
                    else "You may give guidance as often as you like.")
        with VerticalScroll(id="page"):
            yield Static(f"Session {self.position.number} of {self.position.total}", classes="page-title")
            yield Static(f"The agent gets this instruction (level {cell.level.label}):", classes="page-text")
            yield Static(Text(reflow(instruction_text(cell.level.level, cell.level.text))), id="ready-instruction")
            yield Static(f"It has {' and '.join(limits)}. {guidance} You steer it live: p pauses it, g gives "
                         "guidance, e expands the selected node next, x prunes it (? lists every key).",
                         classes="page-text")
            yield Static("The session ends by itself; a few questions follow.", classes="page-hint")
            yield from page_button(f"Start session {self.position.number}", "ready-go")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#ready-go", Button).focus()

    @on(Button.Pressed, "#ready-go")
    def action_start(self) -> None:
        self.query_one("#ready-go", Button).disabled = True
        participant_flow(self.app).start_current()


class QuestionsScreen(Screen[None]):
    DEFAULT_CSS = PAGE_CSS.format(screen="QuestionsScreen") + """
    QuestionsScreen Label { padding-top: 1; text-style: bold; }
    QuestionsScreen RadioSet { layout: horizontal; width: auto; height: auto; }
    QuestionsScreen RadioButton { width: auto; padding: 0 1 0 0; }
    QuestionsScreen .scale-ends { color: $text-muted; }
    QuestionsScreen .answer-text { width: 80; }
    """
    BINDINGS = [Binding("ctrl+s", "save", "Save the answers", id="questions-save", priority=True)]

    def __init__(self, spec: StudySpec, position: Position) -> None:
        super().__init__()
        self.spec, self.position = spec, position

    def _title(self, reason: str | None = None) -> str:
        status = (self.position.session or {}).get("status") or "ended"
        ended = f"{status}: {reason}" if reason else str(status)
        return f"Session {self.position.number} of {self.position.total} has ended ({ended})."

    @work(thread=True, exclusive=True, group="finish-reason", name="read-finish-reason")
    def read_finish_reason(self) -> None:
        """Why the session ended, from its events (a whole fold: never on the UI thread)."""
        store = getattr(self.app, "store", None)   # None: the page shown by another app (a test's)
        if store is None:
            return
        try:
            reason = store.state(str((self.position.session or {}).get("id"))).finish_reason
        except Exception:  # noqa: BLE001 - the page still works without the reason
            return
        finally:
            store.close()   # this thread's connection
        if reason:
            self.post_message(FinishReasonRead(reason))

    @on(FinishReasonRead)
    def _on_finish_reason(self, message: FinishReasonRead) -> None:
        self.query_one("#questions-title", Static).update(self._title(message.reason))

    def compose(self) -> ComposeResult:
        p = people.people_of(self.spec)
        last = self.position.number == self.position.total
        with VerticalScroll(id="page"):
            yield Static(self._title(), id="questions-title", classes="page-title")
            yield Static(("A few questions about it, before you finish." if last else
                          "A few questions about it, before the next session.") if p.questions else
                         "Nothing to answer after this session.", classes="page-text")
            for q in p.questions:
                yield Label(Text(q.text + ("" if q.required else " (optional)")))
                if q.kind == "text":
                    yield Input(id=f"q-{q.id}", classes="answer-text")
                    continue
                with ChoiceSet(id=f"q-{q.id}"):
                    for value in range(q.low, q.high + 1):
                        yield PlainRadioButton(str(value), id=f"q-{q.id}-{value}")
                if q.labels:
                    yield Static(Text(f"{q.low} = {q.labels[0]} · {q.high} = {q.labels[1]}"), classes="scale-ends")
            yield Static("", id="questions-problem", classes="page-problem")
            yield from page_button("Save and finish" if last else "Save and go on to the next session",
                                   "questions-continue")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        focus_first(self, "RadioSet, Input, Button")
        self.read_finish_reason()

    def answers(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for q in people.people_of(self.spec).questions:
            widget = self.query_one(f"#q-{q.id}")
            if isinstance(widget, RadioSet):
                out[q.id] = str(widget.pressed_button.label) if widget.pressed_button is not None else None
            elif isinstance(widget, Input):
                out[q.id] = widget.value
        return out

    @on(Input.Submitted)
    @on(Button.Pressed, "#questions-continue")
    def action_save(self) -> None:
        app = participant_flow(self.app)
        cell = self.position.cell
        assert cell is not None
        assert app.participant is not None  # signed in before the questions
        try:
            people.answer(app.store, self.spec, app.participant, cell, self.answers())
        except ValueError as exc:
            self.query_one("#questions-problem", Static).update(Text(str(exc)))
            return
        app.advance()


class DoneScreen(Screen[None]):
    DEFAULT_CSS = PAGE_CSS.format(screen="DoneScreen")

    def __init__(self, spec: StudySpec, position: Position) -> None:
        super().__init__()
        self.spec, self.position = spec, position

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page"):
            yield Static("Thank you", classes="page-title")
            yield Static(f"You have finished all {self.position.total} sessions of study {self.spec.name}. "
                         "Everything is recorded; you may close this tab now.", classes="page-text", id="done-text")
        yield Footer(compact=True)
