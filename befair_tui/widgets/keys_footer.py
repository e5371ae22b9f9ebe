"""The footer every screen shows: only the keys that fit, never a key cut in half.

Textual's Footer lets keys run off its right edge (and under the command palette's key, docked
right): at 80 columns a reader saw "n New ses▏^p palettey". This one is compact, shows the
palette's key only where there is room for it, and, when the keys are wider than the screen,
leaves out first those the screen names in FOOTER_DROP (least needed first), then keys from the
end; help (?) stays. Every key still works and is listed in the help and the palette (Ctrl+P).
"""
from __future__ import annotations

from typing import Any, Protocol, TypeVar

from rich.cells import cell_len
from textual.app import ComposeResult
from textual.widget import Widget
from textual.widgets import Footer

PALETTE_FROM = 100  # columns from which the command palette's key is shown too
KEEP = ("help",)    # actions never left out


class ShownKey(Protocol):
    """What the footer knows of a key Footer.compose yields (its FooterKey, read by its public
    attributes: the class itself is not part of Textual's public API)."""
    key_display: str
    description: str
    action: str


K = TypeVar("K", bound=ShownKey)


def is_key(widget: Widget) -> bool:
    return all(hasattr(widget, name) for name in ("key_display", "description", "action"))


def key_width(key: ShownKey) -> int:
    """Cells a compact footer key takes: its key, a space, its description, a margin."""
    return cell_len(key.key_display) + (1 + cell_len(key.description) if key.description else 0) + 1


def fit_keys(keys: list[K], width: int, drop_first: tuple[str, ...] = ()) -> list[K]:
    """The keys to show in `width` cells, in their order."""
    shown = list(keys)
    order = [k for action in drop_first for k in shown if k.action == action]
    order += [k for k in reversed(shown) if k not in order and k.action not in KEEP]
    while shown and sum(key_width(k) for k in shown) > width and order:
        shown.remove(order.pop(0))
    return shown


class KeysFooter(Footer):
    DEFAULT_CSS = """
    KeysFooter FooterKey.-command-palette { border-left: none; }
    """

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("compact", True)
        super().__init__(**kwargs)
        self._width = 0

    def compose(self) -> ComposeResult:
        width = self.size.width or self.app.size.width
        self.set_reactive(Footer.show_command_palette, width >= PALETTE_FROM)
        children = list(super().compose())
        keys: list[Any] = [c for c in children if is_key(c) and "-command-palette" not in c.classes]
        palette: list[Any] = [c for c in children if is_key(c) and "-command-palette" in c.classes]
        room = width - sum(key_width(k) + 2 for k in palette)
        shown = set(map(id, fit_keys(keys, room, tuple(getattr(self.screen, "FOOTER_DROP", ())))))
        for child in children:
            if not is_key(child) or id(child) in shown or child in palette:
                yield child

    def on_resize(self) -> None:
        if self.size.width != self._width:
            self._width = self.size.width
            self.refresh(recompose=True)   # before the screen's bindings are ready Footer composes nothing
