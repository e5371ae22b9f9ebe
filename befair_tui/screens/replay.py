"""Replay: the console in read-only mode with a timeline (play/pause, speed 1x/10x/100x/max, step
forward and back, jump to the selected node's creation). Imported AIDE runs replay the same way.

Speeds are honest: at 10x, ten seconds of the session's own time pass per second of wall time,
quiet stretches included (use 100x, max or n/b to skip them). Playing follows the wall clock
(`mono`), not a count of timer ticks, so a slow frame delays nothing that follows it."""
from __future__ import annotations

import copy
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from typing import Any

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding

from engine.session import events as ev
from engine.session.replay import Timeline
from engine.session.state import SessionState
from engine.session.store import SessionStore

from befair_tui.messages import ReplayRead
from befair_tui.screens.console import ConsoleScreen
from befair_tui.widgets.timeline import TimelineBar

SPEEDS = {"1x": 1.0, "10x": 10.0, "100x": 100.0, "max": None}
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
                 speed: str = "10x", mono: Callable[[], float] = time.monotonic, **kwargs: Any) -> None:
        kwargs.setdefault("read_only", True)
        kwargs.setdefault("follow", False)
        super().__init__(store, session_id, **kwargs)
        self.timeline = Timeline([], session_id=session_id)   # its events come from read-replay (on mount)
        self.loaded = False
        self.playing = autoplay
        self.speed = speed if speed in SPEEDS else "10x"
        self._mono = mono
        self._times: list[float] = []
        self._anchor: tuple[float, float] | None = None  # (wall clock, session time) play is measured from

    def compose_bottom(self) -> ComposeResult:
        yield TimelineBar(id="timeline")

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(TICK, self._play_tick)
        self._sync_timeline()
        self.read_events()

    @work(thread=True, exclusive=True, group="replay-read", name="read-replay")
    def read_events(self) -> None:
        """Read the whole session's events in a thread (a long session's are many); only posts ReplayRead."""
        try:
            self.post_message(ReplayRead(self.session_id, self.store.events(self.session_id)))
        except Exception as exc:  # noqa: BLE001 - said on screen
            self.post_message(ReplayRead(self.session_id, [], error=str(exc)))
        finally:
            self.store.close()   # this thread's connection

    @on(ReplayRead)
    def _on_read(self, message: ReplayRead) -> None:
        if message.error:
            self.notify(f"cannot read the session: {message.error}", title="Replay", severity="error", timeout=15)
        self.timeline = Timeline(message.events, session_id=self.session_id)
        self._times = session_times(self.timeline.events)
        self.loaded = True
        if len(self.timeline):
            self._move_to(1)  # the session's header (level, coder, budget) before any node
        self._sync_timeline()

    def replay_label(self) -> str | None:
        """The header's first word: whether the replay plays, and how fast."""
        return f"▶ REPLAY {self.speed}" if self.playing else "⏸ REPLAY PAUSED"

    def live_reply(self, state: SessionState | None = None) -> dict[str, Any] | None:
        """In a replay the reply is written again from the stored offsets: the first `chars`
        characters of the llm_call that ends the stream (engine.session.live_reply.replay_text)."""
        from engine.session import live_reply

        current = (state or self.state).live_reply
        if current is None:
            return None
        return {**current, "text": live_reply.replay_text(self.timeline.events, self.timeline.position, current)}

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

    def session_time(self, position: int | None = None) -> float:
        """Seconds of session time at a timeline position (0 before the first event)."""
        position = self.timeline.position if position is None else position
        return self._times[position - 1] if position > 0 and self._times else 0.0

    def due_position(self) -> int:
        """How many events should be applied now, at this speed, since play started."""
        tl = self.timeline
        speed = SPEEDS[self.speed]
        if speed is None:
            return min(len(tl), tl.position + MAX_PER_TICK)
        now = self._mono()
        if self._anchor is None:
            self._anchor = (now, self.session_time())
        wall0, session0 = self._anchor
        due = session0 + (now - wall0) * speed
        return max(tl.position, min(bisect_right(self._times, due), tl.position + MAX_PER_TICK))

    def _play_tick(self) -> None:
        if not self.playing or not self.loaded:
            return
        tl = self.timeline
        if tl.at_end:
            self.playing = False
            self._sync_timeline()
            return
        pos = self.due_position()
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
        self._sync_status()  # the header: playing or paused

    # -- actions ----------------------------------------------------------------------------
    def action_play(self) -> None:
        if self.timeline.at_end and not self.playing:
            self._move_to(1)
        self.playing = not self.playing
        self._restart_clock()
        self._sync_timeline()

    def _restart_clock(self) -> None:
        """Measure play from now, at the current position (on play, and on a change of speed)."""
        self._anchor = (self._mono(), self.session_time()) if self.playing else None

    def action_speed(self) -> None:
        names = list(SPEEDS)
        self.speed = names[(names.index(self.speed) + 1) % len(names)]
        self._restart_clock()
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
        self._step_node(self.timeline.next_node)

    def action_prev_node(self) -> None:
        self._step_node(self.timeline.prev_node)

    def _step_node(self, step: Callable[[], object]) -> None:
        """To where the next (or previous) node starts, as `step` finds it; playing on from there."""
        tl = self.timeline
        current = tl.position
        step()
        target, tl.position = tl.position, current
        self._move_to(target)
        self._restart_clock()

    def action_to_end(self) -> None:
        self.playing = False
        self._move_to(len(self.timeline))

    def action_to_start(self) -> None:
        self.playing = False
        self._move_to(0)


def session_times(events: Sequence[ev.Event]) -> list[float]:
    """Each event's session time in seconds from the first event (clock steps back count as 0)."""
    out: list[float] = []
    total = 0.0
    for prev, cur in zip([None, *events[:-1]], events, strict=True):
        if prev is not None:
            total += max(0.0, cur.ts - prev.ts)
        out.append(total)
    return out
