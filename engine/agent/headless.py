"""The headless session view: a progress bar redrawn on a timer and one line per finished node.

Used by `befair run --headless` and `befair resume`; it reads only the session state and
engine.session.views, so what it prints agrees with the console.
"""
from __future__ import annotations

import os
import sys
import threading
import time
from typing import Any, TextIO

from engine.session import events as ev
from engine.session import live_reply, views
from engine.session.selection import CRITERIA, DEFAULT_CRITERION, current_criterion
from engine.session.state import NodeState, SessionState


class Progress:
    """A progress bar line and one line per finished node. On a terminal the bar is redrawn
    every second by a ticker thread (elapsed time, step, the running node's last output line),
    so a long step is never silent."""

    def __init__(self, out: TextIO | None = None, *, quiet: bool = False, width: int = 24, tick: float = 1.0) -> None:
        self.out = out or sys.stdout
        self.quiet = quiet
        self.width = width
        self.tty = hasattr(self.out, "isatty") and self.out.isatty()
        self.started = time.monotonic()
        self._bar_shown = False
        self._lock = threading.RLock()
        self._state: SessionState | None = None
        self._note = ""
        self._ticker: threading.Thread | None = None
        self._stop = threading.Event()
        self.tick = tick
        self.live_path: Any = None       # engine.session.live_reply's file for this session (set once known)
        self._asked_at: float | None = None   # when the coder was asked for the current step

    def start_ticker(self) -> None:
        if self.tty and not self.quiet and self._ticker is None:
            self._ticker = threading.Thread(target=self._tick, daemon=True, name="befair-progress")
            self._ticker.start()

    def stop_ticker(self) -> None:
        self._stop.set()

    def _tick(self) -> None:
        while not self._stop.wait(self.tick):
            state = self._state
            if state is not None and state.status in ("running", "paused", "new"):
                self.bar(state, self._note, live=True)

    def _live_line(self, state: SessionState) -> str:
        node = state.nodes.get(state.running_node) if state.running_node is not None else None
        if node is not None:
            lines = [ln for ln in node.live_output.splitlines() if ln.strip()]
            return f" · {lines[-1].strip()[:60]}" if lines else ""
        if state.live_reply or self._asked_at is not None:
            return self._model_line(state)
        return ""

    def _model_line(self, state: SessionState) -> str:
        """What the model is doing: reading the prompt (no token yet), or writing: tokens so far,
        tokens/s, and the last line it wrote (from the live side channel, never stored)."""
        side = live_reply.read(self.live_path) if self.live_path is not None else None
        current = state.live_reply
        if side is not None and (current is None or side.get("step") == current.get("step")):
            current = {**(current or {}), **{k: v for k, v in side.items() if k != "text"}}
        if not current or not current.get("tokens"):
            waited = time.monotonic() - self._asked_at if self._asked_at is not None else 0.0
            return f" · waiting for the model's first token (reading the prompt) {_clock(waited)}"
        tps = current.get("recent_tokens_per_s", current.get("tokens_per_s"))
        speed = f", {tps:.1f} tok/s" if tps is not None else ""
        text = live_reply.text_for(state.live_reply or current, side).strip().splitlines()
        last = f": {text[-1].strip()[:40]}" if text else ""
        return f" · the model is writing {current.get('role')} ({current.get('tokens')} tokens{speed}){last}"

    def write(self, text: str) -> None:
        if self.quiet:
            return
        with self._lock:
            self._write(text)

    def _write(self, text: str) -> None:
        try:
            if self._bar_shown:
                self.out.write("\r\033[K")
                self._bar_shown = False
            self.out.write(text + "\n")
            self.out.flush()
        except BrokenPipeError:
            self._closed()

    def _closed(self) -> None:
        """The reader of our output went away (`befair run --headless | head`): go quiet and let
        the session run on (a closed pipe must not fail the search)."""
        self.quiet = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.out.fileno())
            os.close(devnull)
        except (OSError, ValueError, AttributeError):
            pass

    def bar(self, state: SessionState, note: str = "", *, live: bool = False) -> None:
        if self.quiet:
            return
        self._state, self._note = state, note
        if live:
            note = note + self._live_line(state)
        budget = max(state.budget, 1)
        done = min(state.agent_steps, budget)
        filled = int(self.width * done / budget)
        elapsed = time.monotonic() - self.started
        line = (f"[{'#' * filled}{'.' * (self.width - filled)}] {state.agent_steps}/{state.budget} steps"
                f"  {_clock(elapsed)}  {note}")
        if self.tty:
            with self._lock:
                try:
                    self.out.write("\r\033[K" + line[:200])
                    self._bar_shown = True
                    self.out.flush()
                except BrokenPipeError:
                    self._closed()

    def __call__(self, event: ev.Event, state: SessionState) -> None:
        kind, p = event.kind, event.payload
        if kind == ev.SESSION_STARTED:
            coder = p.get("coder") or {}
            self.write(f"session {state.session_id} · {state.level} · {coder.get('label')} · budget {state.budget}"
                       + (" · UNSANDBOXED (agent code runs without the sandbox)" if state.unsandboxed else ""))
        elif kind == ev.SESSION_RESUMED:
            ids = p.get("interrupted") or []
            self.write(f"resumed session {state.session_id} at step {state.agent_steps}/{state.budget}"
                       + (f"; interrupted node(s) {', '.join(map(str, ids))}" if ids else ""))
        elif kind == ev.POLICY_DECISION and p.get("action") != "finish":
            self._asked_at = time.monotonic()
            self.bar(state, f"step {state.agent_steps + 1}: {p.get('action')}")
        elif kind == ev.NODE_CREATED:
            self._asked_at = None
            self.bar(state, f"node {p['node_id']} {p['stage']}…")
        elif kind == ev.EXEC_STARTED:
            self.bar(state, f"node {p['node_id']} running…")
        elif kind == ev.AUDITED or (kind == ev.REVIEW and state.nodes[p["node_id"]].status != "ok"
                                    and not state.nodes[p["node_id"]].code):
            self.write(node_line(state, state.nodes[p["node_id"]]))
            self.bar(state)
        elif kind in (ev.PAUSED, ev.RESUMED, ev.GUIDANCE, ev.PRUNED, ev.BUDGET_SET, ev.EXPAND_REQUESTED,
                      ev.STOP_REQUESTED, ev.NODE_INTERRUPTED):
            self.write(f"  · {kind.replace('_', ' ')}: {_short_payload(p)}")
        elif kind == ev.ERROR:
            self.write(f"  ! {p.get('message')}")
        elif kind == ev.FINAL_CHOICE:
            self.write(final_choice_line(p, current_criterion(state)))
        elif kind == ev.SESSION_FINISHED:
            self.write(f"session {state.session_id} {p.get('status')}: {p.get('reason') or ''} "
                       f"({_clock(time.monotonic() - self.started)})")


def final_choice_line(p: dict[str, Any], own: str | None = None) -> str:
    """Each criterion the payload records (older payloads lack some), the session's own marked ★."""
    reasons = p.get("reasons") or {}
    own = p.get("criterion") or own or DEFAULT_CRITERION
    recorded = [c for c in CRITERIA if c in reasons or f"by_{c}" in p]
    return "final choice: " + "; ".join(
        f"{'★ ' if c == own else ''}{c}: {reasons.get(c, p.get('by_' + c))}" for c in recorded)


def _short_payload(p: dict[str, Any]) -> str:
    keep = {k: v for k, v in p.items() if k not in ("command_id",) and v not in (None, "", [])}
    return ", ".join(f"{k}={v}" for k, v in keep.items())


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m:02d}:{s:02d}"


def node_line(state: SessionState, node: NodeState) -> str:
    """views.node_line (the line `befair show` prints), with the run's time."""
    t = f"  ({node.exec_time:.1f} s)" if node.exec_time is not None else ""
    return f"  {views.node_line(state, node)}{t}"
