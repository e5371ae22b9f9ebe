"""The search tree: one line per node (stage, status, val AUC / gap, audit badges), guidance
entries where they took effect, the best node by the session's criterion marked."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.text import Text

from engine.session.state import GuidanceState, SessionState
from engine.session.views import node_tooltip

from befair_tui.format import guidance_label, node_label
from befair_tui.widgets.line_tree import LineTree
from befair_tui.widgets.tree_model import TreeItem


Data = tuple[str, int]  # a line's data: ("node", node id) or ("guidance", guidance id)


class SearchTree(LineTree[Data]):
    """Keyboard-navigable; `sync` updates only the lines that changed (a line tree drawn from its
    own items: widgets/line_tree.py, on Textual's public API)."""

    DEFAULT_CSS = """
    SearchTree { padding: 0 1; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._items: dict[int, TreeItem[Data]] = {}
        self._guidance_items: dict[int, TreeItem[Data]] = {}
        self._guidance_anchors: dict[int, int | None] = {}  # guidance id: the node its entry was placed before
        self._best: int | None = None
        self._frame = 0
        self._now: float | None = None
        self._state: SessionState | None = None
        self._fit_width: int | None = None  # the width the labels were fitted to

    # The user moving the cursor (keys, mouse) stops the console following the newest node: a click,
    # and the tree's own cursor actions (USER_MOVES, set below the class).
    manual = False

    def on_click(self) -> None:
        self.manual = True  # the tree's own click handler, called after this, moves the cursor

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
        """Empty the tree and the maps of its nodes."""
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

    def item_for(self, node_id: int) -> TreeItem[Data] | None:
        return self._items.get(node_id)

    def move_to(self, node_id: int) -> None:
        """Put the cursor on a node (programmatically: not a user move)."""
        item = self._items.get(node_id)
        if item is None or self.cursor_node is item:
            return
        _ = self.lines  # lay out the lines first so a node just added has its line number
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


# The tree's cursor actions that the user's keys run: each also marks the cursor as the user's.
USER_MOVES = ("cursor_up", "cursor_down", "page_up", "page_down", "scroll_home", "scroll_end", "cursor_parent")


def _users_move(action: str) -> Callable[[SearchTree], None]:
    tree_action: Callable[[LineTree[Data]], None] = getattr(LineTree, f"action_{action}")

    def move(tree: SearchTree) -> None:
        tree.manual = True
        tree_action(tree)

    move.__name__ = move.__qualname__ = f"action_{action}"
    return move


for _action in USER_MOVES:
    setattr(SearchTree, f"action_{_action}", _users_move(_action))
