"""A scrollable view of one Rich renderable (a node's plan, code, per-group table, audit, diff).

A Static inside a VerticalScroll asks for a layout of the whole screen on every update; a live
session that follows each new node would pay that on every node. This pane draws its content
line by line (Textual's line API) and grows or shrinks without a layout unless a scrollbar
comes or goes (widgets/quiet_size.py)."""
from __future__ import annotations

from typing import Any

from rich.console import RenderableType
from rich.style import Style
from rich.text import Text
from textual import events
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from befair_tui.widgets.quiet_size import set_virtual_size


class TextPane(ScrollView):
    DEFAULT_CSS = """
    TextPane { height: 1fr; overflow-x: hidden; overflow-y: auto; }
    """

    def __init__(self, renderable: RenderableType = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._renderable: RenderableType = renderable
        self._lines: list[Strip] = []
        self._drawn_width = -1

    @property
    def renderable(self) -> RenderableType:
        return self._renderable

    @property
    def plain(self) -> str:
        """The text shown (for tests and copy)."""
        return "\n".join(line.text.rstrip() for line in self._lines)

    def update(self, renderable: RenderableType) -> None:
        self._renderable = Text(renderable) if isinstance(renderable, str) else renderable
        self._draw(self.scrollable_content_region.width)

    def _draw(self, width: int) -> None:
        self._drawn_width = width
        if width <= 0 or not self.is_attached:
            self._lines = []
            return
        console = self.app.console
        options = console.options.update(width=width, height=None)
        self._lines = [Strip(line) for line in console.render_lines(self._renderable, options, pad=False)]
        # the virtual width is the pane's own (nothing scrolls sideways), so a scrollbar coming or
        # going changes only the width drawn at (watch_show_vertical_scrollbar), not the layout
        set_virtual_size(self, Size(self.size.width, len(self._lines)))
        if self.scroll_y > self.max_scroll_y:  # shorter content: not left scrolled past its end
            self.scroll_to(y=self.max_scroll_y, animate=False, immediate=True)
        self.refresh()

    def watch_show_vertical_scrollbar(self, shown: bool) -> None:
        width = self.scrollable_content_region.width
        if width != self._drawn_width and self._drawn_width >= 0:
            self._draw(width)

    def on_resize(self, event: events.Resize) -> None:
        width = self.scrollable_content_region.width
        if width != self._drawn_width:
            self._draw(width)

    _frame_style: Style | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        self._frame_style = self.rich_style  # it walks the ancestors: once per frame, not per line
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        index = y + round(self.scroll_offset.y)
        width = self.scrollable_content_region.width
        style = self._frame_style or self.rich_style
        if index >= len(self._lines):
            return Strip.blank(width, style)
        return self._lines[index].apply_style(style).crop_extend(0, width, style)
