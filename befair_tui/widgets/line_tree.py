"""A tree drawn line by line from its own items (widgets/tree_model.py), on Textual's public line
API: a ScrollView whose `render_line` draws a line from the model, with its own cursor, keys and
messages, as Toolong's LogLines does.

It looks and behaves as Textual's Tree (the same guides, component classes, CSS, keys, mouse and
messages), but a change costs only what it changes: a line is cached by what it shows (its item's
label and state, its guides, the hover and cursor on it, the width) and reused wherever it moves, so
a new item in a long tree draws its own line and the lines whose guides it changed; the virtual
size is set without a screen layout while the scrollbars stay (widgets/quiet_size.py); labels are
not measured while nothing scrolls sideways (overflow-x hidden)."""
from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events, on
from textual.binding import Binding, BindingType
from textual.geometry import Region, Size, clamp
from textual.message import Message
from textual.reactive import var
from textual.scroll_view import ScrollView
from textual.strip import Strip

from befair_tui.widgets.quiet_size import set_virtual_size
from befair_tui.widgets.tree_model import TreeItem, lay_out

T = TypeVar("T")

TOGGLE_STYLE = Style.from_meta({"toggle": True})  # a click on ▼/▶ expands or collapses
_CACHE_LIMIT = 20_000  # rendered lines kept before the cache is emptied
PLAIN, HOVERED, SELECTED = 0, 1, 2  # a guide under no highlight, under the hovered item, under the focused cursor


