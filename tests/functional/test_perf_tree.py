"""The search tree's caches (labels, widths, rendered lines, the virtual size set without a
re-layout) change nothing on screen: after a 300-node session and each of a few new nodes, the
cached tree renders exactly the lines Textual's Tree renders, and a new node does not make the
tree ask for a screen layout."""
from __future__ import annotations

from textual.geometry import Region
from textual.widget import Widget

from engine.agent.session_config import SessionConfig
from engine.session.store import SessionStore

from tests.bench.bench_ui import CODER, _node_events, _tree_events
from tests.settle import reads_done

N = 300


async def _screens(db, sid: str, cached: bool) -> tuple[list[list[str]], int]:
    from befair_tui.app import create_app
    from befair_tui.widgets.search_tree import SearchTree

    SearchTree.caching = cached
    layouts = 0
    original = Widget.refresh

    def counting(self, *regions, repaint=True, layout=False, recompose=False):
        nonlocal layouts
        if layout and isinstance(self, SearchTree):
            layouts += 1
        return original(self, *regions, repaint=repaint, layout=layout, recompose=recompose)

    shots: list[list[str]] = []
    try:
        app = create_app(db, start="replay", session_id=sid)
        async with app.run_test(size=(140, 40)) as pilot:
            await reads_done(app, pilot)
            screen = app.screen
            await pilot.pause()
            screen.ingest(_tree_events(sid, N)[1:])
            await pilot.pause()
            tree = screen.query_one(SearchTree)
            Widget.refresh = counting
            for k in range(4):
                screen.ingest(_node_events(N + 1 + k, 7 + k, screen.state.last_seq + 1, 1e4 + k, sid))
                await pilot.pause()
                width, height = tree.size
                shots.append([strip.text for strip in tree.render_lines(Region(0, 0, width, height))])
            tree.move_to(N + 2)
            await pilot.pause()
            shots.append([strip.text for strip in tree.render_lines(Region(0, 0, *tree.size))])
    finally:
        Widget.refresh = original
        SearchTree.caching = True
    return shots, layouts


async def test_cached_tree_renders_what_textual_renders_without_a_layout_per_node(db):
    store = SessionStore(db)
    for sid in ("cached", "plain"):
        store.create_session(SessionConfig(level="base", steps=N, best="validation").to_dict(), instruction="x",
                             coder=CODER, data={}, session_id=sid)
    store.close()
    cached, cached_layouts = await _screens(db, "cached", True)
    plain, plain_layouts = await _screens(db, "plain", False)
    assert cached == plain
    assert all(sum(bool(line.strip()) for line in shot) > 10 for shot in cached)  # a full tree on screen
    assert plain_layouts >= 4 and cached_layouts == 0
