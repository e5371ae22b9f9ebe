"""The console: one screen for live, headless-elsewhere, resumed, imported and replayed sessions.

It only reads events and writes steering commands. A thread worker polls the event log and
posts batches (EventsArrived); this screen is the one owner that folds them into SessionState
and updates the widgets.
"""
from __future__ import annotations

import gc
import subprocess
import time
from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Footer, Tree
from textual.worker import get_current_worker

from engine.session import events as ev
from engine.session import views
from engine.session.state import SessionState, apply, memoised, new_state
from engine.session.store import SessionStore

from befair_tui.compare import baseline_points, published_points, reference_rows
from befair_tui.launch import log_tail, runner_state
from befair_tui.messages import EventsArrived, FollowProblem
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.guidance_input import GuidanceInput
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.search_tree import SearchTree
from befair_tui.widgets.status_bar import StatusBar

STEERING = {"pause", "resume", "stop", "guide", "expand", "prune", "add_steps"}
NEEDS_RUNNER = {"pause", "resume", "stop"}  # steering that only a live runner can carry out
RUNNER_CHECK = 0.9  # seconds between two reads of the session row's heartbeat (every other tick)
# Polling the event log: every poll_interval while events arrive, then slower and slower while
# nothing happens, up to IDLE_POLL (a live session) or ENDED_POLL (a finished one, which only a
# resume elsewhere can wake): an idle console costs next to nothing.
IDLE_POLL = 0.6
ENDED_POLL = 2.0
FREEZE_AFTER = 500  # events in one batch (a session opened, a replay seek): freeze what they built
DETAIL_TABS = ("plan", "code", "output", "groups", "audit", "diff", "conversation")
BATCH = 5_000
# Event kinds that can change the scoreboard or the scatter plot.
_SCORE_KINDS = {ev.EVALUATED, ev.EXEC_FINISHED, ev.REVIEW, ev.PRUNED, ev.FINAL_CHOICE,
                ev.SESSION_STARTED, ev.SESSION_FINISHED, ev.NODE_INTERRUPTED}


