"""Help for a study's participant (`?` or F1): the steering keys they have, and the words on screen
in plain language (the same as the console's help, without the screens a participant cannot open)."""
from __future__ import annotations

from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Footer, Static

from befair_tui.screens.help import SOURCES, TERMS, HelpScreen, _heading, _pairs

PARTICIPANT_KEYS: list[tuple[str, str]] = [
    ("p", "pause the search (the running step finishes, no new step starts); p again resumes"),
    ("g", "write guidance for the agent: Enter sends it to every later step, Ctrl+N only to the selected node"),
    ("e", "expand the selected node next (improve it, or debug it if it failed)"),
    ("x", "prune the selected node: the search never expands it or its subtree (asks first)"),
    ("v", "switch the scoreboard and the plot between test and validation figures"),
    ("c", "choose what “★ best” means; the search improves the best node by it from the next step"),
    ("1–7", "node tabs: Plan, Code, Output, Groups (per skin tone), Audit, Diff, Conversation"),
    ("↑ ↓ Enter", "move in the search tree; Enter keeps the chosen node in view"),
    ("? F1", "this help"),
    ("Ctrl+P", "every action of the screen by name"),
]


def participant_help_content() -> Group:
    return Group(
        Text("Help · Esc, q, ? or F1 closes · ↑ ↓ PgUp PgDn scroll", style="dim"),
        _heading("Steering the agent"),
        Text("The session ends by itself when its step budget or its time limit is reached; then a few "
             "questions follow, and the next session. The bar at the bottom shows the steps taken of the budget "
             "(the nodes the agent created, the running one included) and the time left. While the session is "
             "paused, the line at the top says whether its clock keeps running (the study decides)."),
        _pairs(PARTICIPANT_KEYS, "bold yellow"),
        _heading("Words on screen"), _pairs(TERMS),
        _heading("Where a number comes from"), _pairs(SOURCES),
    )


class ParticipantHelp(HelpScreen):
    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box") as box:
            box.border_title = "Help"
            yield Static(participant_help_content(), id="help-text")
        yield Footer(compact=True)
