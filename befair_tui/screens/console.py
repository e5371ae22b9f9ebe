"""The console: one screen for live, headless-elsewhere, resumed, imported and replayed sessions.

It only reads events and writes steering commands. A thread worker polls the event log and
posts batches (EventsArrived); this screen is the one owner that folds them into SessionState
and updates the widgets. Beside it: its keys and when each can act (console_keys), the expert
baselines it compares with and trains (console_baselines), the follower (befair_tui.polling).
"""
from __future__ import annotations

import gc
import subprocess
import time
from collections.abc import Callable
from typing import Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.worker import get_current_worker

from engine.session import events as ev
from engine.session import feedback, selection, views
from engine.session.changes import Changes, apply_changes
from engine.session.state import SessionState, memoised, new_state
from engine.session.store import SessionStore

from befair_tui.launch import runner_state
from befair_tui.messages import EventsArrived, FollowProblem, HeartbeatRead
from befair_tui.navigation import navigator
from befair_tui.polling import ENDED_POLL, IDLE_POLL, EventLogFollower, refresh_every
from befair_tui.screens.console_baselines import ExpertBaselines
from befair_tui.screens.console_keys import (CONSOLE_BINDINGS, FOOTER_DROP, OFFERED_WHEN_ABLE, fits_the_p_key,
                                             key_actions, screen_keys, steering_refusal)
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.guidance_input import GuidanceInput
from befair_tui.widgets.keys_footer import KeysFooter
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.search_tree import SearchTree
from befair_tui.widgets.status_bar import StatusBar

RUNNER_CHECK = 0.9  # seconds between two reads of the session row's heartbeat (every other tick)
FREEZE_AFTER = 500  # events in one batch (a session opened, a replay seek): freeze what they built


