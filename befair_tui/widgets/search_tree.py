"""The search tree: one line per node (stage, status, val AUC / gap, audit badges), guidance
entries where they took effect, the best node by the session's criterion marked."""
from __future__ import annotations

from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from engine.session.state import SessionState

from befair_tui.format import guidance_label, node_label, node_tooltip


class SearchTree(Tree):
    """Keyboard-navigable; `sync` updates only the lines that changed."""

    DEFAULT_CSS = """
    SearchTree { padding: 0 1; }
    """

    def __init__(self, **kwargs) -> None:
        super().__init__("session", **kwargs)
        self.show_root = False
        self.guide_depth = 2
        self._items: dict[int, TreeNode] = {}
        self._guidance_items: dict[int, TreeNode] = {}
        self._best: int | None = None
        self._frame = 0
        self._state: SessionState | None = None

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
