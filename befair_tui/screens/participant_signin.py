"""A participant's first pages: their id and the code of their link (when the URL did not give
them), then the study's instructions and consent text, agreed to once (a `consent` study event);
and the page a tab shows once another tab of the same participant took over."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Static

from engine.study import people
from engine.study.spec import StudySpec

from befair_tui.format import reflow
from befair_tui.navigation import participant_flow
from befair_tui.widgets.toggles import PlainCheckbox

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

    def __init__(self, study: str, problem: str | None = None, participant: str | None = None) -> None:
        super().__init__()
        self.study = study
        self.problem = problem
        self.participant = participant or ""

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page"):
            yield Static(f"befair · study {self.study}", classes="page-title")
            yield Static("Your link from the researcher opens your sessions by itself. Without it, type your "
                         "participant id and the code from your link (the letters after code=):", classes="page-text")
            yield Input(value=self.participant, placeholder="participant id, e.g. p01", id="participant-id")
            yield Input(placeholder="code from your link", id="participant-code")
            yield Static(self.problem or "", id="signin-problem", classes="page-problem")
            yield from page_button("Continue", "signin-continue")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#participant-code" if self.participant else "#participant-id", Input).focus()

    @on(Input.Submitted, "#participant-id")
    def next_field(self) -> None:
        self.query_one("#participant-code", Input).focus()

    @on(Input.Submitted, "#participant-code")
    @on(Button.Pressed, "#signin-continue")
    def action_go(self) -> None:
        value = self.query_one("#participant-id", Input).value.strip()
        code = self.query_one("#participant-code", Input).value.strip()
        if not value or not code:
            self.query_one("#signin-problem", Static).update(
                "Type your participant id and the code from your link." if not value else
                "Type the code from your link too (ask the researcher for your link if you have none).")
            return
        problem = participant_flow(self.app).sign_in(value, code)
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
                yield Static(Text(reflow(p.instructions)), classes="page-text", id="instructions")
            yield Static(Text(reflow(p.consent or "Your steering and your answers are recorded for this study.")),
                         classes="page-text", id="consent-text")
            yield PlainCheckbox("I have read this and I agree", id="consent-agree")  # blank until ticked
            yield Static("", id="consent-problem", classes="page-problem")
            yield from page_button("Continue", "consent-continue")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#consent-agree", PlainCheckbox).focus()

    @on(Button.Pressed, "#consent-continue")
    def action_go(self) -> None:
        if not self.query_one("#consent-agree", PlainCheckbox).value:
            self.query_one("#consent-problem", Static).update("Tick \u201cI agree\u201d to take part.")
            return
        app = participant_flow(self.app)
        assert app.participant is not None  # signed in before the consent page
        people.consent(app.store, self.spec, app.participant)
        app.advance()


class TakenOverScreen(Screen[None]):
    """This tab no longer steers: the participant opened their session in another tab or browser."""

    DEFAULT_CSS = PAGE_CSS.format(screen="TakenOverScreen")
    BINDINGS = [Binding("ctrl+s", "go", "Steer here", id="takeover-go", priority=True)]

    def __init__(self, study: str, at: str | None) -> None:
        super().__init__()
        self.study = study
        self.at = at

    def compose(self) -> ComposeResult:
        when = f" at {self.at}" if self.at else ""
        with VerticalScroll(id="page"):
            yield Static(f"befair · study {self.study}", classes="page-title")
            yield Static(f"This session was opened in another tab or browser{when}; this tab no longer steers.",
                         classes="page-text", id="takeover-text")
            yield Static("Your session goes on there; nothing is lost. Close this tab, or steer from this tab "
                         "again (the other one then stops steering).", classes="page-hint")
            yield from page_button("Steer from this tab", "takeover-go")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one("#takeover-go", Button).focus()

    @on(Button.Pressed, "#takeover-go")
    def action_go(self) -> None:
        participant_flow(self.app).take_back()
