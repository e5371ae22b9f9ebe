"""The benchmark's reference (tests/bench/bench_ui.py): the search tree as it was before it drew its
own lines (befair_tui/widgets/line_tree.py), a subclass of Textual's Tree overriding its private
parts, written for textual 8.2.8. `caching = False` is Textual's Tree as it is. Not product code:
only the bench imports it, and it may break on another Textual."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual._segment_tools import line_pad
from textual.geometry import Region, Size
from textual.strip import Strip
from textual.widgets import Tree
from textual.widgets._tree import _TreeLine
from textual.widgets.tree import TreeNode

from engine.session.state import GuidanceState, SessionState
from engine.session.views import node_tooltip

from befair_tui.format import guidance_label, node_label
from befair_tui.widgets.quiet_size import set_virtual_size


_CACHE_LIMIT = 20_000  # entries per cache (labels, widths, lines) before it is emptied

Data = tuple[str, int]  # a line's data: ("node", node id) or ("guidance", guidance id)
Guides = tuple[tuple[bool, ...], bool]  # (whether each ancestor is the last child, whether the line's node is)
CacheKey = tuple[object, ...]


WRITTEN_FOR_TEXTUAL = "8.2.8"


class SearchTree(Tree[Data]):
    """Keyboard-navigable; `sync` updates only the lines that changed.

    A new node must not cost the whole tree: Textual's Tree re-measures every label when its
    lines are rebuilt and re-renders every visible line after any change. Here a node's label
    and its width are cached until the node changes, and a rendered line is reused while the
    line shows the same nodes in the same state at the same place, so adding a node renders
    only its own line and the lines it moved."""

    DEFAULT_CSS = """
    SearchTree { padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        self._labels: dict[CacheKey, Text] = {}
        self._widths: dict[CacheKey, int] = {}
        self._strips: dict[CacheKey, Strip] = {}
        self._guides: dict[CacheKey, list[Segment]] = {}
        self._label_parts: dict[CacheKey, list[Segment]] = {}
        super().__init__("session", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self._items: dict[int, TreeNode[Data]] = {}
        self._guidance_items: dict[int, TreeNode[Data]] = {}
        self._guidance_anchors: dict[int, int | None] = {}  # guidance id: the node its entry was placed before
        self._best: int | None = None
        self._frame = 0
        self._now: float | None = None
        self._state: SessionState | None = None
        self._fit_width: int | None = None  # the width the labels were fitted to

    # -- caches ---------------------------------------------------------------------------
    caching = True  # False: Textual's Tree as it is (the benchmark's reference)

    @staticmethod
    def _node_key(node: TreeNode[Data]) -> tuple[int, int, bool, bool]:
        return node._id, node._updates, node._allow_expand, node._expanded

    def render_label(self, node: TreeNode[Data], base_style: Style, style: Style) -> Text:
        if not self.caching:
            return super().render_label(node, base_style, style)
        key = (*self._node_key(node), base_style, style)
        text = self._labels.get(key)
        if text is None:
            if len(self._labels) > _CACHE_LIMIT:
                self._labels.clear()
            text = self._labels[key] = super().render_label(node, base_style, style)
        return text  # callers copy it before styling (Tree._render_line does)

    def get_label_width(self, node: TreeNode[Data]) -> int:
        if not self.caching:
            return super().get_label_width(node)
        key = self._node_key(node)
        width = self._widths.get(key)
        if width is None:
            if len(self._widths) > _CACHE_LIMIT:
                self._widths.clear()
            width = self._widths[key] = super().get_label_width(node)
        return width

    def _build(self) -> None:
        """Textual's Tree._build (pinned textual 8.2.8) without recursion, with the new virtual
        size set without a screen re-layout when the scrollbars stay as they are
        (widgets/quiet_size.py). With overflow-x hidden nothing scrolls sideways, so the width of
        every label is not measured on every rebuild."""
        if not self.caching:
            return super()._build()
        lines: list[_TreeLine[Data]] = []
        top = [self.root] if self.show_root else list(self.root._children)
        stack: list[tuple[list[TreeNode[Data]], TreeNode[Data], bool]] = [([], node, True) for node in reversed(top)]
        while stack:
            path, node, last = stack.pop()
            child_path = [*path, node]
            node._line = len(lines)
            lines.append(_TreeLine(child_path, last))
            if node._expanded and node._children:
                children = node._children
                final = len(children) - 1
                stack.extend((child_path, child, i == final) for i, child in reversed(list(enumerate(children))))
        self._tree_lines_cached = lines
        set_virtual_size(self, Size(self._content_width(lines), len(lines)))
        if self.cursor_line != -1:
            if self.cursor_node is not None:
                self.cursor_line = self.cursor_node._line
            if self.cursor_line >= len(lines):
                self.cursor_line = -1

    def _content_width(self, lines: list[_TreeLine[Data]]) -> int:
        if self.styles.overflow_x == "hidden" or not lines:
            return self.size.width  # what a line is drawn at (Tree.render_line), scrollbar or not
        guide_depth, show_root = self.guide_depth, self.show_root
        return max(self.get_label_width(line.node) + line._get_guide_width(guide_depth, show_root) for line in lines)

    def _invalidate(self) -> None:
        """A node added or removed: rebuild the lines on the next render, and lay the screen out
        again only when the tree's size needs it (see _build)."""
        if not self.caching:
            return super()._invalidate()
        self._clear_line_cache()
        self._updates += 1
        self.root._reset()
        self.refresh()

    def notify_style_update(self) -> None:
        self._labels.clear()
        self._guides.clear()
        self._label_parts.clear()
        self._strips.clear()
        super().notify_style_update()

    _frame_style: Style | None = None

    def render_lines(self, crop: Region) -> list[Strip]:
        # the widget's style walks its ancestors: look it up once per frame, not once per line
        self._frame_style = self.rich_style if self.caching else None
        try:
            return super().render_lines(crop)
        finally:
            self._frame_style = None

    def render_line(self, y: int) -> Strip:
        if self._frame_style is None:
            return super().render_line(y)
        scroll_x, scroll_y = self.scroll_offset
        return self._render_line(y + scroll_y, scroll_x, scroll_x + self.size.width, self._frame_style)

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        """Textual's Tree._render_line (pinned textual 8.2.8), drawn from cached parts.

        A node added early in a long tree shifts every line below it and changes the guides of
        the sibling subtree before it, so whole lines rarely repeat. A line is its guides (one run
        of box characters, cached by their pattern) and its label (cached by the node's state);
        the line number, which a click reads from the line's meta, is put on last. Lines whose
        guides are highlighted (hover, or under the focused cursor) are drawn by Textual's code."""
        lines = self._tree_lines
        if y >= len(lines) or not self.caching:
            return super()._render_line(y, x1, x2, base_style)
        line = lines[y]
        path = line.path
        if (self.hover_line >= 0 and any(n._hover for n in path)) or (
                self.has_focus and any(n._selected for n in path[:-1])):
            return super()._render_line(y, x1, x2, base_style)
        width = max(self.virtual_size.width, self.size.width)
        guides = (tuple(n.is_last for n in path[1:-1]), line.last) if len(path) > 1 else None
        label = (*self._node_key(line.node), self.hover_line == y, self.cursor_line == y, base_style,
                 self._pseudo_class_state, self.has_focus)
        key = (guides, label, width)
        strip = self._strips.get(key)
        if strip is None:
            if len(self._strips) > _CACHE_LIMIT:
                self._strips.clear()
            segments = [*self._guide_segments(guides, base_style),
                        *self._label_segments(line.node, y, base_style, label)]
            cells = sum(seg.cell_length for seg in segments)
            strip = self._strips[key] = Strip(line_pad(segments, 0, width - cells, base_style))
        return strip.apply_meta({"line": y}).crop(x1, x2)

    def _guide_segments(self, guides: Guides | None, base_style: Style) -> list[Segment]:
        if guides is None:
            return []
        key = (guides, base_style)
        cached = self._guides.get(key)
        if cached is None:
            hidden = not self.show_guides or self.get_component_styles("tree--guides").color.a == 0
            guide_style = self.get_component_rich_style("tree--guides", partial=True)
            chars = self.LINES["default"]
            if guide_style.bold:
                chars = self.LINES["bold"]
            elif guide_style.underline2:
                chars = self.LINES["double"]
            if hidden:
                chars = ("  ", "  ", "  ", "  ")
            depth = max(0, self.guide_depth - 2)
            space, vertical, terminator, cross = (f"{c[0]}{c[1] * depth} " for c in chars)
            ancestors, last = guides
            text = "".join(space if is_last else vertical for is_last in ancestors)
            text += terminator if last else cross
            cached = self._guides[key] = [Segment(text, base_style + guide_style)]
        return cached

    def _label_segments(self, node: TreeNode[Data], y: int, base_style: Style, key: CacheKey) -> list[Segment]:
        cached = self._label_parts.get(key)
        if cached is None:
            if len(self._label_parts) > _CACHE_LIMIT:
                self._label_parts.clear()
            cached = self._label_parts[key] = self._draw_label(node, y, base_style)
        return cached

    def _draw_label(self, node: TreeNode[Data], y: int, base_style: Style) -> list[Segment]:
        label_style = self.get_component_rich_style("tree--label", partial=True)
        if self.hover_line == y:
            label_style += self.get_component_rich_style("tree--highlight", partial=True)
        if self.cursor_line == y:
            label_style += self.get_component_rich_style("tree--cursor", partial=False)
        label = self.render_label(node, base_style, label_style).copy()
        label.stylize(Style(meta={"node": node._id}))
        text = Text(style=base_style)
        text.append(label)
        return list(text.render(self.app.console))

    def scroll_to_line(self, line: int, animate: bool = True) -> None:
        """Textual's, but scrolled now rather than after the next refresh: following a new node
        otherwise draws the tree twice (once where it was, once where it scrolled to)."""
        region = self._get_label_region(line)
        if region is not None:
            self.scroll_to_region(region, animate=animate, force=True, center=self.center_scroll,
                                  origin_visible=False, x_axis=False, immediate=not animate)

    # The user moving the cursor (keys, mouse) stops the console following the newest node: a click,
    # and Tree's own cursor actions (USER_MOVES, set below the class).
    manual = False

    async def _on_click(self, event: events.Click) -> None:
        self.manual = True
        await super()._on_click(event)

    def watch_hover_line(self, previous_hover_line: int, hover_line: int) -> None:
        """The tooltip explains the line under the mouse: its numbers and its badges."""
        super().watch_hover_line(previous_hover_line, hover_line)
        node = self.get_node_at_line(hover_line) if hover_line >= 0 else None
        text = None
        data = node.data if node is not None else None
        state = self._state
        if state is not None and isinstance(data, tuple):
            if data[0] == "node" and data[1] in state.nodes:
                text = node_tooltip(state, state.nodes[data[1]])
            elif data[0] == "guidance" and data[1] in state.guidance:
                g = state.guidance[data[1]]
                where = "every later step" if g.scope == "global" else f"node {g.node_id}"
                used = (f"; it shaped node {', '.join(map(str, g.used_by))}" if g.used_by
                        else "; no step has used it yet")
                text = f"✎ guidance #{g.guidance_id} for {where}, by {g.by or 'a person'}: “{g.text}”{used}"
        if text != self.tooltip:
            self.tooltip = text

    # not Tree.reset(label, data): empties the tree and the maps of its nodes (Textual never calls reset itself)
    def reset(self) -> None:  # type: ignore[override]
        self.clear()
        self._items.clear()
        self._guidance_items.clear()
        self._guidance_anchors.clear()
        self._best = None

    @property
    def selected_node_id(self) -> int | None:
        node = self.cursor_node
        if node is None or not isinstance(node.data, tuple):
            return None
        kind, ident = node.data
        return ident if kind == "node" else None

    def item_for(self, node_id: int) -> TreeNode[Data] | None:
        return self._items.get(node_id)

    def move_to(self, node_id: int) -> None:
        """Put the cursor on a node (programmatically: not a user move)."""
        item = self._items.get(node_id)
        if item is None or self.cursor_node is item:
            return
        _ = self._tree_lines  # lay out the lines first so a node just added has its line number
        self.move_cursor(item)

    # -- labels fitted to the width -------------------------------------------------------
    def _content_cells(self) -> int | None:
        width = self.scrollable_content_region.width
        return width if width > 0 else None

    def _label(self, state: SessionState, node_id: int) -> Text:
        """A node's line, fitted to what is left of the tree's width beside its guides and its
        ▼ (format.node_label: badges shorten before anything is cut)."""
        node = state.nodes[node_id]
        width = self._fit_width
        if width is not None:
            depth, parent = 0, node.parent_id
            while parent is not None and parent in state.nodes and depth < 10_000:
                depth += 1
                parent = state.nodes[parent].parent_id
            width -= self.guide_depth * depth + (2 if node.children else 0)
        return node_label(state, node, best=node_id == self._best, frame=self._frame, width=width, now=self._now)

    def _guidance_label(self, state: SessionState, g: GuidanceState) -> Text:
        width = self._fit_width
        if width is not None:
            first = state.nodes.get(g.used_by[0]) if g.used_by else None
            anchor = first.parent_id if first is not None else (g.node_id if g.scope == "node" else None)
            depth = 0
            while anchor is not None and anchor in state.nodes and depth < 10_000:
                depth += 1
                anchor = state.nodes[anchor].parent_id
            width -= self.guide_depth * depth
        return guidance_label(g, width)

    def _refit(self) -> None:
        """The width changed (a resize, a scrollbar came or went): every line is fitted again."""
        width = self._content_cells()
        if width == self._fit_width:
            return
        self._fit_width = width
        state = self._state
        if state is None:
            return
        for node_id, item in self._items.items():
            if node_id in state.nodes:
                item.set_label(self._label(state, node_id))
        for gid, item in self._guidance_items.items():
            if gid in state.guidance:
                item.set_label(self._guidance_label(state, state.guidance[gid]))

    def on_resize(self) -> None:
        self.call_after_refresh(self._refit)

    def sync(self, state: SessionState, dirty: set[int], new_guidance: set[int], best: int | None,
             frame: int = 0, now: float | None = None) -> None:
        self._frame = frame
        self._now = now
        self._state = state
        self._refit()
        dirty = set(dirty)
        if best != self._best:
            dirty.update(x for x in (best, self._best) if x is not None)
            self._best = best
        # New nodes in id order so parents exist before children.
        for node_id in sorted(dirty):
            node = state.nodes.get(node_id)
            if node is None:
                continue
            label = self._label(state, node_id)
            item = self._items.get(node_id)
            if item is None:
                parent = self._items.get(node.parent_id) if node.parent_id is not None else None
                if parent is not None and not parent.allow_expand and node.parent_id is not None:
                    parent.allow_expand = True
                    parent.expand()
                    parent.set_label(self._label(state, node.parent_id))  # its ▼ takes two cells
                item = (parent or self.root).add(label, data=("node", node_id), expand=True,
                                                 allow_expand=False)
                self._items[node_id] = item
                for gid in node.guidance_ids:
                    new_guidance.add(gid)
            else:
                item.set_label(label)
        for gid in sorted(new_guidance):
            self._place_guidance(state, gid)

    def _place_guidance(self, state: SessionState, gid: int) -> None:
        """A guidance entry sits just before the first node it shaped (where it took effect);
        until then, under the node it targets or at the end of the top level."""
        g = state.guidance.get(gid)
        if g is None:
            return
        label = self._guidance_label(state, g)
        item = self._guidance_items.get(gid)
        first = self._items.get(g.used_by[0]) if g.used_by else None
        placed_at = self._guidance_anchors.get(gid) if item is not None else None
        if item is not None and (first is None or placed_at == g.used_by[0]):
            item.set_label(label)
            return
        if item is not None:
            item.remove()
        if first is not None and first.parent is not None:
            item = first.parent.add(label, data=("guidance", gid), before=first, allow_expand=False)
            self._guidance_anchors[gid] = g.used_by[0]
        else:
            parent = self._items.get(g.node_id) if g.scope == "node" and g.node_id is not None else None
            if parent is not None and not parent.allow_expand:
                parent.allow_expand = True
                parent.expand()
            item = (parent or self.root).add(label, data=("guidance", gid), allow_expand=False)
            self._guidance_anchors[gid] = None
        self._guidance_items[gid] = item

    def refresh_subtree(self, state: SessionState, node_id: int, best: int | None) -> None:
        """Re-label a node and all its descendants (after a prune)."""
        stack = [node_id]
        while stack:
            nid = stack.pop()
            node = state.nodes.get(nid)
            item = self._items.get(nid)
            if node is None or item is None:
                continue
            item.set_label(self._label(state, nid))
            stack.extend(node.children)

    def spin(self, state: SessionState, frame: int, now: float | None = None) -> None:
        """Advance the spinner and the clock of the running node (live sessions only)."""
        self._frame = frame
        self._now = now
        nid = state.running_node
        if nid is not None and nid in self._items and nid in state.nodes:
            self._items[nid].set_label(self._label(state, nid))


# Tree's cursor actions that the user's keys run: each also marks the cursor as the user's.
USER_MOVES = ("cursor_up", "cursor_down", "page_up", "page_down", "scroll_home", "scroll_end", "cursor_parent")


def _users_move(action: str) -> Callable[[SearchTree], None]:
    tree_action: Callable[[Tree[Data]], None] = getattr(Tree, f"action_{action}")

    def move(tree: SearchTree) -> None:
        tree.manual = True
        tree_action(tree)

    move.__name__ = move.__qualname__ = f"action_{action}"
    return move


for _action in USER_MOVES:
    setattr(SearchTree, f"action_{_action}", _users_move(_action))
