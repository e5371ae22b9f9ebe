"""The console's controller: one session's fold and what follows from it, decided once for the
Live, Replay and Participant consoles, without Textual.

`ingest(events)` folds a batch (engine.session.changes) and returns a `Redraw`: the plain value a
screen draws from (the dirty nodes, guidance, subtrees, output and scores, whether the streaming
reply moved, the ★, the node auto-follow selects, whether the session just ended, whether the
reference rows must be (re)loaded, whether to gc.freeze what a large batch built). Beside it: the
selection and its auto-follow, the runner's state from a heartbeat row, why a steering key cannot
act, the clock a running node is measured by, and a replay's seeks. How the consoles differ is
in the objects it is composed with (befair_tui.console.modes): where the events come from, and who
is at the console.
"""
from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.session import events as ev
from engine.session import views
from engine.session.changes import Changes, apply_changes
from engine.session.replay import Timeline
from engine.session.state import SessionState, memoised, new_state

from befair_tui.console.modes import Reader, Source

FREEZE_AFTER = 500  # events in one batch (a session opened, a replay seek): freeze what they built
RUNNING = ("running", "paused")  # a session something should be running


@dataclass
class Redraw:
    """What one update of the console redraws; the screen draws exactly this."""

    nodes: set[int] = field(default_factory=set)        # their tree line, panel, scoreboard row
    guidance: set[int] = field(default_factory=set)     # guidance entries to draw
    subtrees: set[int] = field(default_factory=set)     # a pruned node: it and all below it
    output: dict[int, list[str]] = field(default_factory=dict)  # text a node printed
    scores: bool = False        # the scoreboard and the plot
    live: bool = False          # the streaming reply moved on
    rebuild: bool = False       # every widget from scratch (mount, a seek back, another ★ criterion)
    best: int | None = None     # the ★, by the criterion in force
    select: int | None = None   # the node auto-follow selects now (None: the selection stays)
    spin: bool = False          # place the running node's spinner now (no timer ticks: a replay)
    ended: bool = False         # the session has ended (its follower may poll slowly)
    just_ended: bool = False    # a session seen running has ended with this batch: say so once
    references: bool = False    # the first events: (re)load the reference rows (the session's level)
    check_runner: bool = False  # the heartbeat was read before the first events: judge it now
    freeze: bool = False        # a large batch: keep what it built out of the collector's full passes
    derived: dict[Any, Any] = field(default_factory=dict, repr=False)  # the state's memo when planned

    @contextmanager
    def drawing(self, state: SessionState) -> Iterator[SessionState]:
        """A memoised block (engine.session.state.memoised) that starts from what the plan already
        derived (the best nodes): the widgets ask for the same ones, the state has not changed."""
        with memoised(state):
            assert state.memo is not None
            state.memo.update(self.derived)
            yield state


@dataclass(frozen=True)
class RunnerChange:
    """The runner's state as a heartbeat read it, and the one before."""

    previous: str | None
    status: str
    session_status: str

    @property
    def changed(self) -> bool:
        return self.status != self.previous

    @property
    def stopped(self) -> bool:
        """Nothing runs a session that should be running (kill -9, a crash, a closed machine)."""
        return self.status == "stopped" and self.session_status in RUNNING

    @property
    def back(self) -> bool:
        return self.status == "alive" and self.previous == "stopped"