class ConsoleScreen(ExpertBaselines):
    FOOTER_DROP = FOOTER_DROP
    BINDINGS = [*CONSOLE_BINDINGS]

    def __init__(self, store: SessionStore, session_id: str, *, read_only: bool = False,
                 proc: subprocess.Popen[bytes] | None = None, poll_interval: float = 0.15,
                 clock: Callable[[], float] | None = None, follow: bool = True) -> None:
        super().__init__()
        self.store = store
        self.session_id = session_id
        self.read_only = read_only
        self.proc = proc
        self.poll_interval = poll_interval
        self.clock = clock or time.time
        self.follow_enabled = follow and not read_only
        self.state: SessionState = new_state(session_id)
        self.best: int | None = None
        self.view_criterion: str | None = None  # a reader's own choice of what ★ follows (replay, ended)
        self._was_live = False  # followed while running: its end is announced once
        self._frame = 0
        self._selected: int | None = None
        self._auto_select = True
        self._auto_target: int | None = None
        self.runner: str | None = None  # runner_status of a followed session: alive | stopped | finished
        self._session_row: dict[str, Any] | None = None   # the last row the heartbeat worker read
        self.split = "test"  # what the scoreboard and the plot compare: test | validation
        self._follower = EventLogFollower(store, session_id, self.post_message, proc=proc,
                                          poll_interval=poll_interval)
        self._bindings_key: tuple[object, ...] | None = None

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield StatusBar(id="status")
        with Horizontal(id="upper"):
            yield SearchTree(id="tree")
            yield NodeDetail(id="detail")
        with Horizontal(id="lower"):
            yield Scoreboard(id="scoreboard")
            yield ComparisonPlot(id="scatter")
        yield from self.compose_bottom()
        yield KeysFooter()

    def compose_bottom(self) -> ComposeResult:
        yield GuidanceInput(id="guidance")

    def on_mount(self) -> None:
        inputs = self.query(GuidanceInput)
        self._guidance = inputs.first() if inputs else None
        from befair_tui.widgets.conversation import ConversationView

        self.query_one(ConversationView).live_source = self.live_reply
        tree = self.query_one(SearchTree)
        tree.border_title = "Search tree · val AUC · gap"
        self.query_one(Scoreboard).train_key = self.key_for("train_baselines")
        self._load_references()
        tree.focus()
        if self.follow_enabled:
            self.follow()
            self.read_heartbeat()
            self.set_interval(0.5, self._tick)
        self.sync_all()

    # -- following the event log ----------------------------------------------------------
    @work(thread=True, exclusive=True, group="follow", name="follow-session")
    def follow(self) -> None:
        """Poll the event log (polling.EventLogFollower); never touches widgets, only posts messages."""
        self._follower.run(get_current_worker(), self.state.last_seq)

    @work(thread=True, exclusive=True, group="heartbeat", name="read-heartbeat")
    def read_heartbeat(self) -> None:
        """Read the session's row (its heartbeat) every RUNNER_CHECK seconds; only posts messages.
        The first read is at once, so that a runner already gone is said without waiting."""
        sid, worker = self.session_id, get_current_worker()

        def read(store: SessionStore) -> HeartbeatRead:
            return HeartbeatRead(sid, store.session(sid))

        try:
            self.post_message(read(self.store))
        except Exception as exc:  # noqa: BLE001 - not created yet: the next read tells
            self.post_message(HeartbeatRead(sid, None, str(exc)))
        refresh_every(worker, RUNNER_CHECK, self.store, read, lambda error: HeartbeatRead(sid, None, error),
                      self.post_message, repeat_errors=False)

    @on(HeartbeatRead)
    def _on_heartbeat(self, message: HeartbeatRead) -> None:
        if message.session_id == self.session_id and message.row is not None:
            self._session_row = message.row
            if self.state.status in ("running", "paused"):
                self.check_runner()

    @property
    def polls(self) -> int:
        """Reads of the event log so far (tests, benchmarks)."""
        return self._follower.polls

    @on(FollowProblem)
    def _on_problem(self, message: FollowProblem) -> None:
        if message.reason and (message.session_id == self.session_id):
            self.notify(message.reason, title="Session", severity="error", timeout=15)

    @on(EventsArrived)
    def _on_events(self, message: EventsArrived) -> None:
        if message.session_id == self.session_id:
            self.ingest(message.events)

    def ingest(self, events: list[ev.Event]) -> None:
        """Fold a batch of events and update only what changed."""
        if not events:
            return
        first = self.state.last_seq == 0
        changes = Changes()
        for event in events:
            apply_changes(self.state, event, changes)
        if first:
            self._load_references()
            if self._session_row is not None and self.state.status in ("running", "paused"):
                self.check_runner()   # the heartbeat came before the events: read it now, not a tick later
        if len(events) >= FREEZE_AFTER:
            # A long session's fold lives as long as the screen: keep it out of the garbage
            # collector's full passes, which otherwise stall a 1,000-node console ~200 ms each.
            gc.freeze()
        if changes.live:
            self.query_one(NodeDetail).sync_live(self.state)
        self._update_widgets(changes.nodes, changes.guidance, changes.subtrees, changes.output, changes.scores)

    def _update_widgets(self, dirty: set[int], guidance: set[int], subtree: set[int],
                        output: dict[int, list[str]], scores: bool) -> None:
        with memoised(self.state):  # the tree, the scoreboard and the plot ask for the same best nodes
            self._redraw(dirty, guidance, subtree, output, scores)

    def _redraw(self, dirty: set[int], guidance: set[int], subtree: set[int],
                output: dict[int, list[str]], scores: bool) -> None:
        state = self.state
        # the ★: the same choice as the final one (engine.session.selection), by the criterion in force
        self.best = views.best_id(state, self.view_criterion)
        tree = self.query_one(SearchTree)
        tree.sync(state, dirty, guidance, self.best, self._frame, now=self.now())
        for nid in subtree:
            tree.refresh_subtree(state, nid, self.best)
        detail = self.query_one(NodeDetail)
        shown = False
        if self._auto_select and state.nodes:
            target = state.running_node if state.running_node is not None else max(state.nodes)
            self._auto_target = target
            if target != self._selected:
                self._select(target, move_cursor=True)
                shown = True
        if not shown and self._selected in dirty:
            detail.show(state, self._selected)
        if self._selected in output and self._selected not in dirty:
            detail.append_output(self._selected, "".join(output[self._selected]))
        if state.running_node is not None or detail._running_now is not None:
            now = self.now()
            if not self.follow_enabled and state.running_node in state.nodes:  # a replay: no clock ticks
                tree.spin(state, self._frame, now)
            detail.sync_running(state, now)
        if scores or dirty:
            self.query_one(Scoreboard).sync(state)
            self.query_one(ComparisonPlot).sync(state, self.best)
        ended = views.ended(state)
        self._follower.longest_wait = ENDED_POLL if ended else IDLE_POLL
        summary = self.key_for("summary")
        if ended and self._was_live and self.follow_enabled and summary:
            self.notify(f"The session has ended: {summary} shows its summary (the final choice with its intervals, "
                        "what each guidance changed).", title="Session summary", timeout=12)
        self._was_live = not ended and state.status != "new"
        self._sync_status()

    def sync_all(self) -> None:
        """Rebuild every widget from the current state (mount, replay seeks)."""
        tree = self.query_one(SearchTree)
        tree.reset()
        self._update_widgets(set(self.state.nodes), set(self.state.guidance), set(), {}, True)
        if self._selected is not None and self._selected in self.state.nodes:
            self.query_one(NodeDetail).show(self.state, self._selected)
        else:   # nothing selected (or a replay seek removed it): the pane says what to do
            self._selected = None
            self.query_one(NodeDetail).show(self.state, None)

    def _sync_status(self) -> None:
        self._sync_guidance_input()
        self.query_one(StatusBar).sync(self.state, read_only=self.read_only or not self.follow_enabled,
                                       now=self.clock(), replay=self.replay_label(), runner=self.runner,
                                       criterion=self.view_criterion, live=self.live_reply())
        board = self._board or self.query_one(Scoreboard)
        self._board = board
        board.set_unsandboxed(self.state.unsandboxed)
        # the footer is rebuilt only when what the keys can do changes (not on every clock tick)
        board = self._board or self.query_one(Scoreboard)
        self._board = board
        key = (self.state.status, self.runner, self.read_only, self.state.stop_requested, board.can_baselines,
               board.no_baselines(), self._training is None)
        if key != self._bindings_key:
            self._bindings_key = key
            self.refresh_bindings()

    def replay_label(self) -> str | None:
        return None

    def live_reply(self, state: SessionState | None = None) -> dict[str, Any] | None:
        """The reply being written: its progress from the events, its text (and the latest
        tokens/s) from the live side channel, which is never stored (engine.session.live_reply)."""
        from engine.session import live_reply

        state = state or self.state
        current = state.live_reply
        if current is None:
            return None
        side = live_reply.read(live_reply.live_path(self.store.path, self.session_id)) if self.follow_enabled else None
        merged = dict(current)
        if side and side.get("role") == current.get("role") and side.get("step") == current.get("step"):
            merged.update(side)
        return merged

    _guidance: GuidanceInput | None = None  # looked up on mount: a query walks the whole screen
    _board: Scoreboard | None = None

    def _sync_guidance_input(self) -> None:
        """Guidance only reaches a session that can still take it: say so instead of failing later."""
        box = self._guidance
        if box is None:
            return
        closed = views.ended(self.state)
        if closed != box.disabled:
            box.disabled = closed
            resumable = "" if self.state.status == "finished" else " (resume it from Sessions, l)"
            box.placeholder = (f"session {self.state.status}: guidance is closed{resumable}"
                               if closed else GuidanceInput.PLACEHOLDER)

    def now(self) -> float | None:
        """The clock a running node's time is measured by: the wall clock while something runs
        the session, else the time of its last event (a replay, a dead runner)."""
        if self.read_only or not self.follow_enabled or self.runner == "stopped":
            return self.state.last_ts
        return self.clock()

    def _tick(self) -> None:
        self._frame = int(self.clock() * 2)
        if self.state.running_node is not None and self.runner != "stopped":
            now = self.now()
            self.query_one(SearchTree).spin(self.state, self._frame, now)
            self.query_one(NodeDetail).sync_running(self.state, now)
        if self.state.status in ("running", "paused"):
            self._sync_status()
        if self.state.live_reply is not None:   # the side channel moves between two llm_stream events
            self.query_one(NodeDetail).sync_live(self.state)

    # -- is anything still running this session? ------------------------------------------
    def check_runner(self) -> str | None:
        """The session's heartbeat, as the heartbeat worker last read it, and, when the runner is
        gone (kill -9, crash, a closed machine), say so instead of a ticking clock."""
        if not self.follow_enabled:
            return None
        if self.proc is not None and self.proc.poll() is None:
            status = "alive"  # our own child (the runner, or one about to become it) still runs
        elif self._session_row is None:
            return self.runner  # not read yet, or not created yet: keep what we knew
        else:
            status = runner_state(self._session_row, self.proc)
        if status != self.runner:
            previous, self.runner = self.runner, status
            if status == "stopped" and self.state.status in ("running", "paused"):
                self.notify("Nothing is running this session any more: its runner process was killed or "
                            "crashed. Everything recorded is kept; press u to resume it.",
                            title="Runner stopped", severity="error", timeout=20)
            elif status == "alive" and previous == "stopped":
                self.notify("The session's runner is running again.", title="Runner", timeout=6)
            self._sync_status()
        return status

    # -- selection ------------------------------------------------------------------------
    def _select(self, node_id: int | None, move_cursor: bool = False) -> None:
        self._selected = node_id
        self.query_one(NodeDetail).show(self.state, node_id)
        if move_cursor and node_id is not None:
            # now, so a new node costs one frame; before the first layout the tree has no size to scroll in
            if self.query_one(SearchTree).size.height:
                self._move_cursor(node_id)
            else:
                self.call_after_refresh(self._move_cursor, node_id)

    def _move_cursor(self, node_id: int) -> None:
        if node_id != self._selected:
            return
        self.query_one(SearchTree).move_to(node_id)

    @on(SearchTree.NodeHighlighted)
    def _on_highlight(self, event: SearchTree.NodeHighlighted) -> None:
        data = event.node.data
        if not (isinstance(data, tuple) and data[0] == "node"):
            return
        if self.query_one(SearchTree).manual:
            self._auto_select = False
        if self._auto_select and data[1] != self._auto_target:
            return  # a cursor move we made ourselves (or the initial line): keep following
        if data[1] != self._selected:
            self._select(data[1])

    @on(SearchTree.NodeSelected)
    def _on_selected(self, event: SearchTree.NodeSelected) -> None:
        # an explicit choice (Enter / click) stops following the newest node
        self._auto_select = False
        data = event.node.data
        if isinstance(data, tuple) and data[0] == "node" and data[1] != self._selected:
            self._select(data[1])

    @property
    def selected_node(self) -> int | None:
        return self._selected

    # -- steering -------------------------------------------------------------------------
    def why_not(self, action: str) -> str | None:
        """Why a steering key cannot act in this state (None: it can). The footer and the palette
        offer only the keys that can; pressing another one says this."""
        if action == "train_baselines":
            return self.why_not_train()
        return steering_refusal(action, self.state, read_only=self.read_only, runner=self.runner,
                                keys=self.keys)

    @property
    def keys(self) -> dict[str, str]:
        """Action -> the key this screen binds to it: a hint names a key only where the screen has
        one (a participant's console has no r, u, b or l)."""
        if self._keys is None:
            self._keys = screen_keys((key, b) for key, bindings in self._bindings.key_to_bindings.items()
                                     for b in bindings)
        return self._keys

    def key_for(self, action: str) -> str | None:
        return self.keys.get(action)

    _keys: dict[str, str] | None = None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "summary":
            return views.ended(self.state)
        if action in OFFERED_WHEN_ABLE:  # not offered unless it can act: the footer and the palette agree
            return self.why_not(action) is None and fits_the_p_key(action, self.state.status)
        return True

    def on_key(self, event: events.Key) -> None:
        """A steering key that cannot act now says why instead of doing nothing."""
        actions = key_actions(self._bindings.key_to_bindings.get(event.key, ())).get(event.key)
        if not actions or any(self.check_action(a, ()) for a in actions):
            return
        bound = self.active_bindings.get(event.key)
        if bound is not None and bound.binding.action not in actions:
            return  # this screen binds the key to something else (a replay's `b`: the previous node)
        reason = next((r for r in map(self.why_not, actions) if r), None)
        if reason:
            event.stop()
            self.notify(reason, title="Not now", severity="warning", timeout=6)

    @property
    def live(self) -> bool:
        return not self.read_only and self.state.status in ("new", "running", "paused")

    def _command(self, kind: str, payload: dict[str, Any] | None = None, *, note: str) -> bool:
        try:
            self.store.issue_command(self.session_id, kind, payload or {}, by="console")
        except Exception as exc:  # noqa: BLE001 - every failure reaches the user as a notification
            self.notify(f"could not send {kind}: {exc}", severity="error", title="Steering")
            return False
        if self.runner == "stopped":
            note += " (Queued: the runner is stopped; it applies when you resume with u.)"
        self.notify(note, title="Steering", timeout=4)
        return True

    def action_pause(self) -> None:
        if self.state.status == "paused":
            self.action_resume()
        else:
            self._command("pause", note="Pause requested: the running step finishes, no new step starts "
                                        "until you resume (p).")

    def action_resume(self) -> None:
        self._command("resume", note="Resume requested.")

    def action_stop(self) -> None:
        from befair_tui.screens.confirm import ConfirmModal

        def done(ok: bool | None) -> None:
            if ok:
                self._command("stop", {"interrupt": True}, note="Stop requested.")

        self.app.push_screen(
            ConfirmModal("Stop this session? The running step is interrupted; everything so far is kept.",
                         yes="Stop session", no="Keep running"), done)

    def action_guide(self) -> None:
        box = self.query_one(GuidanceInput)
        if box.disabled:
            self.notify(f"This session is {self.state.status}; guidance was not sent.", severity="warning")
            return
        box.focus()

    @on(GuidanceInput.Guide)
    def _on_guide(self, message: GuidanceInput.Guide) -> None:
        if self.read_only or views.ended(self.state):
            self.notify("This session is not running; guidance was not sent.", severity="warning")
            return
        payload: dict[str, Any] = {"text": message.text}
        if message.node_scope:
            if self._selected is None:
                self.notify("Select a node first (or press Enter for global guidance).", severity="warning")
                return
            payload["node_id"] = self._selected
            note = f"Guidance for node {self._selected} sent."
        else:
            note = "Guidance sent to the agent."
        if self._command("guide", payload, note=note):
            self.query_one(SearchTree).focus()

    def _need_selected(self) -> int | None:
        if self._selected is None:
            self.notify("Select a node in the search tree first.", severity="warning")
        return self._selected

    def action_expand(self) -> None:
        nid = self._need_selected()
        if nid is not None:
            self._command("expand", {"node_id": nid}, note=f"Node {nid} will be expanded next.")

    def action_prune(self) -> None:
        from befair_tui.screens.confirm import ConfirmModal

        nid = self._need_selected()
        if nid is None:
            return
        below = self._descendants(nid)
        what = f"node {nid}" + (f" and the {below} node(s) below it" if below else "")

        def done(ok: bool | None) -> None:
            if ok:
                self._command("prune", {"node_id": nid}, note=f"Node {nid} and its subtree pruned.")

        self.app.push_screen(
            ConfirmModal(f"Prune {what}? The search will never expand "
                         + ("them again. They stay" if below else "it again. It stays")
                         + " in the tree (marked ✂) with everything measured so far.", yes="Prune", no="Keep"),
            done)

    def _descendants(self, node_id: int) -> int:
        count, stack = 0, list(self.state.nodes[node_id].children) if node_id in self.state.nodes else []
        while stack:
            nid = stack.pop()
            if nid in self.state.nodes:
                count += 1
                stack.extend(self.state.nodes[nid].children)
        return count

    def action_add_steps(self) -> None:
        from befair_tui.screens.add_steps import AddStepsModal

        base = max(self.state.budget, self.state.agent_steps)

        def done(n: int | None) -> None:
            if n:
                steps = max(self.state.budget, self.state.agent_steps) + n
                self._command("set_budget", {"steps": steps}, note=f"Step budget raised by {n} to {steps}.")

        self.app.push_screen(AddStepsModal(base, self.state.agent_steps), done)

    def action_toggle_split(self) -> None:
        """Test figures (default) or validation figures, in the scoreboard and the plot together."""
        self.split = "validation" if self.split == "test" else "test"
        for widget in (self.query_one(Scoreboard), self.query_one(ComparisonPlot)):
            widget.set_split(self.split)
        self.query_one(Scoreboard).sync(self.state)
        self.query_one(ComparisonPlot).sync(self.state, self.best)
        self.notify(f"Scoreboard and plot: {'validation' if self.split == 'validation' else 'test'} figures "
                    "(v switches back).", timeout=3)

    def action_choose_criterion(self) -> None:
        """What ★ follows. Live: a steering command (recorded; the next improve follows it).
        A replay or an ended session: this reader's view only."""
        from befair_tui.screens.criterion import CriterionModal

        live = self.live and self.runner != "stopped"
        current = self.view_criterion or views.session_criterion(self.state)

        def done(criterion: str | None) -> None:
            if criterion is None or criterion == current:
                return
            words = selection.CRITERION_LABEL[criterion]
            if live:
                self._command("set_criterion", {"criterion": criterion},
                              note=f"★ will follow {words}; the search improves the best node by it from the next "
                                   "step.")
                return
            self.view_criterion = None if criterion == views.session_criterion(self.state) else criterion
            self.query_one(Scoreboard).criterion = self.view_criterion
            self.sync_all()
            self.notify(f"★ shows the best by {words} here (view only: the session's record is unchanged).",
                        timeout=5)

        self.app.push_screen(CriterionModal(current, live=live), done)

    def action_choose_feedback(self) -> None:
        """What the agent is shown of befair's measurements: a recorded steering command."""
        from befair_tui.screens.feedback import FeedbackModal

        current = feedback.current_feedback(self.state)

        def done(value: str | None) -> None:
            if value is None or value == current:
                return
            self._command("set_feedback", {"feedback": value},
                          note=f"From the next step the agent is shown {feedback.FEEDBACK_WORDS[value]}.")

        self.app.push_screen(FeedbackModal(current, live=True), done)

    def action_summary(self) -> None:
        from befair_tui.screens.summary import SummaryModal

        self.app.push_screen(SummaryModal(self.store, self.state))

    def action_resume_runner(self) -> None:
        """Start `befair resume SESSION --headless` detached (launch.resume_argv) and follow it."""
        if self.check_action("resume_runner", ()) is not True:
            self.notify("This session's runner is not stopped; nothing to resume.", severity="warning")
            return
        navigator(self.app).resume_session(self.session_id)

    def action_sessions(self) -> None:
        navigator(self.app).action_open_sessions()

    def action_detail_tab(self, tab: str) -> None:
        self.query_one(NodeDetail).show_tab(tab)

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < 100, "-narrow")

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "follow")
        self.workers.cancel_group(self, "baselines")  # the training itself goes on, detached

