"""What the Live, Replay and Participant consoles share: their widgets, drawn from the controller's
decisions (befair_tui.console.controller), the selection, the keys and why one cannot act, the view
keys (split, ★ criterion, summary, node panel tabs) and the reference rows.

The controller decides; this screen only draws. A worker reads the reference rows (they only post
ReferencesRead); the screen is the one owner that changes widgets. Each console composes this with
the parts it needs (console_follow, console_steering, console_baselines).
"""
from __future__ import annotations

import gc
from collections.abc import Hashable
from typing import Any

from textual import events, on, work
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.screen import Screen

from baselines.reference import reference_rows
from engine.session import selection, views
from engine.session.state import SessionState
from engine.session.store import SessionStore

from befair_tui.console.controller import ConsoleController, Redraw
from befair_tui.console.steering import OFFERED_WHEN_ABLE, fits_the_p_key
from befair_tui.messages import ReferencesRead
from befair_tui.screens.console_keys import (CONSOLE_BINDINGS, FOOTER_DROP, declared_bindings, key_actions,
                                             screen_keys)
from befair_tui.widgets.comparison_plot import ComparisonPlot
from befair_tui.widgets.guidance_input import GuidanceInput
from befair_tui.widgets.keys_footer import KeysFooter
from befair_tui.widgets.node_detail import NodeDetail
from befair_tui.widgets.scoreboard import Scoreboard
from befair_tui.widgets.search_tree import SearchTree
from befair_tui.widgets.status_bar import StatusBar