class LineTree(Generic[T], ScrollView, can_focus=True):
    """Items under an invisible root, one line each; the cursor, the hover and the messages of
    Textual's Tree (NodeHighlighted when the cursor moves to another item, NodeSelected on Enter
    or a click)."""

    ICON_NODE = "▶ "
    ICON_NODE_EXPANDED = "▼ "

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("shift+left", "cursor_parent", "Cursor to parent", show=False),
        Binding("shift+right", "cursor_parent_next_sibling", "Cursor to next ancestor", show=False),
        Binding("shift+up", "cursor_previous_sibling", "Cursor to previous sibling", show=False),
        Binding("shift+down", "cursor_next_sibling", "Cursor to next sibling", show=False),
        Binding("enter", "select_cursor", "Select", show=False),
        Binding("space", "toggle_node", "Toggle", show=False),
        Binding("shift+space", "toggle_expand_all", "Expand or collapse all", show=False),
        Binding("up", "cursor_up", "Cursor Up", show=False),
        Binding("down", "cursor_down", "Cursor Down", show=False),
    ]

    ALLOW_SELECT = False

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "tree--cursor", "tree--guides", "tree--guides-hover", "tree--guides-selected", "tree--highlight",
        "tree--highlight-line", "tree--label",
    }

    # Textual's Tree's, for this widget
    DEFAULT_CSS = """
    LineTree {
        background: $surface;
        color: $foreground;

        & > .tree--label {}
        & > .tree--guides { color: $surface-lighten-2; }
        & > .tree--guides-hover { color: $surface-lighten-2; }
        & > .tree--guides-selected { color: $block-cursor-blurred-background; }
        & > .tree--cursor {
            text-style: $block-cursor-blurred-text-style;
            background: $block-cursor-blurred-background;
        }
        & > .tree--highlight {}
        & > .tree--highlight-line { background: $block-hover-background; }

        &:focus {
            background-tint: $foreground 5%;
            & > .tree--cursor {
                color: $block-cursor-foreground;
                background: $block-cursor-background;
                text-style: $block-cursor-text-style;
            }
            & > .tree--guides { color: $surface-lighten-3; }
            & > .tree--guides-hover { color: $surface-lighten-3; }
            & > .tree--guides-selected { color: $block-cursor-background; }
        }

        &:light {
            & > .tree--guides { color: $surface-darken-1; }
            & > .tree--guides-hover { color: $block-cursor-background; }
            & > .tree--guides-selected { color: $block-cursor-background; }
        }
    }
    LineTree:ansi {
        color: ansi_default;
        & > .tree--guides { color: $ansi-background; }
        &:nocolor > .tree--cursor { text-style: reverse; }
    }
    """

    hover_line = var(-1)
    """The line under the mouse, or -1."""
    cursor_line = var(-1, always_update=True)
    """The line with the cursor, or -1."""

    auto_expand = True  # Enter on an item with children expands or collapses it
    center_scroll = False
    guide_depth = 2  # cells of indentation per level

    LINES: ClassVar[dict[str, tuple[str, str, str, str]]] = {
        "default": ("  ", "│ ", "└─", "├─"),
        "bold": ("  ", "┃ ", "┗━", "┣━"),
        "double": ("  ", "║ ", "╚═", "╠═"),
    }

    class _ItemMessage(Message):
        """A message about one item of the tree."""

        def __init__(self, tree: LineTree[Any], node: TreeItem[Any]) -> None:
            self.tree = tree
            self.node = node
            super().__init__()

        @property
        def control(self) -> LineTree[Any]:
            return self.tree

    class NodeHighlighted(_ItemMessage):
        """The cursor moved to another item."""

    class NodeSelected(_ItemMessage):
        """An item chosen: Enter on it, or a click."""

    def __init__(self, *, name: str | None = None, id: str | None = None, classes: str | None = None,
                 disabled: bool = False) -> None:
        self.root: TreeItem[T] = TreeItem(self, None, Text("root"))
        self._lines: list[TreeItem[T]] | None = None
        self._cursor_item: TreeItem[T] | None = None
        self._hover_item: TreeItem[T] | None = None
        self._strips: dict[tuple[object, ...], Strip] = {}
        self._guide_parts: dict[tuple[object, ...], list[Segment]] = {}
        self._label_parts: dict[tuple[object, ...], list[Segment]] = {}
        self._frame_style: Style | None = None
        self._pseudo: object = None
        super().__init__(name=name, id=id, classes=classes, disabled=disabled)

    # -- the model tells the widget ---------------------------------------------------------
    def item_changed(self, item: TreeItem[Any]) -> None:
        lines = self._lines
        if lines is not None and 0 <= item.line < len(lines) and lines[item.line] is item:
            self.refresh_line(item.line)

    def structure_changed(self) -> None:
        self._lines = None
        self.refresh()

    def clear(self) -> None:
        """Remove every item (the cursor keeps its line number, as Textual's Tree's does)."""
        self.root = TreeItem(self, None, Text("root"))
        self.structure_changed()

    @property
    def lines(self) -> list[TreeItem[T]]:
        """The shown items in line order, laid out again after a change."""
        lines = self._lines
        if lines is None:
            lines = self._lines = lay_out(self.root)
            self._set_size(lines)
            if self.cursor_line != -1:
                if self._cursor_item is not None:
                    self.cursor_line = self._cursor_item.line
                if self.cursor_line >= len(lines):
                    self.cursor_line = -1
        return lines

    def _set_size(self, lines: list[TreeItem[T]]) -> None:
        if self.styles.overflow_x == "hidden" or not lines:
            width = self.size.width  # what a line is drawn at, scrollbar or not
        else:
            width = max(self.get_label_width(item) + self._guide_width(item) for item in lines)
        set_virtual_size(self, Size(width, len(lines)))

    def _guide_width(self, item: TreeItem[T]) -> int:
        depth = 0
        parent = item.parent
        while parent is not None and parent.parent is not None:
            depth += 1
            parent = parent.parent
        return depth * self.guide_depth

    def get_node_at_line(self, line: int) -> TreeItem[T] | None:
        if line < 0:
            return None
        lines = self.lines
        return lines[line] if line < len(lines) else None

    @property
    def cursor_node(self) -> TreeItem[T] | None:
        return self._cursor_item

    @property
    def last_line(self) -> int:
        return len(self.lines) - 1

    # -- drawing ----------------------------------------------------------------------------
    def render_label(self, node: TreeItem[T], base_style: Style, style: Style) -> Text:
        label = node.label.copy()
        label.stylize(style)
        if node.allow_expand:
            prefix = (self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE, base_style + TOGGLE_STYLE)
        else:
            prefix = ("", base_style)
        return Text.assemble(prefix, label)

    def get_label_width(self, node: TreeItem[T]) -> int:
        return (2 if node.allow_expand else 0) + node.label.cell_len

    def notify_style_update(self) -> None:
        for cache in (self._strips, self._guide_parts, self._label_parts):
            cache.clear()
        super().notify_style_update()
        self.refresh()

    @on(events.Resize)
    def _resized(self) -> None:
        self.structure_changed()  # the virtual size follows the width

    def render_lines(self, crop: Region) -> list[Strip]:
        # the widget's style walks its ancestors: looked up once per frame, not once per line
        self._frame_style = self.rich_style
        self._pseudo = self.get_pseudo_class_state()
        _ = self.lines
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        base_style = self._frame_style or self.rich_style
        scroll_x, scroll_y = self.scroll_offset
        width = self.size.width
        line = y + scroll_y
        lines = self.lines
        if line >= len(lines):
            return Strip.blank(width, base_style)
        return self._line_strip(lines[line], line, width, base_style).crop(scroll_x, scroll_x + width)

    def _line_strip(self, item: TreeItem[T], y: int, width: int, base_style: Style) -> Strip:
        """A line as Textual's Tree draws it, cached by what it shows; the line number, which a
        click and the hover read from the line's meta, is put on last."""
        path = item.path()
        hovered = self._hover_item if self.hover_line >= 0 else None
        cursor = self._cursor_item if self.has_focus else None
        states: list[int] = []  # the look of each guide: what the items before it are
        under_hover = under_cursor = False
        for node in path[:-1]:
            under_hover = under_hover or node is hovered
            under_cursor = under_cursor or node is cursor
            states.append(SELECTED if under_cursor else HOVERED if under_hover else PLAIN)
        is_hover = hovered is not None and any(node is hovered for node in path)
        lasts = tuple(node.is_last for node in path[1:])
        pad_width = max(self.virtual_size.width, width)
        here = (self.hover_line == y, self.cursor_line == y)
        key = (item.id, item.version, lasts, tuple(states), is_hover, here, pad_width, self._pseudo, base_style)
        strip = self._strips.get(key)
        if strip is None:
            if len(self._strips) > _CACHE_LIMIT:
                self._strips.clear()
            line_style = self.get_component_rich_style("tree--highlight-line") if is_hover else base_style
            segments = [*self._guide_segments(lasts, tuple(states), line_style),
                        *self._label_segments(item, here, line_style)]
            cells = sum(segment.cell_length for segment in segments)
            if pad_width > cells:
                segments.append(Segment(" " * (pad_width - cells), line_style))
            strip = self._strips[key] = Strip(segments)
        return strip.apply_meta({"line": y})

    def _guide_segments(self, lasts: tuple[bool, ...], states: tuple[int, ...], line_style: Style) -> list[Segment]:
        """The guides before a label (a line moved under another parent draws them again: cached
        by their pattern, not by the line)."""
        if not lasts:
            return []
        key = (lasts, states, line_style, self._pseudo)
        cached = self._guide_parts.get(key)
        if cached is None:
            runs: list[tuple[str, Style]] = []
            for i, (last, state) in enumerate(zip(lasts, states, strict=True)):
                style, (space, vertical, terminator, cross) = self._guides(state)
                if i < len(lasts) - 1:
                    runs.append((space if last else vertical, style))
                else:
                    runs.append((terminator if last else cross, style))
            cached = []
            previous: Style | None = None
            for chars, style in runs:  # one segment per run of the same look
                if cached and style == previous:
                    cached[-1] = Segment(cached[-1].text + chars, cached[-1].style)
                else:
                    cached.append(Segment(chars, line_style + style))
                previous = style
            self._guide_parts[key] = cached
        return cached

    def _label_segments(self, item: TreeItem[T], here: tuple[bool, bool], line_style: Style) -> list[Segment]:
        """A label, styled for the hover and the cursor on its line (cached by the item's state)."""
        key = (item.id, item.version, here, line_style, self._pseudo)
        cached = self._label_parts.get(key)
        if cached is None:
            if len(self._label_parts) > _CACHE_LIMIT:
                self._label_parts.clear()
            hover_here, cursor_here = here
            label_style = self.get_component_rich_style("tree--label", partial=True)
            if hover_here:
                label_style += self.get_component_rich_style("tree--highlight", partial=True)
            if cursor_here:
                label_style += self.get_component_rich_style("tree--cursor", partial=False)
            label = self.render_label(item, line_style, label_style)
            label.stylize(Style(meta={"node": item.id}))
            text = Text(style=line_style)
            text.append(label)
            cached = self._label_parts[key] = list(text.render(self.app.console))
        return cached

    def _guides(self, state: int) -> tuple[Style, tuple[str, str, str, str]]:
        """The style and the characters (space, vertical, terminator, cross) of a guide."""
        component = ("tree--guides", "tree--guides-hover", "tree--guides-selected")[state]
        style = self.get_component_rich_style("tree--guides", partial=True)
        if state != PLAIN:
            style += self.get_component_rich_style(component, partial=True)
        if self.get_component_styles(component).color.a == 0:
            chars = ("  ", "  ", "  ", "  ")
        elif style.bold:
            chars = self.LINES["bold"]
        elif style.underline2:
            chars = self.LINES["double"]
        else:
            chars = self.LINES["default"]
        depth = max(0, self.guide_depth - 2)
        space, vertical, terminator, cross = (f"{c[0]}{c[1] * depth} " for c in chars)
        return style, (space, vertical, terminator, cross)

    def _refresh_subtree(self, item: TreeItem[T]) -> None:
        """Draw again the shown lines of an item and of the items under it (their guides)."""
        scroll_y = self.scroll_offset.y
        for line, shown in enumerate(self.lines[scroll_y:scroll_y + self.size.height], scroll_y):
            node: TreeItem[T] | None = shown
            while node is not None and node is not item:
                node = node.parent
            if node is not None:
                self.refresh_line(line)

    # -- hover and cursor -------------------------------------------------------------------
    @on(events.MouseMove)
    def _mouse_moved(self, event: events.MouseMove) -> None:
        meta = event.style.meta
        self.hover_line = meta["line"] if meta and "line" in meta else -1

    @on(events.Leave)
    def _left(self) -> None:
        self.hover_line = -1

    def watch_hover_line(self, previous_hover_line: int, hover_line: int) -> None:
        previous = self.get_node_at_line(previous_hover_line)
        if previous is not None:
            self._refresh_subtree(previous)
        item = self._hover_item = self.get_node_at_line(hover_line)
        if item is not None:
            self._refresh_subtree(item)

    def validate_cursor_line(self, value: int) -> int:
        return clamp(value, 0, len(self.lines) - 1)

    def watch_cursor_line(self, previous_line: int, line: int) -> None:
        """As Textual's Tree: NodeHighlighted when the line moves to another item than the one
        on the previous line (so also when lines shift under a kept cursor)."""
        before = self._cursor_item
        item = self._cursor_item = self.get_node_at_line(line)
        if previous_line == line:
            return
        previous = self.get_node_at_line(previous_line)
        for old in (before, previous):
            if old is not None and old is not item:
                self._refresh_subtree(old)
        if item is not None:
            self._refresh_subtree(item)
            if previous is not item:
                self.post_message(self.NodeHighlighted(self, item))

    def move_cursor(self, node: TreeItem[T] | None, animate: bool = False) -> None:
        previous = self.cursor_line
        self.cursor_line = -1 if node is None else node.line
        if node is not None and self._cursor_item is not None:
            self.scroll_to_node(self._cursor_item, animate=animate and abs(self.cursor_line - previous) > 1)

    def scroll_to_node(self, node: TreeItem[T], animate: bool = True) -> None:
        if node.line != -1:
            self.scroll_to_line(node.line, animate=animate)

    def scroll_to_line(self, line: int, animate: bool = True) -> None:
        """Scrolled now rather than after the next refresh (unless animated): following a new item
        otherwise draws the tree twice, once where it was and once where it scrolled to."""
        item = self.get_node_at_line(line)
        if item is not None:
            region = Region(self._guide_width(item), line, self.get_label_width(item), 1)
            self.scroll_to_region(region, animate=animate, force=True, center=self.center_scroll,
                                  origin_visible=False, x_axis=False, immediate=not animate)

    # -- mouse and keys ---------------------------------------------------------------------
    @on(events.Click)
    def _clicked(self, event: events.Click) -> None:
        """A click on ▼/▶ expands or collapses; elsewhere on a line it selects that line's item."""
        meta = event.style.meta
        if "line" not in meta:
            return
        if meta.get("toggle", False):
            item = self.get_node_at_line(meta["line"])
            if item is not None and item.allow_expand:
                item.toggle()
            return
        self.cursor_line = meta["line"]
        if self._cursor_item is not None:
            self.post_message(self.NodeSelected(self, self._cursor_item))

    def action_select_cursor(self) -> None:
        item = self.get_node_at_line(self.cursor_line)
        if item is None:
            return
        if self.auto_expand and item.allow_expand:
            item.toggle()
        self.post_message(self.NodeSelected(self, item))

    def action_toggle_node(self) -> None:
        item = self.get_node_at_line(self.cursor_line)
        if item is not None and item.allow_expand:
            item.toggle()

    def action_cursor_up(self) -> None:
        self.cursor_line = self.last_line if self.cursor_line == -1 else self.cursor_line - 1
        self.scroll_to_line(self.cursor_line, animate=False)

    def action_cursor_down(self) -> None:
        self.cursor_line = 0 if self.cursor_line == -1 else self.cursor_line + 1
        self.scroll_to_line(self.cursor_line, animate=False)

    def action_page_down(self) -> None:
        if self.cursor_line == -1:
            self.cursor_line = 0
        self.cursor_line += self.scrollable_content_region.height - 1
        self.scroll_to_line(self.cursor_line)

    def action_page_up(self) -> None:
        if self.cursor_line == -1:
            self.cursor_line = self.last_line
        self.cursor_line -= self.scrollable_content_region.height - 1
        self.scroll_to_line(self.cursor_line)

    def action_scroll_home(self) -> None:
        self.cursor_line = 0
        self.scroll_to_line(self.cursor_line)

    def action_scroll_end(self) -> None:
        self.cursor_line = self.last_line
        self.scroll_to_line(self.cursor_line)

    def action_cursor_parent(self) -> None:
        item = self._cursor_item
        if item is not None and item.parent is not None:
            self.move_cursor(item.parent, animate=True)

    def action_cursor_parent_next_sibling(self) -> None:
        item = self._cursor_item
        if item is not None and item.parent is not None:
            self.move_cursor(item.parent.next_sibling, animate=True)

    def action_cursor_previous_sibling(self) -> None:
        item = self._cursor_item
        if item is not None:
            self.move_cursor(item.previous_sibling or item.parent, animate=True)

    def action_cursor_next_sibling(self) -> None:
        item = self._cursor_item
        if item is None:
            return
        if item.next_sibling is not None:
            self.move_cursor(item.next_sibling, animate=True)
        elif item.parent is not None:
            self.move_cursor(item.parent.next_sibling, animate=True)

    def action_toggle_expand_all(self) -> None:
        """Expand every sibling of the cursor's item when all are collapsed, else collapse them."""
        item = self._cursor_item
        if item is None or item.parent is None:
            return
        siblings = [s for s in item.parent.children if s.allow_expand]
        expand = all(not s.is_expanded for s in item.parent.children)
        for sibling in siblings:
            sibling.expand() if expand else sibling.collapse()
        self.call_after_refresh(self.move_cursor, item, animate=False)
