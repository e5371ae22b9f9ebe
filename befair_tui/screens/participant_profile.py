"""The participant fields, asked once (a `profile` study event): role, years of experience in
dermatology and in machine learning, free text; only those the spec's [people] fields name.
Checked as a whole when saved, with one line that says what is wrong; nothing is recorded until
every field is right. No field starts chosen: no role is marked (or highlighted) until the
participant picks one (ChoiceSet, also the questions' scales)."""
from __future__ import annotations

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Button, Footer, Input, Label, RadioSet, Static

from engine.study import people
from engine.study.people_spec import FIELD_LABELS, PeopleSpec

from befair_tui.navigation import participant_flow
from befair_tui.widgets.toggles import PlainRadioButton

from befair_tui.screens.participant_signin import PAGE_CSS, focus_first, page_button


class ChoiceSet(RadioSet):
    """A RadioSet that starts with nothing chosen and nothing highlighted: Textual's puts its cursor
    on the first button, which then looks chosen. Its cursor appears with the first arrow key."""

    def on_mount(self) -> None:
        self.call_after_refresh(self._no_cursor)

    def _no_cursor(self) -> None:
        if self.pressed_button is None:
            self._selected = None


class ProfileScreen(Screen[None]):
    DEFAULT_CSS = PAGE_CSS.format(screen="ProfileScreen") + """
    ProfileScreen Label { padding-top: 1; }
    ProfileScreen RadioSet { width: auto; }
    ProfileScreen #field-notes { width: 80; }
    """
    BINDINGS = [Binding("ctrl+s", "save", "Save and continue", id="profile-save", priority=True)]

    def __init__(self, spec: PeopleSpec) -> None:
        super().__init__()
        self.people = spec

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="page"):
            yield Static("About you (asked once)", classes="page-title")
            yield Static("Your answers are stored with the study, under your participant id only.",
                         classes="page-hint")
            for name in self.people.fields:
                yield Label(FIELD_LABELS[name])
                if name == "role":
                    with ChoiceSet(id="field-role"):
                        for i, role in enumerate(self.people.roles):
                            yield PlainRadioButton(role, id=f"role-{i}")
                elif name == "notes":
                    yield Input(id="field-notes", placeholder="optional")
                else:
                    yield Input(id=f"field-{name}", placeholder="years, e.g. 3 or 0.5", type="number")
            yield Static("", id="profile-problem", classes="page-problem")
            yield from page_button("Save and continue", "profile-continue")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        focus_first(self, "RadioSet, Input")

    def values(self) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for name in self.people.fields:
            if name == "role":
                pressed = self.query_one("#field-role", RadioSet).pressed_button
                out[name] = str(pressed.label) if pressed is not None else None
            else:
                out[name] = self.query_one(f"#field-{name}", Input).value
        return out

    @on(Input.Submitted)
    @on(Button.Pressed, "#profile-continue")
    def action_save(self) -> None:
        app = participant_flow(self.app)
        assert app.participant is not None  # signed in before the profile page
        try:
            people.give_profile(app.store, app.spec, app.participant, self.values())
        except ValueError as exc:
            self.query_one("#profile-problem", Static).update(Text(str(exc)))
            return
        app.advance()
