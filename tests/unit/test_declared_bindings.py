"""console_keys.declared_bindings: a screen class's keys as Textual merges them, from public BINDINGS."""
from __future__ import annotations

from textual.binding import Binding

from befair_tui.screens.console import ConsoleScreen
from befair_tui.screens.console_keys import declared_bindings, screen_keys
from befair_tui.screens.console_view import ConsoleView
from befair_tui.screens.participant_console import ParticipantConsoleScreen
from befair_tui.screens.replay import ReplayScreen


class Base(ConsoleView):
    BINDINGS = [Binding("x", "one", "One"), Binding("y,z", "two", "Two")]


class Rebinds(Base):
    BINDINGS = [Binding("y", "three", "Three")]


class Afresh(Base, inherit_bindings=False):
    BINDINGS = [Binding("w", "four", "Four")]


def _pairs(cls: type) -> set[tuple[str, str]]:
    return {(b.key, b.action) for b in declared_bindings(cls)}


def test_a_key_bound_again_replaces_the_base_binding_and_the_others_are_inherited():
    assert {("x", "one"), ("z", "two"), ("y", "three")} <= _pairs(Rebinds)
    assert ("y", "two") not in _pairs(Rebinds)


def test_inherit_bindings_false_starts_afresh():
    assert _pairs(Afresh) == {("w", "four")}


def test_the_consoles_name_the_keys_they_have():
    assert screen_keys((b.key, b) for b in declared_bindings(ConsoleScreen))["train_baselines"] == "b"
    replay = screen_keys((b.key, b) for b in declared_bindings(ReplayScreen))
    assert replay["prev_node"] == "b" and "train_baselines" not in replay
    participant = screen_keys((b.key, b) for b in declared_bindings(ParticipantConsoleScreen))
    assert {"resume_runner", "sessions", "stop", "train_baselines"}.isdisjoint(participant)
    assert participant["guide"] == "g"
