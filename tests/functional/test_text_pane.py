"""The node panel's text pane: new content without a screen layout while its scrollbar stays, a
layout when one comes, never left scrolled past the end of shorter content, re-wrapped on resize."""
from __future__ import annotations

from rich.text import Text
from textual.app import App
from textual.widget import Widget

from befair_tui.widgets.text_pane import TextPane


class PaneApp(App):
    def compose(self):
        yield TextPane(id="pane")


def lines(n: int, word: str = "line") -> Text:
    return Text("\n".join(f"{word} {i}" for i in range(n)))


async def test_the_pane_grows_quietly_clamps_its_scroll_and_rewraps():
    app = PaneApp()
    layouts: list[str] = []
    original = Widget.refresh

    def counting(self, *regions, repaint=True, layout=False, recompose=False):
        if layout and isinstance(self, TextPane):
            layouts.append(self.id or "")
        return original(self, *regions, repaint=repaint, layout=layout, recompose=recompose)

    async with app.run_test(size=(40, 10)) as pilot:
        pane = app.query_one(TextPane)
        Widget.refresh = counting
        try:
            pane.update(lines(5))  # fits: no scrollbar before or after
            await pilot.pause()
            assert layouts == [] and "line 4" in pane.plain
            pane.update(lines(100))  # a scrollbar comes: laid out once
            await pilot.pause()
            assert len(layouts) >= 1
            layouts.clear()
            pane.update(lines(60, "other"))  # taller than the view before and after: no layout
            await pilot.pause()
            assert layouts == []
        finally:
            Widget.refresh = original
        pane.scroll_to(y=pane.max_scroll_y, animate=False, immediate=True)
        await pilot.pause()
        pane.update(lines(20, "short"))
        await pilot.pause()
        assert pane.scroll_y == pane.max_scroll_y == 20 - pane.scrollable_content_region.height
        shown = [strip.text.strip() for strip in app.screen._compositor.render_strips()]
        assert shown[-1] == "short 19"  # the end of the new content, not blank lines past it

        pane.update(lines(3))
        await pilot.pause()
        assert not pane.show_vertical_scrollbar
        pane.update(Text("word " * 120))  # wraps past the view: drawn again beside the scrollbar it brings
        await pilot.pause()
        assert pane.show_vertical_scrollbar
        assert max(map(len, pane.plain.split("\n"))) <= pane.scrollable_content_region.width < 40
        pane.update(Text("word " * 30))
        await pilot.pause()
        wide = pane.plain.count("\n")
        await pilot.resize_terminal(20, 10)
        await pilot.pause()
        assert pane.plain.count("\n") > wide  # drawn again at the narrower width
