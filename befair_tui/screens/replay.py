"""Replay: a recorded session on a timeline (play/pause, speed 1x/10x/100x/max, step forward and
back, jump to the selected node's creation). Imported AIDE runs replay the same way.

It reads only: the controller is composed with `Replaying` (the session's events, read whole by a
thread worker, played at a speed: befair_tui.console.modes) and a `Viewer` at the keys, who may
look (split, ★ criterion, summary) but not steer; a steering key says why not."""
from __future__ import annotations

import time
from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding

from engine.session.replay import Timeline
from engine.session.store import SessionStore

from befair_tui.console.controller import ConsoleController
from befair_tui.console.modes import Replaying, Viewer
from befair_tui.messages import ReplayRead
from befair_tui.screens.console_view import ConsoleView
from befair_tui.widgets.status_bar import StatusBar
from befair_tui.widgets.timeline import TimelineBar

TICK = 0.05
REPLAY_BINDINGS = [
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


class ReplayScreen(ConsoleView):
    BINDINGS = [*REPLAY_BINDINGS]   # over the console's (ConsoleView): its `b` is the previous node here

    def __init__(self, store: SessionStore, session_id: str, *, autoplay: bool = False, speed: str = "10x",
                 mono: Callable[[], float] = time.monotonic, clock: Callable[[], float] | None = None) -> None:
        self.replaying = Replaying(session_id, clock=clock, speed=speed, playing=autoplay, mono=mono)
        super().__init__(store, session_id, ConsoleController(session_id, self.replaying, Viewer()))

    @property
    def timeline(self) -> Timeline:
        return self.replaying.timeline

    @property
    def loaded(self) -> bool:
        return self.replaying.loaded

    @property
    def playing(self) -> bool:
        return self.replaying.playing

    @property
    def speed(self) -> str:
        return self.replaying.speed

    @speed.setter
    def speed(self, value: str) -> None:
        self.replaying.speed = value

    def session_time(self, position: int | None = None) -> float:
        """Seconds of session time at a timeline position (0 before the first event)."""
        return self.replaying.session_time(position)

    def compose_bottom(self) -> ComposeResult:
        yield TimelineBar(id="timeline")

    def on_mount(self) -> None:
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
        self.replaying.load(message.events)
        if len(self.timeline):
            self._move_to(1)  # the session's header (level, coder, budget) before any node
        self._sync_timeline()

    def _sync_status(self) -> None:
        ctl, state = self.ctl, self.ctl.state
        self.query_one(StatusBar).sync(state, read_only=True, now=ctl.clock(), replay=self.replaying.label(),
                                       runner=ctl.runner, criterion=ctl.view_criterion, live=ctl.live_reply())
        board = self.scoreboard
        board.set_unsandboxed(state.unsandboxed)
        self.refresh_bindings_on((state.status, state.stop_requested, board.can_baselines, board.no_baselines()))

    # -- moving -----------------------------------------------------------------------------
    def _move_to(self, position: int) -> None:
        self.apply(self.ctl.seek(self.timeline, position))
        self._sync_timeline()

    def _play_tick(self) -> None:
        replaying, tl = self.replaying, self.timeline
        if not replaying.playing or not replaying.loaded:
            return
        if tl.at_end:
            replaying.playing = False
            self._sync_timeline()
            return
        pos = replaying.due_position()
        if pos != tl.position:
            self._move_to(pos)
        if tl.at_end:
            replaying.playing = False
            self._sync_timeline()

    def _sync_timeline(self) -> None:
        tl = self.timeline
        event = tl.current_event
        label = None
        if event is not None:
            nid = event.payload.get("node_id")
            label = event.kind + (f" · node {nid}" if nid is not None else "")
        self.query_one(TimelineBar).sync(playing=self.replaying.playing, speed=self.replaying.speed,
                                         position=tl.position, total=len(tl), seconds=tl.elapsed(), event=label)
        self._sync_status()  # the header: playing or paused

    # -- actions ----------------------------------------------------------------------------
    def action_play(self) -> None:
        if self.timeline.at_end and not self.replaying.playing:
            self._move_to(1)
        self.replaying.playing = not self.replaying.playing
        self.replaying.restart_clock()
        self._sync_timeline()

    def action_speed(self) -> None:
        self.replaying.next_speed()
        self._sync_timeline()

    def action_forward(self) -> None:
        self.replaying.playing = False
        self._move_to(self.timeline.position + 1)

    def action_back(self) -> None:
        self.replaying.playing = False
        self._move_to(self.timeline.position - 1)

    def action_jump(self) -> None:
        nid = self.ctl.selected
        if nid is None:
            self.notify("Select a node in the search tree first.", severity="warning")
            return
        self.replaying.playing = False
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
        self.replaying.restart_clock()

    def action_to_end(self) -> None:
        self.replaying.playing = False
        self._move_to(len(self.timeline))

    def action_to_start(self) -> None:
        self.replaying.playing = False
        self._move_to(0)
