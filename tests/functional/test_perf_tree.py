"""The search tree draws its own lines (widgets/line_tree.py): after a 300-node session and each of
a few new nodes, it shows exactly the lines Textual's Tree shows for the same items, and a new node
does not make the tree ask for a screen layout."""
from __future__ import annotations

from textual.app import App, ComposeResult
from textual.widget import Widget
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from engine.agent.session_config import SessionConfig
from engine.session.store import SessionStore

from tests.bench.bench_ui import CODER, _node_events, _tree_events
from tests.settle import reads_done

N = 300


class Mirror(App[None]):
    """Textual's Tree, as it is, at a given size."""

    def __init__(self, width: int, height: int) -> None:
        super().__init__()
        self.width, self.height = width, height

    def compose(self) -> ComposeResult:
        tree: Tree[object] = Tree("session")
        tree.show_root = False
        tree.guide_depth = 2
        tree.styles.width, tree.styles.height = self.width, self.height
        tree.styles.overflow_x = "hidden"
        tree.styles.scrollbar_size_vertical = 1
        yield tree


def _lines(tree: Widget) -> list[str]:
    """The lines a line-API widget draws in its content area (no border, no padding)."""
    return [tree.render_line(y).text for y in range(tree.size.height)]


def _items(items) -> list[tuple]:
    return [(item.label.copy(), item.data, item.is_expanded, item.allow_expand, _items(item.children))
            for item in items]


def _add(items: list[tuple], into: TreeNode[object]) -> None:
    for label, data, expanded, allow_expand, children in items:
        _add(children, into.add(label, data=data, expand=expanded, allow_expand=allow_expand))


def _shot(tree) -> dict:
    """What the search tree draws, and what Textual's Tree needs to draw the same."""
    return {"drawn": _lines(tree),
            "items": _items(tree.root.children), "size": tree.size, "cursor": tree.cursor_line,
            "scroll": tree.scroll_offset.y}


async def _textual_lines(shot: dict) -> list[str]:
    width, height = shot["size"]
    app = Mirror(width, height)
    async with app.run_test(size=(width + 10, height + 10)) as pilot:
        tree = app.query_one(Tree)
        _add(shot["items"], tree.root)
        await pilot.pause()
        tree.cursor_line = shot["cursor"]
        tree.scroll_to(y=shot["scroll"], animate=False, immediate=True)
        await pilot.pause()
        return _lines(tree)


async def test_the_tree_draws_what_textuals_tree_draws_without_a_layout_per_node(db):
    from befair_tui.app import create_app
    from befair_tui.widgets.search_tree import SearchTree

    store = SessionStore(db)
    store.create_session(SessionConfig(level="base", steps=N, best="validation").to_dict(), instruction="x",
                         coder=CODER, data={}, session_id="s")
    store.close()
    layouts = 0
    original = Widget.refresh

    def counting(self, *regions, repaint=True, layout=False, recompose=False):
        nonlocal layouts
        if layout and isinstance(self, SearchTree):
            layouts += 1
        return original(self, *regions, repaint=repaint, layout=layout, recompose=recompose)

    shots: list[dict] = []
    app = create_app(db, start="replay", session_id="s")
    try:
        async with app.run_test(size=(140, 40)) as pilot:
            await reads_done(app, pilot)
            screen = app.screen
            await pilot.pause()
            screen.apply(screen.ctl.ingest(_tree_events("s", N)[1:]))   # a replay folds what it is given
            await pilot.pause()
            tree = screen.query_one(SearchTree)
            for k in range(4):
                Widget.refresh = counting
                screen.apply(screen.ctl.ingest(_node_events(N + 1 + k, 7 + k, screen.state.last_seq + 1, 1e4 + k,
                                                            "s")))
                await pilot.pause()
                Widget.refresh = original
                shots.append(_shot(tree))
            tree.move_to(N + 2)
            await pilot.pause()
            shots.append(_shot(tree))
    finally:
        Widget.refresh = original
    for shot in shots:
        assert shot["drawn"] == await _textual_lines(shot)
        assert sum(bool(line.strip()) for line in shot["drawn"]) > 10  # a full tree on screen
    assert layouts == 0