class ConsoleController:
    def __init__(self, session_id: str, source: Source, reader: Reader) -> None:
        self.session_id = session_id
        self.source = source
        self.reader = reader
        self.state: SessionState = new_state(session_id)
        self.best: int | None = None
        self.view_criterion: str | None = None  # a reader's own choice of what ★ follows (replay, ended)
        self.selected: int | None = None
        self.auto_follow = True   # select the running (else the newest) node until a node is chosen by hand
        self.auto_target: int | None = None
        self.runner: str | None = None   # runner_status of a followed session: alive | stopped | finished
        self.session_row: Mapping[str, Any] | None = None   # the last row a heartbeat read
        self.split = "test"  # what the scoreboard and the plot compare: test | validation
        self._was_live = False  # seen running: its end is announced once

    # -- the fold -------------------------------------------------------------------------------
    def ingest(self, events: list[ev.Event]) -> Redraw | None:
        """Fold a batch of events; what to redraw (None: nothing came)."""
        if not events:
            return None
        first = self.state.last_seq == 0
        changes = Changes()
        for event in events:
            apply_changes(self.state, event, changes)
        redraw = self._plan(Redraw(changes.nodes, changes.guidance, changes.subtrees, changes.output, changes.scores,
                                   live=changes.live, references=first, freeze=len(events) >= FREEZE_AFTER))
        redraw.check_runner = first and self.session_row is not None and self.state.status in RUNNING
        return redraw

    def everything(self) -> Redraw:
        """Every widget from the current state (mount, a replay seek back, another ★ criterion)."""
        state = self.state
        redraw = self._plan(Redraw(set(state.nodes), set(state.guidance), scores=True, rebuild=True))
        if self.selected not in state.nodes:   # nothing selected, or a seek removed it: the panel says what to do
            self.selected = None
        return redraw

    def _plan(self, redraw: Redraw) -> Redraw:
        state = self.state
        with memoised(state):   # the tree, the scoreboard and the plot ask for the same best nodes
            assert state.memo is not None
            redraw.derived = state.memo
            # the ★: the same choice as the final one (engine.session.selection), by the criterion in force
            self.best = redraw.best = views.best_id(state, self.view_criterion)
            ended = views.ended(state)
        if self.auto_follow and state.nodes:
            target = state.running_node if state.running_node is not None else max(state.nodes)
            self.auto_target = target
            if target != self.selected:
                self.selected = redraw.select = target
        redraw.spin = not self.source.ticks and state.running_node in state.nodes
        redraw.ended = ended
        redraw.just_ended = ended and self._was_live and self.source.announces_end
        self._was_live = not ended and state.status != "new"
        return redraw

    # -- a replay's seeks -------------------------------------------------------------------------
    def seek(self, timeline: Timeline, position: int) -> Redraw | None:
        """Move to `position` on the timeline: forward folds the events in between, back starts
        from the state there (a copy: the timeline keeps its own). None: already there."""
        old = timeline.position
        position = max(0, min(position, len(timeline)))
        if position == old:
            return None
        if position > old:
            timeline.position = position
            return self.ingest(timeline.events[old:position])
        self.state = copy.deepcopy(timeline.state_at(position))
        timeline.position = position
        return self.everything()

    # -- the selection ------------------------------------------------------------------------------
    def highlighted(self, node_id: int, *, by_hand: bool) -> bool:
        """The tree's cursor is on `node_id`: whether to show it. A move made by hand stops
        auto-follow; while following, only the followed node is shown (not our own cursor moves)."""
        if by_hand:
            self.auto_follow = False
        if self.auto_follow and node_id != self.auto_target:
            return False
        return node_id != self.selected

    def chosen(self, node_id: int | None) -> bool:
        """An explicit choice (Enter, a click) stops auto-follow: whether the panel must show
        `node_id` (None: the line chosen is not a node's)."""
        self.auto_follow = False
        return node_id is not None and node_id != self.selected

    def descendants(self, node_id: int) -> int:
        """How many nodes are below `node_id` (what a prune takes with it)."""
        nodes = self.state.nodes
        count, stack = 0, list(nodes[node_id].children) if node_id in nodes else []
        while stack:
            nid = stack.pop()
            if nid in nodes:
                count += 1
                stack.extend(nodes[nid].children)
        return count

    # -- the runner ---------------------------------------------------------------------------------
    def heartbeat(self, row: Mapping[str, Any]) -> bool:
        """A heartbeat read the session's row: whether to judge the runner now (it should run)."""
        self.session_row = row
        return self.state.status in RUNNING

    def check_runner(self) -> RunnerChange | None:
        """The runner's state from the last row read (None: not read yet, or not created yet)."""
        status = self.source.runner_status(self.session_row)
        if status is None:
            return None
        change = RunnerChange(self.runner, status, self.state.status)
        self.runner = status
        return change

    def now(self) -> float | None:
        """The clock a running node's time is measured by: the wall clock while something runs
        the session, else the time of its last event (a replay, a dead runner)."""
        return self.source.now(self.state, self.runner)

    def clock(self) -> float:
        return self.source.clock()

    def live_reply(self, state: SessionState | None = None) -> dict[str, Any] | None:
        return self.source.live_reply(state or self.state)

    # -- steering -----------------------------------------------------------------------------------
    @property
    def live(self) -> bool:
        """Steerable by this reader: the session has not ended."""
        return self.reader.steers and self.state.status in ("new", *RUNNING)

    def steering_refusal(self, action: str, keys: Mapping[str, str]) -> str | None:
        """Why a steering key cannot act now (None: it can); `keys`, the screen's (a way out is
        named only with a key it has)."""
        return self.reader.refusal(action, self.state, self.runner, keys)

    def steers_criterion(self) -> bool:
        """Whether choosing what ★ follows is a steering command (else this reader's view only)."""
        return self.live and self.runner != "stopped"

    def view_by(self, criterion: str) -> None:
        """★ follows `criterion` here, for this reader only (the session's own, when it is that)."""
        self.view_criterion = None if criterion == views.session_criterion(self.state) else criterion

    def toggle_split(self) -> str:
        """Test figures (default) or validation figures, in the scoreboard and the plot together."""
        self.split = "validation" if self.split == "test" else "test"
        return self.split

    # -- expert baselines -----------------------------------------------------------------------------
    def baseline_workspace(self) -> str | None:
        """The session's prepared workspace, when it is here to train baselines on."""
        path = str((self.state.data or {}).get("path") or "")
        if views.data_kind(self.state) not in ("synth", "real") or not path:
            return None
        return path if Path(path).is_dir() else None

    def can_train_baselines(self) -> bool:
        return self.reader.steers and self.baseline_workspace() is not None

    def training_refusal(self, *, training: bool, trained_shown: bool) -> str | None:
        """Why the baselines cannot be trained now (None: they can)."""
        if training:
            return "The baselines are training already: their progress is in the scoreboard."
        if not self.can_train_baselines():
            return "This session's data is not here, so no baseline can be trained for it."
        if trained_shown:
            return "Baselines trained on this session's data are in the scoreboard already."
        return None
