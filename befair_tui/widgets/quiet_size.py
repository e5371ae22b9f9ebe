"""Growing a scrollable widget's content without laying out the whole screen again.

Setting `virtual_size` (a reactive with layout=True) makes Textual lay out and repaint every
widget on the screen. When the scrollbars stay as they are — the content was taller than the
view and still is, or fitted and still does, at the same width — nothing else moves, so the
new size is set quietly and only the widget itself is redrawn."""
from __future__ import annotations

from textual.geometry import Size
from textual.widget import Widget


def set_virtual_size(widget: Widget, size: Size) -> None:
    old = widget.virtual_size
    if size == old:
        return
    view_height = widget.container_size.height
    same_bars = (old.width == size.width and widget.size.height > 0
                 and (old.height > view_height) == (size.height > view_height)
                 and (size.height <= view_height or widget.show_vertical_scrollbar))
    if not same_bars:
        widget.virtual_size = size  # a scrollbar comes or goes, or the width changes: lay out
        return
    widget.set_reactive(Widget.virtual_size, size)
    # what Textual does on a new virtual size when the scrollbars stay: the bars' proportions, the
    # scroll offset kept within the content (on public attributes only)
    if widget.show_vertical_scrollbar and widget.styles.scrollbar_size_vertical:
        bar = widget.vertical_scrollbar
        bar.window_virtual_size = size.height
        bar.window_size = widget.container_size.height - widget.scrollbar_size_horizontal
        bar.refresh()
    widget.scroll_y = widget.validate_scroll_y(widget.scroll_y)
    widget.refresh()
