"""Key bindings that several screens share, defined once: each keeps one id, key and description
wherever it is offered (the footer, the help and the command palette read them from BINDINGS)."""
from __future__ import annotations

from textual.binding import Binding

QUIT = Binding("q", "app.quit", "Quit", id="quit")

# steering a session: the console and the participant's console
PAUSE = Binding("p", "pause", "Pause", id="pause")
RESUME = Binding("p", "resume", "Resume", id="resume")  # one key, p: "Pause" while running, "Resume" while paused
STOP = Binding("s", "stop", "Stop", id="stop")
GUIDE = Binding("g", "guide", "Guide", id="guide")
EXPAND = Binding("e", "expand", "Expand", id="expand")
PRUNE = Binding("x", "prune", "Prune", id="prune")
ADD_STEPS = Binding("plus,equals_sign", "add_steps", "Steps", id="add-steps", key_display="+")

# what the console shows
TOGGLE_SPLIT = Binding("v", "toggle_split", "Test / validation figures", id="toggle-split", show=False)
CHOOSE_CRITERION = Binding("c", "choose_criterion", "Best means", id="choose-criterion")
CHOOSE_FEEDBACK = Binding("a", "choose_feedback", "Agent sees", id="choose-feedback")
DETAIL_TABS = ("plan", "code", "output", "groups", "audit", "diff", "conversation")


def detail_tab_bindings() -> list[Binding]:
    """1-7: the node detail's tabs (hidden from the footer)."""
    return [Binding(str(i), f"detail_tab('{tab}')", f"{tab.capitalize()} tab", id=f"detail-{tab}", show=False)
            for i, tab in enumerate(DETAIL_TABS, start=1)]


def open_and_replay(screen: str, open_label: str = "Open session") -> list[Binding]:
    """Enter (or o) opens the highlighted session in the console, r replays it: the screens that
    list sessions (`screen` prefixes the ids)."""
    return [Binding("enter,o", "open", open_label, id=f"{screen}-open"),
            Binding("r", "replay", "Replay", id=f"{screen}-replay")]


def back_and_quit(screen: str) -> list[Binding]:
    """Escape: back to the screen below; q: quit."""
    return [Binding("escape", "back", "Back", id=f"{screen}-back"), QUIT]
