"""Replay: the console in read-only mode with a timeline (play/pause, speed 1x/10x/max, step
forward and back, jump to the selected node's creation). Imported AIDE runs replay the same way."""
from __future__ import annotations

import copy

from textual.app import ComposeResult
from textual.binding import Binding

from engine.session.replay import Timeline, scaled_gaps
from engine.session.store import SessionStore

from befair_tui.screens.console import ConsoleScreen
from befair_tui.widgets.timeline import TimelineBar

SPEEDS = {"1x": 1.0, "10x": 10.0, "max": None}
TICK = 0.05
MAX_PER_TICK = 2_000


class ReplayScreen(ConsoleScreen):
    BINDINGS = [
        Binding("space", "play", "Play/Pause", id="replay-play", priority=True),
        Binding("f", "speed", "Speed", id="replay-speed"),
        Binding("right,full_stop", "forward", "Step →", id="replay-forward"),
        Binding("left,comma", "back", "← Step", id="replay-back"),
        Binding("j", "jump", "Jump to node", id="replay-jump"),
        Binding("n", "next_node", "Next node", id="replay-next-node", show=False),
        Binding("b", "prev_node", "Prev node", id="replay-prev-node", show=False),
        Binding("ctrl+e", "to_end", "End", id="replay-end", show=False),
        Binding("ctrl+a", "to_start", "Start", id="replay-start", show=False),
    ]

    def __init__(self, store: SessionStore, session_id: str, *, autoplay: bool = False,
                 speed: str = "10x", **kwargs) -> None:
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("follow", False)
        super().__init__(store, session_id, **kwargs)
        self.timeline = Timeline(store.events(session_id), session_id=session_id)
        self.playing = autoplay
        self.speed = speed
        self._gaps = scaled_gaps(self.timeline.events, SPEEDS[speed])
        self._budget = 0.0

    def compose_bottom(self) -> ComposeResult:
        yield TimelineBar(id="timeline")

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(TICK, self._play_tick)
        if len(self.timeline):
            self._move_to(1)  # the session's header (level, coder, budget) before any node
        self._sync_timeline()

    def replay_label(self) -> str | None:
        return "REPLAY"

    # -- moving -----------------------------------------------------------------------------
    def _move_to(self, position: int) -> None:
        tl = self.timeline
        old = tl.position
        position = max(0, min(position, len(tl)))
        if position == old:
            self._sync_timeline()
            return
        if position > old:
            tl.position = position
            self.ingest(tl.events[old:position])
        else:
            self.state = copy.deepcopy(tl.state_at(position))
            tl.position = position
            self.sync_all()
        self._sync_timeline()

    def _play_tick(self) -> None:
        if not self.playing:
            return
        tl = self.timeline
        if tl.at_end:
            self.playing = False
            self._sync_timeline()
            return
        self._budget += TICK
        pos = tl.position
        end = min(len(tl), pos + MAX_PER_TICK)
        while pos < end and self._gaps[pos] <= self._budget:
            self._budget -= self._gaps[pos]
            pos += 1
        if pos != tl.position:
            self._move_to(pos)
        if tl.at_end:
            self.playing = False
            self._sync_timeline()

    def _sync_timeline(self) -> None:
        tl = self.timeline
        event = tl.current_event
        label = None
        if event is not None:
            nid = event.payload.get("node_id")
            label = event.kind + (f" · node {nid}" if nid is not None else "")
        self.query_one(TimelineBar).sync(playing=self.playing, speed=self.speed, position=tl.position,
                                         total=len(tl), seconds=tl.elapsed(), event=label)

    # -- actions ----------------------------------------------------------------------------
    def action_play(self) -> None:
        if self.timeline.at_end and not self.playing:
            self._move_to(1)
        self.playing = not self.playing
        self._budget = 0.0
        self._sync_timeline()

    def action_speed(self) -> None:
        names = list(SPEEDS)
        self.speed = names[(names.index(self.speed) + 1) % len(names)]
        self._gaps = scaled_gaps(self.timeline.events, SPEEDS[self.speed])
        self._sync_timeline()

    def action_forward(self) -> None:
        self.playing = False
        self._move_to(self.timeline.position + 1)

    def action_back(self) -> None:
        self.playing = False
        self._move_to(self.timeline.position - 1)

    def action_jump(self) -> None:
        nid = self.selected_node
        if nid is None:
            self.notify("Select a node in the search tree first.", severity="warning")
            return
        self.playing = False
        pos = self.timeline._node_pos.get(nid)
        if pos is None:
            self.notify(f"node {nid} is not in this session", severity="warning")
            return
        self._move_to(pos)

    def action_next_node(self) -> None:
        tl = self.timeline
        current = tl.position
        tl.next_node()
        target, tl.position = tl.position, current
        self._move_to(target)

    def action_prev_node(self) -> None:
        tl = self.timeline
        current = tl.position
        tl.prev_node()
        target, tl.position = tl.position, current
        self._move_to(target)

    def action_to_end(self) -> None:
        self.playing = False
        self._move_to(len(self.timeline))

    def action_to_start(self) -> None:
        self.playing = False
        self._move_to(0)