class ConsoleView(Screen[None]):
    # The console's keys; a replay binds its own over them (each steering key there says why it
    # cannot act), a participant's console has its own instead (inherit_bindings=False).
    BINDINGS = [*CONSOLE_BINDINGS]
    FOOTER_DROP = FOOTER_DROP

    def __init_subclass__(cls, inherit_bindings: bool = True, **kwargs: Any) -> None:
        super().__init_subclass__(inherit_bindings=inherit_bindings, **kwargs)
        cls.keys_start_here = not inherit_bindings   # console_keys.declared_bindings

    keys_start_here = False

    def __init__(self, store: SessionStore, session_id: str, ctl: ConsoleController) -> None:
        super().__init__()
        self.store = store
        self.session_id = session_id
        self.ctl = ctl
        self._frame = 0   # the spinner's frame (a followed session's clock moves it)
        self._bindings_key: Hashable = None
        self._keys: dict[str, str] | None = None
        self._guidance: GuidanceInput | None = None  # looked up on mount: a query walks the whole screen
        self._board: Scoreboard | None = None

    @property
    def state(self) -> SessionState:
        return self.ctl.state

    @property
    def best(self) -> int | None:
        return self.ctl.best

    @property
    def runner(self) -> str | None:
        return self.ctl.runner

    @property
    def split(self) -> str:
        return self.ctl.split

    @property
    def selected_node(self) -> int | None:
        return self.ctl.selected

    @property
    def live(self) -> bool:
        return self.ctl.live

    @property
    def scoreboard(self) -> Scoreboard:
        if self._board is None:
            self._board = self.query_one(Scoreboard)
        return self._board

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
        """What each console has below the plot (guidance, a timeline, the participant's bar)."""
        raise NotImplementedError

    def on_mount(self) -> None:
        from befair_tui.widgets.conversation import ConversationView

        inputs = self.query(GuidanceInput)
        self._guidance = inputs.first() if inputs else None
        self.query_one(ConversationView).live_source = self.ctl.live_reply
        tree = self.query_one(SearchTree)
        tree.border_title = "Search tree · val AUC · gap"
        self.scoreboard.train_key = self.key_for("train_baselines")
        self._load_references()
        tree.focus()
        self.sync_all()

    # -- drawing what the controller decided -----------------------------------------------
    def apply(self, redraw: Redraw | None) -> None:
        if redraw is None:
            return
        state = self.ctl.state
        if redraw.references:
            self._load_references()
        if redraw.freeze:
            # A long session's fold lives as long as the screen: keep it out of the garbage
            # collector's full passes, which otherwise stall a 1,000-node console ~200 ms each.
            gc.freeze()
        detail = self.query_one(NodeDetail)
        if redraw.live:
            detail.sync_live(state)
        if redraw.rebuild:
            self.query_one(SearchTree).reset()
        with redraw.drawing(state):
            self._redraw(redraw)
        if redraw.rebuild:   # nothing selected (or a replay seek removed it): the pane says what to do
            detail.show(state, self.ctl.selected)

    def _redraw(self, r: Redraw) -> None:
        ctl, state = self.ctl, self.ctl.state
        tree, detail = self.query_one(SearchTree), self.query_one(NodeDetail)
        tree.sync(state, r.nodes, r.guidance, r.best, self._frame, now=ctl.now())
        for nid in r.subtrees:
            tree.refresh_subtree(state, nid, r.best)
        selected = ctl.selected
        if r.select is not None:
            self._select(r.select, move_cursor=True)
        elif selected in r.nodes:
            detail.show(state, selected)
        if selected in r.output and selected not in r.nodes:
            detail.append_output(selected, "".join(r.output[selected]))
        if state.running_node is not None or detail._running_now is not None:
            now = ctl.now()
            if r.spin:
                tree.spin(state, self._frame, now)
            detail.sync_running(state, now)
        if r.scores or r.nodes:
            self.query_one(Scoreboard).sync(state)
            self.query_one(ComparisonPlot).sync(state, r.best)
        self._sync_status()

    def sync_all(self) -> None:
        """Rebuild every widget from the current state (mount, replay seeks, another criterion)."""
        self.apply(self.ctl.everything())

    def _sync_status(self) -> None:
        """The header, and whatever else follows the session's status (each console's own)."""
        raise NotImplementedError

    def refresh_bindings_on(self, key: Hashable) -> None:
        """Rebuild the footer only when what the keys can do changes (not on every clock tick)."""
        if key != self._bindings_key:
            self._bindings_key = key
            self.refresh_bindings()

    # -- selection ------------------------------------------------------------------------
    def _select(self, node_id: int | None, move_cursor: bool = False) -> None:
        self.ctl.selected = node_id
        self.query_one(NodeDetail).show(self.ctl.state, node_id)
        if move_cursor and node_id is not None:
            # now, so a new node costs one frame; before the first layout the tree has no size to scroll in
            if self.query_one(SearchTree).size.height:
                self._move_cursor(node_id)
            else:
                self.call_after_refresh(self._move_cursor, node_id)

    def _move_cursor(self, node_id: int) -> None:
        if node_id == self.ctl.selected:
            self.query_one(SearchTree).move_to(node_id)

    @on(SearchTree.NodeHighlighted)
    def _on_highlight(self, event: SearchTree.NodeHighlighted) -> None:
        data = event.node.data
        if isinstance(data, tuple) and data[0] == "node" and \
                self.ctl.highlighted(data[1], by_hand=self.query_one(SearchTree).manual):
            self._select(data[1])

    @on(SearchTree.NodeSelected)
    def _on_selected(self, event: SearchTree.NodeSelected) -> None:
        data = event.node.data
        node = data[1] if isinstance(data, tuple) and data[0] == "node" else None
        if self.ctl.chosen(node):
            self._select(node)

    # -- keys -----------------------------------------------------------------------------
    @property
    def keys(self) -> dict[str, str]:
        """Action -> the key this screen binds to it: a hint names a key only where the screen has
        one (a participant's console has no r, u, b or l)."""
        if self._keys is None:
            self._keys = screen_keys((b.key, b) for b in declared_bindings(type(self)))
        return self._keys

    def key_for(self, action: str) -> str | None:
        return self.keys.get(action)

    def why_not(self, action: str) -> str | None:
        """Why a steering key cannot act in this state (None: it can). The footer and the palette
        offer only the keys that can; pressing another one says this."""
        return self.ctl.steering_refusal(action, self.keys)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if not self.ctl.reader.offers(action):
            return False
        if action == "summary":
            return views.ended(self.ctl.state)
        if action in OFFERED_WHEN_ABLE:  # not offered unless it can act: the footer and the palette agree
            return self.why_not(action) is None and fits_the_p_key(action, self.ctl.state.status)
        return True

    def on_key(self, event: events.Key) -> None:
        """A steering key that cannot act now says why instead of doing nothing."""
        actions = key_actions(b for b in declared_bindings(type(self)) if b.key == event.key).get(event.key)
        if not actions or any(self.check_action(a, ()) for a in actions):
            return
        bound = self.active_bindings.get(event.key)
        if bound is not None and bound.binding.action not in actions:
            return  # this screen binds the key to something else (a replay's `b`: the previous node)
        reason = next((r for r in map(self.why_not, actions) if r), None)
        if reason:
            event.stop()
            self.notify(reason, title="Not now", severity="warning", timeout=6)

    def _command(self, kind: str, payload: dict[str, Any] | None = None, *, note: str) -> bool:
        """Send a steering command the way this console's reader does; say what became of it."""
        error = self.ctl.reader.send(self.session_id, kind, payload or {})
        if error:
            self.notify(error, severity="error", title="Steering")
            return False
        self.notify(self.ctl.reader.sent(note, self.ctl.runner), title="Steering", timeout=4)
        return True

    # -- what the reader looks at ---------------------------------------------------------
    def action_toggle_split(self) -> None:
        """Test figures (default) or validation figures, in the scoreboard and the plot together."""
        split = self.ctl.toggle_split()
        for widget in (self.query_one(Scoreboard), self.query_one(ComparisonPlot)):
            widget.set_split(split)
        self.query_one(Scoreboard).sync(self.ctl.state)
        self.query_one(ComparisonPlot).sync(self.ctl.state, self.ctl.best)
        self.notify(f"Scoreboard and plot: {'validation' if split == 'validation' else 'test'} figures "
                    "(v switches back).", timeout=3)

    def action_choose_criterion(self) -> None:
        """What ★ follows. Live: a steering command (recorded; the next improve follows it).
        A replay or an ended session: this reader's view only."""
        from befair_tui.screens.criterion import CriterionModal

        ctl = self.ctl
        live = ctl.steers_criterion()
        current = ctl.view_criterion or views.session_criterion(ctl.state)

        def done(criterion: str | None) -> None:
            if criterion is None or criterion == current:
                return
            words = selection.CRITERION_LABEL[criterion]
            if live:
                self._command("set_criterion", {"criterion": criterion},
                              note=f"★ will follow {words}; the search improves the best node by it from the next "
                                   "step.")
                return
            ctl.view_by(criterion)
            self.query_one(Scoreboard).criterion = ctl.view_criterion
            self.sync_all()
            self.notify(f"★ shows the best by {words} here (view only: the session's record is unchanged).",
                        timeout=5)

        self.app.push_screen(CriterionModal(current, live=live), done)

    def action_summary(self) -> None:
        from befair_tui.screens.summary import SummaryModal

        self.app.push_screen(SummaryModal(self.store, self.ctl.state))

    def action_detail_tab(self, tab: str) -> None:
        self.query_one(NodeDetail).show_tab(tab)

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.width < 100, "-narrow")

    # -- the reference rows ---------------------------------------------------------------
    @work(thread=True, exclusive=True, group="references", name="read-references")
    def _load_references(self) -> None:
        """Read the reference rows (and the session's level, for a session just spawned, whose
        events have not come yet) in a thread; only posts ReferencesRead."""
        try:
            trained, rows = reference_rows(self.store)
            try:
                level = self.store.session(self.session_id).get("level") or ""
            except Exception:  # noqa: BLE001 - the session may not exist yet (just spawned)
                level = ""
            self.post_message(ReferencesRead(trained, rows, level))
        except Exception as exc:  # noqa: BLE001 - said on screen
            self.post_message(ReferencesRead([], [], "", error=str(exc)))
        finally:
            self.store.close()   # this thread's connection

    @on(ReferencesRead)
    def _on_references(self, message: ReferencesRead) -> None:
        state = self.ctl.state
        baselines: list[dict[str, Any]] = []
        published: list[dict[str, Any]] = []
        if message.error:
            self.notify(f"could not read baselines: {message.error}", severity="warning")
        else:
            baselines = views.baseline_points(message.trained, state)
            published = self.ctl.reader.shown_published(views.published_points(message.rows,
                                                                                state.level or message.level))
        board, plot = self.query_one(Scoreboard), self.query_one(ComparisonPlot)
        board.set_references(baselines, published)
        board.can_baselines = self.ctl.can_train_baselines()
        plot.set_references(baselines, published)
        board.sync(state)
        plot.sync(state, self.ctl.best)
