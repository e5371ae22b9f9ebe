"""A participant's first pages: their id (when the URL did not give it), then the study's
instructions and consent text, agreed to once (a `consent` study event)."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Checkbox, Footer, Input, Static

from engine.study import people
from engine.study.spec import StudySpec

from befair_tui.navigation import participant_flow

PAGE_CSS = """
{screen} #page {{ padding: 1 2; max-width: 100; }}
{screen} .page-title {{ text-style: bold; color: $accent; padding-bottom: 1; }}
{screen} .page-text {{ padding-bottom: 1; }}
{screen} .page-problem {{ color: $error; height: auto; padding-bottom: 1; }}
{screen} .page-hint {{ color: $text-muted; padding-bottom: 1; }}
{screen} .page-buttons {{ height: auto; padding-top: 1; }}
{screen} Input {{ width: 40; }}
"""


def page_button(label: str, button_id: str) -> ComposeResult:
    """A page's one button, under its text and fields."""
    with Horizontal(classes="page-buttons"):
        yield Button(label, id=button_id, variant="primary")


def focus_first(page: Screen[None], selector: str) -> None:
    """Focus the page's first field (`selector`: the kinds of field it may have), when it has one."""
    fields = page.query(selector)
    if fields:
        fields.first().focus()


class SignInScreen(Screen[None]):
    DEFAULT_CSS = PAGE_CSS.format(screen="SignInScreen")
    BINDINGS = [Binding("ctrl+s", "go", "Continue", id="signin-go", priority=True)]

    def __init__(self, study: str, problem: str | None = None) -> None:
        super().__init__()
        self.study = study
        self.problem = problem

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page"):
            yield Static(f"befair · study {self.study}", classes="page-title")
            yield Static("Your participant id (you were given it with the study's invitation):",
                         classes="page-text")
            yield Input(placeholder="e.g. p01", id="participant-id")
            yield Static(self.problem or "", id="signin-problem", classes="page-problem")
            yield from page_button("Continue", "signin-continue")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#participant-id", Input).focus()

    @on(Input.Submitted)
    @on(Button.Pressed, "#signin-continue")
    def action_go(self) -> None:
        value = self.query_one("#participant-id", Input).value.strip()
        if not value:
            self.query_one("#signin-problem", Static).update("Type your participant id.")
            return
        problem = participant_flow(self.app).sign_in(value)
        if problem:
            self.query_one("#signin-problem", Static).update(Text(problem))


class ConsentScreen(Screen[None]):
    DEFAULT_CSS = PAGE_CSS.format(screen="ConsentScreen")
    BINDINGS = [Binding("ctrl+s", "go", "Continue", id="consent-go", priority=True)]

    def __init__(self, spec: StudySpec) -> None:
        super().__init__()
        self.spec = spec

    def compose(self) -> ComposeResult:
        p = people.people_of(self.spec)
        with VerticalScroll(id="page"):
            yield Static(f"befair · study {self.spec.name}", classes="page-title")
            if p.instructions:
                yield Static(Text(p.instructions), classes="page-text", id="instructions")
            yield Static(Text(p.consent or "Your steering and your answers are recorded for this study."),
                         classes="page-text", id="consent-text")
            yield Checkbox("I have read this and I agree", id="consent-agree")
            yield Static("", id="consent-problem", classes="page-problem")
            yield from page_button("Continue", "consent-continue")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#consent-agree", Checkbox).focus()

    @on(Button.Pressed, "#consent-continue")
    def action_go(self) -> None:
        if not self.query_one("#consent-agree", Checkbox).value:
            self.query_one("#consent-problem", Static).update("Tick \u201cI agree\u201d to take part.")
            return
        app = participant_flow(self.app)
        assert app.participant is not None  # signed in before the consent page
        people.consent(app.store, self.spec, app.participant)
        app.advance()
