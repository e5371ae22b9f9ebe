"""The status line: level, coder, step k/N, RUNNING/PAUSED/FINISHED, elapsed, tokens, cost, and
the trust markers: UNSANDBOXED (agent code ran without the sandbox) and RUNNER STOPPED (the
session says running but its process is gone: no ticking clock, `u` resumes it)."""
from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from engine.session.state import SessionState

from befair_tui.format import RUNNER_STOPPED, clock, coder_label, elapsed, tokens, unsandboxed_badge

STATUS_STYLE = {
    "RUNNING": "bold black on green", "PAUSED": "bold black on yellow", "FINISHED": "bold white on blue",
    "STOPPED": "bold white on magenta", "FAILED": "bold white on red", "WAITING": "bold black on grey70",
    "REPLAY": "bold white on dark_cyan", RUNNER_STOPPED: "bold white on red",
}


def _asking(state: SessionState) -> str | None:
    """The step the coder was asked for and has not answered yet (no token streamed so far)."""
    if not state.decisions or state.running_node is not None:
        return None
    last = state.decisions[-1]
    newest = max((n.created_seq for n in state.nodes.values()), default=0)
    action = last.get("action")
    return str(action) if action in ("draft", "improve", "debug") and last.get("seq", 0) > newest else None


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; padding: 0 1; }
    """

    def sync(self, state: SessionState, *, read_only: bool, now: float | None = None,
             replay: str | None = None, runner: str | None = None, live: dict | None = None) -> None:
        """`runner`: engine.session.liveness.runner_status of a followed session (None: unknown)."""
        word = {"new": "WAITING", "running": "RUNNING", "paused": "PAUSED", "finished": "FINISHED",
                "stopped": "STOPPED", "failed": "FAILED"}.get(state.status, state.status.upper())
        if state.status == "running" and state.stop_requested:
            word = "STOPPING"
        dead = runner == "stopped" and state.status in ("running", "paused") and not read_only
        if dead:
            word = RUNNER_STOPPED
        compact = self.size.width and self.size.width < 110
        text = Text(no_wrap=True, overflow="ellipsis")
        if not compact:
            text.append("befair · ", style="bold")
        text.append(f" {word} ", style=STATUS_STYLE.get(word, "bold reverse"))
        if state.unsandboxed:  # a trust marker: before anything a narrow terminal could clip
            text.append(" ")
            text.append_text(unsandboxed_badge(self._theme()))
        if dead:
            text.append(" (u: resume)", style="bold red")
        if replay:
            text.append(f" {replay} ", style=STATUS_STYLE["REPLAY"])
        text.append(f" {state.level or '?'} · ")
        coder = ("simulated agent" if compact else coder_label(state.coder)) if state.simulated \
            else coder_label(state.coder)
        text.append(coder, style="bold magenta" if state.simulated else "")
        text.append(f" · step {state.agent_steps}/{state.budget}")
        live = live if live is not None else state.live_reply
        if live and live.get("tokens"):   # the call in progress: tokens so far, and how fast
            rate = live.get("recent_tokens_per_s", live.get("tokens_per_s"))
            speed = f" {float(rate):.1f}/s" if rate is not None else ""
            text.append(f" · {live.get('role')} {int(live['tokens']):,} tok{speed}", style="bold")
        elif state.status == "running" and not dead and not read_only and (asked := _asking(state)):
            text.append(f" · {asked}: model reading the prompt", style="bold")
        # a dead runner: the clock stops at its last event instead of ticking on
        text.append(f" · {clock(elapsed(state, read_only=read_only or dead, now=now))}")
        total = state.tokens_in + state.tokens_out
        text.append(f" · {tokens(total)} tok ${state.cost:.2f}")
        key = (text.plain, tuple(text.spans), compact)
        if key != getattr(self, "_last_key", None):  # unchanged: nothing to redraw
            self._last_key = key
            self.update(text, layout=False)  # one line, always: no layout pass

    def _theme(self) -> dict[str, str] | None:
        try:
            return self.app.theme_variables
        except Exception:  # noqa: BLE001 - not mounted
            return None
