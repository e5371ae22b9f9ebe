"""The Conversation tab: what the agent was told and what it answered for the selected node.

Each LLM call (engine.session.conversation.node_calls): its usage and latency, where the
instruction level's text and each guidance appear in its messages (or that a guidance did not
reach it, in red), the messages and the raw reply with large repeated texts shown once (later
ones are a reference to the call that showed them), and what the engine parsed from the reply.
While the model is writing, its streamed reply is shown live above."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rich.console import Group, RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from engine.session.conversation import CallView, Piece, live_text, node_calls
from engine.session.state import SessionState

INSTRUCTION_STYLE = "bold cyan"
GUIDANCE_STYLE = "bold magenta"
LIVE_CHARS = 2_000  # the end of a streamed reply shown live


class ConversationView(VerticalScroll):
    DEFAULT_CSS = """
    ConversationView #conversation-live { color: $warning; padding: 0 0 1 0; }
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.calls: list[CallView] = []
        self._key: tuple[object, ...] | None = None
        self._live: str | None = "\0"  # nothing drawn yet: the first sync hides the empty live box
        # the reply being written, with its text (set by the screen: the live side channel, or a
        # replay's look-ahead); None: what the state holds
        self.live_source: Callable[[SessionState], dict[str, Any] | None] | None = None

    def compose(self) -> ComposeResult:
        yield Static("", id="conversation-live")
        yield Static("", id="conversation-body")

    def show(self, state: SessionState, node_id: int | None) -> None:
        node = state.nodes.get(node_id) if node_id is not None else None
        key = (node_id, len(state.unassigned_calls), len(node.conversation) if node else 0,
               len(state.guidance), node.plan if node else None, node.review_summary if node else None)
        if key != self._key:
            self._key = key
            self.calls = node_calls(state, node_id) if node is not None and node_id is not None else []
            self.query_one("#conversation-body", Static).update(self._render_calls(state))
        self.sync_live(state)

    def sync_live(self, state: SessionState) -> None:
        live = live_text(state, self.live_source(state) if self.live_source is not None else None)
        text = None if live is None else f"{live[0]}\n{live[1][-LIVE_CHARS:]}"
        if text != self._live:
            self._live = text
            box = self.query_one("#conversation-live", Static)
            box.update(Text(f"✎ {text}") if text else "")
            box.display = bool(text)

    # -- rendering ------------------------------------------------------------------------
    def _render_calls(self, state: SessionState) -> RenderableType:
        if not self.calls:
            return Text("No LLM call recorded for this node (the offline coder and sessions recorded before "
                        "conversations were stored have none).", style="dim")
        highlights = _highlights(state)
        parts: list[RenderableType] = []
        for call in self.calls:
            parts.extend(_call(call, highlights))
        return Group(*parts)


def _highlights(state: SessionState) -> list[tuple[str, str]]:
    """(text, style): the instruction level's text and each guidance, marked wherever shown."""
    out = [(state.instruction.strip(), INSTRUCTION_STYLE)] if state.instruction.strip() else []
    out += [(g.text.strip(), GUIDANCE_STYLE) for g in state.guidance.values() if g.text.strip()]
    return out


def _call(call: CallView, highlights: list[tuple[str, str]]) -> list[RenderableType]:
    head = Text(f"── {call.title}", style="bold")
    usage = f"{call.tokens_in:,} → {call.tokens_out:,} tokens" + (" (estimated)" if call.estimated else "")
    latency = f" · {call.latency_s:.1f} s" if call.latency_s is not None else ""
    head.append(f" · {call.model} · {usage}{latency} · ${call.cost:.4f}", style="dim")
    parts: list[RenderableType] = [head]
    if not call.attached:
        parts.append(Text("recorded without a node: made just before this node was created", style="dim italic"))
    if not call.ok:
        parts.append(Text(f"failed: {call.error or 'no reply'}", style="bold red"))
    for mark in call.marks:
        style = INSTRUCTION_STYLE if mark.label.startswith("instruction") else GUIDANCE_STYLE
        line = Text("✓ " if mark.places else "✗ ", style=style if mark.places else "bold red")
        line.append(f"{mark.label}: ", style=style)
        line.append(", ".join(mark.places) if mark.places else "not in this call's messages")
        parts.append(line)
    for i, (role, pieces) in enumerate(call.messages, 1):
        parts.append(Text(f"message {i} · {role}", style="bold underline"))
        parts.extend(_pieces(pieces, highlights))
    parts.append(Text("reply (raw)", style="bold underline"))
    parts.extend(_pieces(call.reply, highlights) if call.reply and call.reply[0].text else [Text("(empty)", "dim")])
    reply_text = "".join(p.text for p in call.reply)
    for what, text in call.parsed:
        parts.append(Text(f"parsed {what}", style="bold underline"))
        if what == "code" and text and text.strip() in reply_text:
            parts.append(Text(f"the code block of the reply above ({len(text.splitlines())} lines)", style="dim"))
        else:
            parts.append(Text(text or "–"))
    parts.append(Text(""))
    return parts


def _pieces(pieces: list[Piece], highlights: list[tuple[str, str]]) -> list[RenderableType]:
    out: list[RenderableType] = []
    for piece in pieces:
        if piece.ref is not None:
            out.append(Text(f"↺ {piece.ref}", style="dim italic"))
            continue
        text = Text(piece.text.rstrip("\n"))
        for words, style in highlights:
            text.highlight_words([words], style=style)
        out.append(text)
    return out