class ConsoleScreen(Screen):
    BINDINGS = [
        Binding("p", "pause", "Pause", id="pause"),
        Binding("p", "resume", "Resume", id="resume"),
        Binding("s", "stop", "Stop", id="stop"),
        Binding("g", "guide", "Guide", id="guide"),
        Binding("e", "expand", "Expand", id="expand"),
        Binding("x", "prune", "Prune", id="prune"),
        Binding("plus,equals_sign", "add_steps", "Steps", id="add-steps", key_display="+"),
        Binding("v", "toggle_split", "Test / validation figures", id="toggle-split", show=False),
        Binding("u", "resume_runner", "Resume run", id="resume-runner"),
        Binding("l", "sessions", "Sessions", id="sessions"),
        Binding("q", "app.quit", "Quit", id="quit"),
        *[Binding(str(i), f"detail_tab('{tab}')", f"{tab.capitalize()} tab", id=f"detail-{tab}", show=False)
          for i, tab in enumerate(DETAIL_TABS, start=1)],
    ]

    def __init__(self, store: SessionStore, session_id: str, *, read_only: bool = False,
                 proc: subprocess.Popen | None = None, poll_interval: float = 0.15,
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
        self._frame = 0
        self._selected: int | None = None
        self._auto_select = True
        self._auto_target: int | None = None
        self.renders = 0  # how many times the widgets were synced (benchmarks, tests)
        self.runner: str | None = None  # runner_status of a followed session: alive | stopped | finished
        self._runner_checked = float("-inf")
        self.split = "test"  # what the scoreboard and the plot compare: test | validation
        self.polls = 0  # reads of the event log (tests, benchmarks)
        self._poll_max = IDLE_POLL
        self._bindings_key: tuple | None = None

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
        yield Footer(compact=True)

    def compose_bottom(self) -> ComposeResult:
        yield GuidanceInput(id="guidance")

    def on_mount(self) -> None:
        inputs = self.query(GuidanceInput)
        self._guidance = inputs.first() if inputs else None
        from befair_tui.widgets.conversation import ConversationView

        self.query_one(ConversationView).live_source = self.live_reply
        tree = self.query_one(SearchTree)
        tree.border_title = "Search tree · val AUC / gap"
        self._load_references()
        tree.focus()
        if self.follow_enabled:
            self.follow()
            self.set_interval(0.5, self._tick)
        self.sync_all()

    def _load_references(self) -> None:
        baselines: list[dict] = []
        published: list[dict] = []
        try:
            trained, rows = reference_rows(self.store)
            baselines = baseline_points(trained, self.state)
            level = self.state.level or self._level_hint()
            published = published_points(rows, level)
        except Exception as exc:  # noqa: BLE001
            self.notify(f"could not read baselines: {exc}", severity="warning")
        self._baselines, self._published = baselines, published
        self.query_one(Scoreboard).set_references(baselines, published)
        self.query_one(ComparisonPlot).set_references(baselines, published)

    def _level_hint(self) -> str:
        try:
            return self.store.session(self.session_id).get("level") or ""
        except Exception:  # noqa: BLE001 - the session may not exist yet (just spawned)
            return ""

    # -- following the event log ----------------------------------------------------------
    @work(thread=True, exclusive=True, group="follow", name="follow-session")
    def follow(self) -> None:
        """Poll the event log; never touches widgets, only posts messages."""
        worker = get_current_worker()
        after = self.state.last_seq
        store = self.store
        warned_exit = False
        wait = self.poll_interval
        while not worker.is_cancelled:
            try:
                self.polls += 1
                batch = store.events(self.session_id, after, limit=BATCH)
            except Exception as exc:  # noqa: BLE001 - report, keep polling
                self.post_message(FollowProblem(self.session_id, f"cannot read the session: {exc}"))
                time.sleep(1.0)
                continue
            if batch:
                after = batch[-1].seq
                self.post_message(EventsArrived(self.session_id, batch))
                wait = self.poll_interval
                if len(batch) == BATCH:
                    continue
            else:
                if self.proc is not None and not warned_exit:
                    code = self.proc.poll()
                    if code is not None:
                        warned_exit = True
                        time.sleep(self.poll_interval)
                        if not store.events(self.session_id, after, limit=1):
                            self.post_message(self._exit_problem(code, after))
                # nothing new: wait longer next time (a child still starting keeps the fast pace)
                if self.proc is None or self.proc.poll() is not None or after:
                    wait = min(max(self._poll_max, self.poll_interval), wait * 1.5)
            self._sleep(wait, worker)
        store.close()

    def _sleep(self, seconds: float, worker) -> None:
        """Sleep in short slices so that leaving the screen stops the follower promptly."""
        deadline = time.monotonic() + seconds
        while not worker.is_cancelled:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, 0.25))

    def _exit_problem(self, code: int, after: int) -> FollowProblem:
        tail = log_tail(self.store.path, self.session_id)
        if after == 0:
            reason = f"the session process exited (code {code}) before it started"
        elif code != 0:
            reason = f"the session process exited with code {code}"
        else:
            return FollowProblem(self.session_id, "", fatal=False)
        return FollowProblem(self.session_id, reason + (f":\n{tail}" if tail else ""), fatal=True)

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
        dirty: set[int] = set()
        guidance: set[int] = set()
        subtree: set[int] = set()
        output: dict[int, list[str]] = {}
        scores = live = False
        first = self.state.last_seq == 0
        for event in events:
            apply(self.state, event)
            payload, kind = event.payload, event.kind
            nid = payload.get("node_id")
            if kind in (ev.LLM_STREAM, ev.LLM_CALL):
                live = True
                if kind == ev.LLM_STREAM:
                    continue
            if kind == ev.OUTPUT:
                output.setdefault(nid, []).append(payload.get("text") or "")
                continue
            if nid is not None and kind not in (ev.GUIDANCE, ev.POLICY_DECISION):
                dirty.add(nid)
            if kind == ev.NODE_CREATED:
                guidance.update(payload.get("guidance_ids") or [])
                if payload.get("parent_id") is not None:
                    dirty.add(payload["parent_id"])
            elif kind == ev.GUIDANCE:
                guidance.add(payload["guidance_id"])
            elif kind == ev.PRUNED:
                subtree.add(nid)
            elif kind == ev.EXPAND_REQUESTED and nid is not None:
                dirty.add(nid)
            if kind in _SCORE_KINDS:
                scores = True
        if first:
            self._load_references()
        if len(events) >= FREEZE_AFTER:
            # A long session's fold lives as long as the screen: keep it out of the garbage
            # collector's full passes, which otherwise stall a 1,000-node console ~200 ms each.
            gc.freeze()
        if live:
            self.query_one(NodeDetail).sync_live(self.state)
        self._update_widgets(dirty, guidance, subtree, output, scores)

    def _update_widgets(self, dirty: set[int], guidance: set[int], subtree: set[int],
                        output: dict[int, list[str]], scores: bool) -> None:
        with memoised(self.state):  # the tree, the scoreboard and the plot ask for the same best nodes
            self._redraw(dirty, guidance, subtree, output, scores)

    def _redraw(self, dirty: set[int], guidance: set[int], subtree: set[int],
                output: dict[int, list[str]], scores: bool) -> None:
        self.renders += 1
        state = self.state
        self.best = views.best_id(state)  # the ★: the same choice as the final one (views.best_choice)
        tree = self.query_one(SearchTree)
        tree.sync(state, dirty, guidance, self.best, self._frame)
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
        if scores or dirty:
            self.query_one(Scoreboard).sync(state)
            self.query_one(ComparisonPlot).sync(state, self.best)
        self._poll_max = ENDED_POLL if state.status in ("finished", "stopped", "failed") else IDLE_POLL
        self._sync_status()

    def sync_all(self) -> None:
        """Rebuild every widget from the current state (mount, replay seeks)."""
        tree = self.query_one(SearchTree)
        tree.reset()
        self._update_widgets(set(self.state.nodes), set(self.state.guidance), set(), {}, True)
        if self._selected is not None and self._selected in self.state.nodes:
            self.query_one(NodeDetail).show(self.state, self._selected)
        elif self._selected is not None:
            self._selected = None
            self.query_one(NodeDetail).show(self.state, None)

    def _sync_status(self) -> None:
        self._sync_guidance_input()
        self.query_one(StatusBar).sync(self.state, read_only=self.read_only or not self.follow_enabled,
                                       now=self.clock(), replay=self.replay_label(), runner=self.runner,
                                       live=self.live_reply())
        self.query_one(Scoreboard).set_unsandboxed(self.state.unsandboxed)
        # the footer is rebuilt only when what the keys can do changes (not on every clock tick)
        key = (self.state.status, self.runner, self.read_only, self.state.stop_requested)
        if key != self._bindings_key:
            self._bindings_key = key
            self.refresh_bindings()

    def replay_label(self) -> str | None:
        return None

    def live_reply(self, state: SessionState | None = None) -> dict | None:
        """The reply being written: its progress from the events, its text (and the latest
        tokens/s) from the live side channel, which is never stored (engine.session.live)."""
        from engine.session import live

        state = state or self.state
        current = state.live_reply
        if current is None:
            return None
        side = live.read(live.live_path(self.store.path, self.session_id)) if self.follow_enabled else None
        merged = dict(current)
        if side and side.get("role") == current.get("role") and side.get("step") == current.get("step"):
            merged.update(side)
        return merged

    _guidance: GuidanceInput | None = None  # looked up on mount: a query walks the whole screen

    def _sync_guidance_input(self) -> None:
        """Guidance only reaches a session that can still take it: say so instead of failing later."""
        box = self._guidance
        if box is None:
            return
        closed = self.state.status in ("finished", "stopped", "failed")
        if closed != box.disabled:
            box.disabled = closed
            box.placeholder = (f"session {self.state.status}: guidance is closed (resume it from Sessions, l)"
                               if closed else GuidanceInput.PLACEHOLDER)

    def _tick(self) -> None:
        self._frame = int(self.clock() * 2)
        if self.state.status in ("running", "paused"):
            self.check_runner()
        if self.state.running_node is not None and self.runner != "stopped":
            self.query_one(SearchTree).spin(self.state, self._frame)
        if self.state.status in ("running", "paused"):
            self._sync_status()
        if self.state.live_reply is not None:   # the side channel moves between two llm_stream events
            self.query_one(NodeDetail).sync_live(self.state)

    # -- is anything still running this session? ------------------------------------------
    def check_runner(self, *, force: bool = False) -> str | None:
        """Read the session's heartbeat (one row, at most once a second) and, when the runner is
        gone (kill -9, crash, a closed machine), say so instead of a ticking clock."""
        if not self.follow_enabled:
            return None
        mono = time.monotonic()
        if not force and mono - self._runner_checked < RUNNER_CHECK:
            return self.runner
        self._runner_checked = mono
        if self.proc is not None and self.proc.poll() is None:
            status = "alive"  # our own child (the runner, or one about to become it) still runs
        else:
            try:
                status = runner_state(self.store.session(self.session_id), self.proc)
            except Exception:  # noqa: BLE001 - not created yet, or unreadable: keep what we knew
                return self.runner
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

    @on(Tree.NodeHighlighted)
    def _on_highlight(self, event: Tree.NodeHighlighted) -> None:
        data = event.node.data
        if not (isinstance(data, tuple) and data[0] == "node"):
            return
        if self.query_one(SearchTree).manual:
            self._auto_select = False
        if self._auto_select and data[1] != self._auto_target:
            return  # a cursor move we made ourselves (or the initial line): keep following
        if data[1] != self._selected:
            self._select(data[1])

    @on(Tree.NodeSelected)
    def _on_selected(self, event: Tree.NodeSelected) -> None:
        # an explicit choice (Enter / click) stops following the newest node
        self._auto_select = False
        data = event.node.data
        if isinstance(data, tuple) and data[0] == "node" and data[1] != self._selected:
            self._select(data[1])

    @property
    def selected_node(self) -> int | None:
        return self._selected

    # -- steering -------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple) -> bool | None:
        if action == "resume_runner":  # offered only when the session's process is gone
            return (not self.read_only and self.runner == "stopped"
                    and self.state.status in ("running", "paused"))
        if action in NEEDS_RUNNER and self.runner == "stopped" and not self.read_only \
                and self.state.status in ("running", "paused"):
            return None if action != "resume" else False  # nothing would carry them out: dimmed
        if action in STEERING:
            if self.read_only:
                return False
            if self.state.status in ("finished", "stopped", "failed"):
                return None if action != "resume" else False  # shown, dimmed
            # one key, p: "Pause" while running, "Resume" while paused
            if action == "pause" and self.state.status == "paused":
                return False
            if action == "resume" and self.state.status != "paused":
                return False
        return True

    @property
    def live(self) -> bool:
        return not self.read_only and self.state.status in ("new", "running", "paused")

    def _command(self, kind: str, payload: dict | None = None, *, note: str) -> bool:
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
        if self.read_only or self.state.status in ("finished", "stopped", "failed"):
            self.notify("This session is not running; guidance was not sent.", severity="warning")
            return
        payload: dict = {"text": message.text}
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

    def action_resume_runner(self) -> None:
        """Start `befair resume SESSION --headless` detached (launch.resume_argv) and follow it."""
        if self.check_action("resume_runner", ()) is not True:
            self.notify("This session's runner is not stopped; nothing to resume.", severity="warning")
            return
        self.app.resume_session(self.session_id)

    def action_sessions(self) -> None:
        self.app.action_open_sessions()

    def action_detail_tab(self, tab: str) -> None:
        self.query_one(NodeDetail).show_tab(tab)

    def on_resize(self, event) -> None:
        narrow = event.size.width < 100
        self.set_class(narrow, "-narrow")
        for footer in self.query(Footer):  # 80 columns: room for "? Help" (the help names Ctrl+P)
            footer.show_command_palette = not narrow

    def on_unmount(self) -> None:
        self.workers.cancel_group(self, "follow")
