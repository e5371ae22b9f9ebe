"""The status line: level, coder, the steps taken of the budget, what ★ best means, RUNNING/PAUSED/FINISHED, elapsed,
tokens, cost, and
the trust markers: UNSANDBOXED (agent code ran without the sandbox) and RUNNER STOPPED (the
session says running but its process is gone: no ticking clock, `u` resumes it)."""
from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.widgets import Static

from engine.session import feedback, selection
from engine.session.state import SessionState
from engine.session.views import RUNNER_STOPPED, clock, coder_label, elapsed, paused_clock_words, step_count, tokens

from befair_tui.format import unsandboxed_badge

STATUS_STYLE = {
    "RUNNING": "bold black on green", "PAUSED": "bold black on yellow", "FINISHED": "bold white on blue",
    "STOPPED": "bold white on magenta", "FAILED": "bold white on red", "STARTING": "bold black on grey70",
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


def _call_in_progress(state: SessionState, live: dict[str, Any] | None, dead: bool, read_only: bool,
                      compact: bool = False) -> str:
    """The LLM call in progress: its tokens so far and how fast, or that the model still reads."""
    live = live if live is not None else state.live_reply
    if live and live.get("tokens"):
        rate = live.get("recent_tokens_per_s", live.get("tokens_per_s"))
        speed = f" {float(rate):.1f}/s" if rate is not None else ""
        return f" · {live.get('role')} {int(live['tokens']):,} tok{speed}"
    if state.status == "running" and not dead and not read_only and (asked := _asking(state)):
        return f" · {asked}: {'reading prompt' if compact else 'reading the prompt'}"
    return ""


def _coder(state: SessionState, compact: bool) -> str:
    """Who writes the pipelines; below 110 columns the simulated agent's short name, or the model's
    name alone, at most 12 characters: at 80 columns the call in progress must fit beside it."""
    if not compact:
        return coder_label(state.coder)
    if state.simulated:
        return "simulated agent"
    model = str((state.coder or {}).get("model") or coder_label(state.coder))
    return model if len(model) <= 12 else model[:11] + "…"


BRAND = "befair · "
COMPACT_BELOW = 130   # columns: below, the short words (the full line with the agent's settings needs about 125)


def _agent_settings(state: SessionState, criterion: str | None, compact: bool) -> tuple[tuple[str, str], ...]:
    """What ★ and the search follow, and what the agent is shown (engine.session.views.agent_settings)."""
    words = selection.CRITERION_SHORT if compact else selection.CRITERION_LABEL
    follows = "★" if criterion or compact else "★/search"   # a reader's own view is not the search's
    best = (f" · {follows} {words[criterion or selection.current_criterion(state)]}"
            + (" (view)" if criterion else ""), "bold yellow")
    shown = feedback.current_feedback(state)
    sees = (f" · {'sees' if compact else 'agent sees'} {feedback.FEEDBACK_SHORT[shown]}",
            "bold cyan" if shown == "groups" else "")
    return best, sees


def _fitted(text: Text, parts: list[tuple[str, str]], extras: list[tuple[str, str]], room: int | None,
            compact: bool) -> Text:
    """The line with as much as fits in `room`: the name gives way first (it says nothing about the
    session), then the extras from the last; nothing is cut mid-word."""
    def width() -> int:
        return text.cell_len + sum(len(t) for t, _ in parts + extras)

    if room is not None and not compact and width() > room:
        text = text[len(BRAND):]
    while room is not None and extras and width() > room:
        extras.pop()
    for part, style in parts + extras:
        text.append(part, style=style)
    return text


class StatusBar(Static):
    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; padding: 0 1; }
    """

    def sync(self, state: SessionState, *, read_only: bool, now: float | None = None,
             replay: str | None = None, runner: str | None = None, criterion: str | None = None,
             live: dict[str, Any] | None = None, steps: bool = True, paused_clock: bool | None = None,
             elapsed_clock: bool = True) -> None:
        """`runner`: engine.session.heartbeat.runner_status of a followed session (None: unknown);
        `criterion`: a reader's own view of what ★ follows (None: the session's); `live`: the LLM
        call in progress (tokens so far, tokens/s), from the side channel (default: the state's);
        `steps`: say the step count (a participant's bar says it instead); `paused_clock`: whether
        a paused session's time limit runs on, said beside PAUSED (None: not said); `elapsed_clock`:
        show the time since the start (a participant's bar shows the time left of the limit instead)."""
        self._last_args = (state, {"read_only": read_only, "now": now, "replay": replay, "runner": runner,
                                   "criterion": criterion, "live": live, "steps": steps,
                                   "paused_clock": paused_clock, "elapsed_clock": elapsed_clock})
        dead = runner == "stopped" and state.status in ("running", "paused") and not read_only
        word = RUNNER_STOPPED if dead else _status_word(state)
        compact = bool(self.size.width) and self.size.width < COMPACT_BELOW
        text = Text(no_wrap=True, overflow="ellipsis")
        if not compact:
            text.append(BRAND, style="bold")
        if replay:  # a replay says first whether it plays; the session's state then is secondary
            text.append(f" {replay} ", style=STATUS_STYLE["REPLAY"])
            was = {"new": "before the start", "running": "was running", "paused": "was paused"}.get(
                state.status, f"{state.status}")
            text.append(f" {was}", style="italic")
        else:
            text.append(f" {word} ", style=STATUS_STYLE.get(word, "bold reverse"))
        if state.unsandboxed:  # a trust marker: before anything a narrow terminal could clip
            text.append(" ")
            text.append_text(unsandboxed_badge(self._theme()))
        if dead:
            text.append(" (u: resume)", style="bold red")
        if paused_clock is not None and state.status == "paused" and not dead and not replay:
            text.append(" · ")
            text.append(paused_clock_words(paused_clock), style="bold yellow")
            text.append(" ·")   # then the level: "PAUSED · clock stopped · base · …"
        if state.status == "new" and not state.level and not replay:  # nothing recorded yet: say what happens
            text.append(" the session's process is setting up (data, sandbox, agent)…", style="italic")
            self._show(text, compact)
            return
        total = state.tokens_in + state.tokens_out
        best, sees = _agent_settings(state, criterion, compact)
        parts = [(f" {state.level or '?'} · ", ""), (_coder(state, compact), "bold magenta" if state.simulated else "")]
        if steps:   # one count on every surface: the steps taken (engine.session.views.steps)
            parts.append((f" · {step_count(state).words(compact=True)}", ""))   # "2/4 steps": room for the call
        # what may give way on a narrow line, last first: tokens, the clock, the call in progress; on a
        # narrow line ★'s meaning gives way before the call in progress (the scoreboard says it too)
        call = [(call, "bold")] if (call := _call_in_progress(state, live, dead, read_only, compact)) else []
        # the call in progress outlasts "agent sees …" (the summary, `befair show` and the help say it too)
        parts, extras = (parts, [*call, best, sees]) if compact else ([*parts, best], [*call, sees])
        # a dead runner: the clock stops at its last event instead of ticking on
        if elapsed_clock:
            extras.append((f" · {clock(elapsed(state, read_only=read_only or dead, now=now))}", ""))
        extras.append((f" · {tokens(total)} tok ${state.cost:.2f}", ""))
        self._show(_fitted(text, parts, extras, (self.size.width - 2) if self.size.width else None, compact), compact)

    def _show(self, text: Text, compact: bool) -> None:
        key = (text.plain, tuple(text.spans), compact)
        if key != getattr(self, "_last_key", None):  # unchanged: nothing to redraw
            self._last_key = key
            self.update(text, layout=False)  # one line, always: no layout pass

    def _theme(self) -> dict[str, str] | None:
        try:
            return self.app.theme_variables
        except Exception:  # noqa: BLE001 - not mounted
            return None

    _last_args: tuple[SessionState, dict[str, Any]] | None = None

    def on_resize(self) -> None:
        """Narrower or wider: the line is laid out again (shorter words below 110 columns)."""
        if self._last_args is not None:
            state, kwargs = self._last_args
            self.sync(state, **kwargs)


def _status_word(state: SessionState) -> str:
    if state.status == "running" and state.stop_requested:
        return "STOPPING"
    return {"new": "STARTING", "running": "RUNNING", "paused": "PAUSED", "finished": "FINISHED",
            "stopped": "STOPPED", "failed": "FAILED"}.get(state.status, state.status.upper())
