"""The search tree: one line per node (stage, status, val AUC / gap, audit badges), guidance
entries where they took effect, the best node by the session's criterion marked."""
from __future__ import annotations

from rich.style import Style
from rich.text import Text
from textual._loop import loop_last
from textual.geometry import Size
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Tree
from textual.widgets._tree import _TreeLine
from textual.widgets.tree import TreeNode

from engine.session.state import SessionState

from befair_tui.format import guidance_label, node_label, node_tooltip


_CACHE_LIMIT = 20_000  # entries per cache (labels, widths, lines) before it is emptied


class SearchTree(Tree):
    """Keyboard-navigable; `sync` updates only the lines that changed.

    A new node must not cost the whole tree: Textual's Tree re-measures every label when its
    lines are rebuilt and re-renders every visible line after any change. Here a node's label
    and its width are cached until the node changes, and a rendered line is reused while the
    line shows the same nodes in the same state at the same place, so adding a node renders
    only its own line and the lines it moved."""

    DEFAULT_CSS = """
    SearchTree { padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        self._labels: dict[tuple, Text] = {}
        self._widths: dict[tuple, int] = {}
        self._strips: dict[tuple, Strip] = {}
        super().__init__("session", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self._items: dict[int, TreeNode] = {}
        self._guidance_items: dict[int, TreeNode] = {}
        self._best: int | None = None
        self._frame = 0
        self._state: SessionState | None = None

    # -- caches ---------------------------------------------------------------------------
    caching = True  # False: Textual's Tree as it is (the benchmark's reference)

    @staticmethod
    def _node_key(node: TreeNode) -> tuple:
        return node._id, node._updates, node._allow_expand, node._expanded

    def render_label(self, node: TreeNode, base_style: Style, style: Style) -> Text:
        if not self.caching:
            return super().render_label(node, base_style, style)
        key = (*self._node_key(node), base_style, style)
        text = self._labels.get(key)
        if text is None:
            if len(self._labels) > _CACHE_LIMIT:
                self._labels.clear()
            text = self._labels[key] = super().render_label(node, base_style, style)
        return text  # callers copy it before styling (Tree._render_line does)

    def get_label_width(self, node: TreeNode) -> int:
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
        """Textual's Tree._build (pinned textual 8.2.8), with the new virtual size set without a
        screen re-layout when the scrollbars stay as they are (a new line in a long tree)."""
        if not self.caching:
            return super()._build()
        lines: list[_TreeLine] = []

        def add_node(path: list[TreeNode], node: TreeNode, last: bool) -> None:
            child_path = [*path, node]
            node._line = len(lines)
            lines.append(_TreeLine(child_path, last))
            if node._expanded:
                for is_last, child in loop_last(node._children):
                    add_node(child_path, child, is_last)

        if self.show_root:
            add_node([], self.root, True)
        else:
            for node in self.root._children:
                add_node([], node, True)
        self._tree_lines_cached = lines
        guide_depth, show_root = self.guide_depth, self.show_root
        width = (max(self.get_label_width(line.node) + line._get_guide_width(guide_depth, show_root)
                     for line in lines) if lines else self.size.width)
        self._set_virtual_size(Size(width, len(lines)))
        if self.cursor_line != -1:
            if self.cursor_node is not None:
                self.cursor_line = self.cursor_node._line
            if self.cursor_line >= len(lines):
                self.cursor_line = -1

    def _invalidate(self) -> None:
        """A node added or removed: rebuild the lines on the next render, and lay the screen out
        again only when the tree's size needs it (see _set_virtual_size)."""
        if not self.caching:
            return super()._invalidate()
        self._clear_line_cache()
        self._updates += 1
        self.root._reset()
        self.refresh()

    def notify_style_update(self) -> None:
        self._labels.clear()
        self._strips.clear()
        super().notify_style_update()

    def _set_virtual_size(self, size: Size) -> None:
        old = self.virtual_size
        if size == old:
            return
        view_width, view_height = self.container_size
        same_bars = (old.width == size.width and old.height > view_height and size.height > view_height
                     and self.show_vertical_scrollbar)
        if not same_bars:
            self.virtual_size = size  # a scrollbar comes or goes, or the width changes: lay out
            return
        self.set_reactive(Widget.virtual_size, size)
        self._scroll_update(size)
        self.refresh()

    def _render_line(self, y: int, x1: int, x2: int, base_style: Style) -> Strip:
        lines = self._tree_lines
        if y >= len(lines) or not self.caching:
            return super()._render_line(y, x1, x2, base_style)
        line = lines[y]
        width = self.size.width
        key = (y, width, self.virtual_size.width, base_style, self._pseudo_class_state, self.has_focus,
               self.hover_line == y, self.cursor_line == y, self.hover_line >= 0 and any(n._hover for n in line.path),
               line.last, tuple((n._id, n._updates, n.is_last) for n in line.path))
        strip = self._strips.get(key)
        if strip is None:
            if len(self._strips) > _CACHE_LIMIT:
                self._strips.clear()
            strip = self._strips[key] = super()._render_line(y, 0, max(self.virtual_size.width, width), base_style)
        return strip.crop(x1, x2)

    # The user moving the cursor (keys, mouse) stops the console following the newest node.
    manual = False

    def action_cursor_up(self) -> None:
        self.manual = True
        super().action_cursor_up()

    def action_cursor_down(self) -> None:
        self.manual = True
        super().action_cursor_down()

    def action_page_up(self) -> None:
        self.manual = True
        super().action_page_up()

    def action_page_down(self) -> None:
        self.manual = True
        super().action_page_down()

    def action_scroll_home(self) -> None:
        self.manual = True
        super().action_scroll_home()

    def action_scroll_end(self) -> None:
        self.manual = True
        super().action_scroll_end()

    def action_cursor_parent(self) -> None:
        self.manual = True
        super().action_cursor_parent()

    async def _on_click(self, event) -> None:
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

    def reset(self) -> None:
        self.clear()
        self._items.clear()
        self._guidance_items.clear()
        self._best = None

    @property
    def selected_node_id(self) -> int | None:
        node = self.cursor_node
        if node is None or not isinstance(node.data, tuple):
            return None
        kind, ident = node.data
        return ident if kind == "node" else None

    def item_for(self, node_id: int) -> TreeNode | None:
        return self._items.get(node_id)

    def move_to(self, node_id: int) -> None:
        """Put the cursor on a node (programmatically: not a user move)."""
        item = self._items.get(node_id)
        if item is None or self.cursor_node is item:
            return
        _ = self._tree_lines  # lay out the lines first so a node just added has its line number
        self.move_cursor(item)

    def sync(self, state: SessionState, dirty: set[int], new_guidance: set[int], best: int | None,
             frame: int = 0) -> None:
        self._frame = frame
        self._state = state
        dirty = set(dirty)
        if best != self._best:
            dirty.update(x for x in (best, self._best) if x is not None)
            self._best = best
        # New nodes in id order so parents exist before children.
        for node_id in sorted(dirty):
            node = state.nodes.get(node_id)
            if node is None:
                continue
            label = node_label(state, node, best=node_id == best, frame=frame)
            item = self._items.get(node_id)
            if item is None:
                parent = self._items.get(node.parent_id) if node.parent_id is not None else None
                if parent is not None and not parent.allow_expand:
                    parent.allow_expand = True
                    parent.expand()
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
        label = guidance_label(g, state)
        item = self._guidance_items.get(gid)
        first = self._items.get(g.used_by[0]) if g.used_by else None
        placed_at = getattr(item, "_befair_anchor", None) if item is not None else None
        if item is not None and (first is None or placed_at == g.used_by[0]):
            item.set_label(label)
            return
        if item is not None:
            item.remove()
        if first is not None and first.parent is not None:
            item = first.parent.add(label, data=("guidance", gid), before=first, allow_expand=False)
            item._befair_anchor = g.used_by[0]
        else:
            parent = self._items.get(g.node_id) if g.scope == "node" else None
            if parent is not None and not parent.allow_expand:
                parent.allow_expand = True
                parent.expand()
            item = (parent or self.root).add(label, data=("guidance", gid), allow_expand=False)
            item._befair_anchor = None
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
            item.set_label(node_label(state, node, best=nid == best, frame=self._frame))
            stack.extend(node.children)

    def spin(self, state: SessionState, frame: int) -> None:
        """Advance the spinner of the running node (live sessions only)."""
        self._frame = frame
        nid = state.running_node
        if nid is not None and nid in self._items and nid in state.nodes:
            self._items[nid].set_label(node_label(state, state.nodes[nid], best=nid == self._best, frame=frame))
