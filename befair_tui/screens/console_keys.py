"""The console's keys: its bindings table and the keys a screen binds to each action. Which steering
key can act in which state is decided without Textual (befair_tui.console.steering); the footer and
the command palette offer only the keys that can act; pressing another one says why."""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from textual.binding import Binding

from befair_tui.bindings import (ADD_STEPS, CHOOSE_CRITERION, CHOOSE_FEEDBACK, EXPAND, GUIDE, PAUSE, PRUNE, QUIT,
                                 RESUME, STOP, TOGGLE_SPLIT, detail_tab_bindings)
from befair_tui.console.steering import OFFERED_WHEN_ABLE

CONSOLE_BINDINGS: list[Binding] = [
    PAUSE, RESUME, STOP, GUIDE, EXPAND, PRUNE, ADD_STEPS, TOGGLE_SPLIT, CHOOSE_CRITERION, CHOOSE_FEEDBACK,
    Binding("r", "summary", "Summary", id="session-summary"),
    Binding("u", "resume_runner", "Resume run", id="resume-runner"),
    Binding("b", "train_baselines", "Train baselines", id="train-baselines"),
    Binding("l", "sessions", "Sessions", id="sessions"),
    QUIT,
    *detail_tab_bindings(),
]
# widgets/keys_footer.py: the keys a narrow footer leaves out first (they stay in the help and palette)
FOOTER_DROP = ("app.quit", "sessions", "choose_feedback", "choose_criterion", "train_baselines", "add_steps", "prune",
               "expand")


def key_actions(bindings: Iterable[Binding]) -> dict[str, tuple[str, ...]]:
    """Key -> the actions offered only while they can act that it stands for (ConsoleView.on_key
    explains a key that cannot act)."""
    out: dict[str, tuple[str, ...]] = {}
    for binding in bindings:
        if binding.action in OFFERED_WHEN_ABLE:
            for key in binding.key.split(","):
                out[key.strip()] = (*out.get(key.strip(), ()), binding.action)
    return out


def declared_bindings(screen: type) -> list[Binding]:
    """The bindings a screen class has, as Textual merges them: each class's own BINDINGS, its
    bases' first, a key bound again replacing what a base bound to it, up to the first class
    declared with `inherit_bindings=False` (ConsoleView records it as `keys_start_here`). Read from
    the classes, not from the screen's merged map, which is private."""
    declared: list[Any] = []
    for klass in screen.__mro__:
        if "BINDINGS" in vars(klass):
            declared.append(vars(klass)["BINDINGS"])
        if vars(klass).get("keys_start_here"):
            break
    by_key: dict[str, list[Binding]] = {}
    for own in reversed(declared):
        mine: dict[str, list[Binding]] = {}
        for binding in Binding.make_bindings(own):
            mine.setdefault(binding.key, []).append(binding)
        by_key.update(mine)
    return [binding for bindings in by_key.values() for binding in bindings]


def screen_keys(bindings: Iterable[tuple[str, Binding]]) -> dict[str, str]:
    """Action -> the first key a screen binds to it."""
    out: dict[str, str] = {}
    for key, binding in bindings:
        out.setdefault(binding.action, key)
    return out

