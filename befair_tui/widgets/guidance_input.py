"""Guidance for the agent: Enter sends it to the whole search, Ctrl+N to the selected node only."""
from __future__ import annotations

from typing import Any

from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input


class GuidanceInput(Input):
    BINDINGS = [
        Binding("ctrl+n", "submit_node", "Guide node", id="guide-node", show=True),
        Binding("escape", "leave", "Back", id="guide-leave", show=False),
    ]

    class Guide(Message):
        def __init__(self, text: str, node_scope: bool) -> None:
            super().__init__()
            self.text = text
            self.node_scope = node_scope

    PLACEHOLDER = "guidance for the agent…  (g, then Enter: global · Ctrl+N: the selected node)"

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(placeholder=self.PLACEHOLDER, **kwargs)

    def _send(self, node_scope: bool) -> None:
        text = self.value.strip()
        if text:
            self.post_message(self.Guide(text, node_scope))
            self.value = ""

    async def action_submit(self) -> None:  # Enter
        self._send(False)

    def action_submit_node(self) -> None:
        self._send(True)

    def action_leave(self) -> None:
        tree = self.screen.query("SearchTree")
        self.screen.set_focus(tree.first() if tree else None)
