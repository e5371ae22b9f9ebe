"""`befair run` and `befair resume`: a whole search session from the command line.

    befair run --headless --level fairness-methods --steps 20 --coder offline --data synth
    befair resume SESSION

Prints a progress bar and one line per node (id, stage, status, validation AUC / gap, audit
badges) unless --quiet. Without --headless, the `befair` command line (befair_tui) starts the
same headless run in its own process and opens the console on it.
"""
from __future__ import annotations

import argparse

import math
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from engine.config import BEST_CRITERIA, SessionConfig
from engine.errors import BefairError, DataError, UsageError
from engine.paths import add_db_arg, db_from_args
from engine.agent.llm_config import add_cli_arguments as add_llm_arguments, cli_overrides
from engine.session import events as ev
from engine.session import views
from engine.session.state import NodeState, SessionState
from engine.task import CUSTOM, LEVELS

if TYPE_CHECKING:
    from engine.session.store import SessionStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run", help="run a search session (headless with --headless)",
        description="Run an agent's search over ML pipelines on the skin-lesion task and record it as a session.",
    )
    p.add_argument("--headless", action="store_true", help="no console: print progress to the terminal")
    p.add_argument("--level", choices=[*LEVELS, CUSTOM], default="base", help="instruction level (default: base)")
    p.add_argument("--custom-text", default=None, help="the instruction for --level custom (recorded verbatim)")
    p.add_argument("--steps", type=int, default=20, help="step budget: nodes the search may create (default 20)")
    p.add_argument("--coder", choices=["offline", "openai"], default="offline",
                   help="offline: the built-in simulated agent; openai: any OpenAI-compatible server")
    add_llm_arguments(p.add_argument_group("LLM coder (--coder openai)"))
    p.add_argument("--data", default="synth",
                   help="'synth' (generated SynthDerm, cached) or a prepared workspace folder")
    p.add_argument("--synth-n-train", type=int, default=None, help="SynthDerm training images (default 2000)")
    p.add_argument("--synth-n-test", type=int, default=None, help="SynthDerm test images (default 656)")
    p.add_argument("--synth-size", type=int, default=None, help="SynthDerm image size in pixels (default 96)")
    p.add_argument("--seed", type=int, default=0, help="the agent's seed (same seed, same session)")
    p.add_argument("--best", choices=BEST_CRITERIA, default="validation",
                   help="what 'best node' means for the search (default: validation)")
    p.add_argument("--blind-test", action="store_true", help="mark test metrics blinded (studies)")
    p.add_argument("--step-timeout", type=float, default=None, help="seconds per node execution (default 600)")
    p.add_argument("--memory-limit", type=int, default=None,
                   help="MiB per node, for its run and its evaluation (default 8192; 0: no limit)")
    p.add_argument("--eval-timeout", type=float, default=None,
                   help="seconds per node evaluation (default: the step timeout)")
    p.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
                   help="run agent code in a bubblewrap sandbox (auto/bwrap: refuse where namespaces are "
                        "unavailable); none: run it unsandboxed, and mark the session UNSANDBOXED")
    p.add_argument("--failure-rate", type=float, default=None,
                   help="offline coder: share of pipelines written with a bug (default 0.15)")
    p.add_argument("--num-drafts", type=int, default=None, help="initial drafts (default 5)")
    p.add_argument("--debug-prob", type=float, default=None, help="probability of debugging a buggy leaf (default 0.5)")
    p.add_argument("--max-debug-depth", type=int, default=None, help="debug attempts in a row (default 3)")
    p.add_argument("--device", default=None, help="evaluation device (cpu, cuda); default: GPU when present")
    p.add_argument("--participant", default=None, help="participant id (user studies)")
    p.add_argument("--study", default=None, help="study id (user studies)")
    p.add_argument("--repeat", type=int, default=None, help="repeat index within a study")
    p.add_argument("--guidance", action="append", default=[], metavar="TEXT",
                   help="global guidance in force from the first step (repeatable)")
    p.add_argument("--session-id", default=None, help="use this id for the new session")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    add_db_arg(p)
    p.set_defaults(func=cmd_run)

    r = subparsers.add_parser("resume", help="continue a session after a crash, kill or stop",
                              description="Continue a session: the node that was running is marked interrupted "
                                          "and the search goes on until the budget is spent.")
    r.add_argument("session", help="session id, unique prefix, or 'last'")
    r.add_argument("--headless", action="store_true", help="accepted for symmetry with run (resume is always headless)")
    r.add_argument("--quiet", action="store_true", help="print nothing but errors")
    r.add_argument("--force", action="store_true", help="resume even if the session's process seems alive")
    r.add_argument("--model", default=None, help="LLM model (openai sessions; default: the session's)")
    r.add_argument("--base-url", default=None, help="server URL (openai sessions)")
    add_db_arg(r)
    r.set_defaults(func=cmd_resume)


# --------------------------------------------------------------------------- progress output


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
        if state.live_reply:
            text = state.live_reply.get("text", "").strip().splitlines()
            return f" · the model is writing: {text[-1][:50]}" if text else " · the model is writing…"
        return ""

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
        elif kind == ev.NODE_CREATED:
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
            reasons = p.get("reasons") or {}
            self.write("final choice: " + "; ".join(
                f"{c}: {reasons.get(c, p.get('by_' + c))}" for c in ("claimed", "validation", "minimax")))
        elif kind == ev.SESSION_FINISHED:
            self.write(f"session {state.session_id} {p.get('status')}: {p.get('reason') or ''} "
                       f"({_clock(time.monotonic() - self.started)})")


def _short_payload(p: dict[str, Any]) -> str:
    keep = {k: v for k, v in p.items() if k not in ("command_id",) and v not in (None, "", [])}
    return ", ".join(f"{k}={v}" for k, v in keep.items())


def _clock(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m:02d}:{s:02d}"


def _f(x: float | None) -> str:
    return "  —  " if x is None else f"{x:.3f}"


def node_line(state: SessionState, node: NodeState) -> str:
    stage = node.stage if node.parent_id is None else f"{node.stage} of {node.parent_id}"
    status = node.status
    if node.status == "ok" and node.eval_verdicts.get("validation") not in (None, "ok"):
        status = f"ok/{node.eval_verdicts['validation']}"
    metrics = f"val {_f(node.val_auc)} / gap {_f(node.val_gap)}"
    if node.test and not node.test_blinded:
        metrics += f"  test {_f(node.test.get('auc'))} / {_f(node.test.get('auc_gap'))}"
    badges = "".join(f"[{b}]" for b in views.audit_badges(node))
    extra = ""
    if node.status != "ok":
        extra = f"  {node.failure_reason or ''}"
    t = f"{node.exec_time:5.1f}s" if node.exec_time is not None else "     "
    return f"  node {node.node_id:>3}  {stage:<14} {status:<11} {metrics}  {t}  {badges}{extra}"


# --------------------------------------------------------------------------- commands


def config_from_args(args: argparse.Namespace) -> SessionConfig:
    extra: dict[str, Any] = {}
    synth = {k: v for k, v in (("n_train", args.synth_n_train), ("n_test", args.synth_n_test),
                               ("size", args.synth_size)) if v is not None}
    if args.data == "synth":
        extra["synth"] = synth
    llm = {k: v for k, v in cli_overrides(args).items() if k not in ("api_key", "model")}
    if llm:
        extra["llm"] = llm  # recorded with the session (never the key) so resume uses the same server
    if args.device:
        extra["device"] = args.device
    kw: dict[str, Any] = dict(
        level=args.level, custom_text=args.custom_text, steps=args.steps, best=args.best,
        blind_test=args.blind_test, coder=args.coder, model=args.model, seed=args.seed, data=args.data,
        participant_id=args.participant, study_id=args.study, repeat_index=args.repeat, extra=extra,
    )
    from engine.execution.sandbox import resolve_mode

    kw["sandbox"] = resolve_mode(getattr(args, "sandbox", "auto") or "auto")
    for name, value in (("step_timeout", args.step_timeout), ("memory_limit_mb", args.memory_limit),
                        ("eval_timeout", getattr(args, "eval_timeout", None)),
                        ("failure_rate", args.failure_rate), ("num_drafts", args.num_drafts),
                        ("debug_prob", args.debug_prob), ("max_debug_depth", args.max_debug_depth)):
        if value is not None:
            kw[name] = value
    try:
        return SessionConfig(**kw)
    except ValueError as exc:
        raise BefairError(str(exc)) from None


def _coder(config: SessionConfig, args: argparse.Namespace) -> Any:
    from engine.agent.runner import make_coder

    try:
        return make_coder(config, model=getattr(args, "model", None), base_url=getattr(args, "base_url", None),
                          api_key=getattr(args, "api_key", None), config_path=getattr(args, "llm_config", None))
    except ImportError as exc:
        raise BefairError(f"the LLM coder is not available ({exc}); use --coder offline") from None
    except BefairError as exc:
        if config.coder == "openai":
            print(f"befair: the LLM coder is not configured: {exc}", file=sys.stderr)
            print("  configure it with OPENAI_API_KEY (and OPENAI_BASE_URL for vLLM / Ollama / llama.cpp), "
                  "--model M --base-url URL, or ~/.config/befair/llm.toml;", file=sys.stderr)
            print("  or run the built-in simulated agent: --coder offline", file=sys.stderr)
            raise SystemExit(2) from None
        raise


def validate_run_args(args: argparse.Namespace) -> SessionConfig:
    """Check `run`'s arguments before anything starts (also used by the console's launcher).
    A bad value is a UsageError (exit 2) naming the flag and the value."""
    if args.steps < 1:
        raise UsageError(f"--steps must be at least 1 (got {args.steps}): the search needs a step to run")
    checks: tuple[tuple[str, Any, Callable[[Any], bool], str], ...] = (
        ("--step-timeout", getattr(args, "step_timeout", None), lambda v: v > 0 and math.isfinite(v),
         "a positive number of seconds"),
        ("--memory-limit", getattr(args, "memory_limit", None), lambda v: v >= 0, "0 (no limit) or more MiB"),
        ("--failure-rate", getattr(args, "failure_rate", None), lambda v: 0 <= v <= 1, "between 0 and 1"),
        ("--debug-prob", getattr(args, "debug_prob", None), lambda v: 0 <= v <= 1, "between 0 and 1"),
        ("--num-drafts", getattr(args, "num_drafts", None), lambda v: v >= 1, "at least 1"),
        ("--max-debug-depth", getattr(args, "max_debug_depth", None), lambda v: v >= 0, "0 or more"),
        ("--synth-n-train", getattr(args, "synth_n_train", None), lambda v: v >= 1, "at least 1"),
        ("--synth-n-test", getattr(args, "synth_n_test", None), lambda v: v >= 1, "at least 1"),
        ("--synth-size", getattr(args, "synth_size", None), lambda v: v >= 1, "at least 1 pixel"),
        ("--repeat", getattr(args, "repeat", None), lambda v: v >= 0, "0 or more"),
    )
    for flag, value, ok, expected in checks:
        if value is not None and not ok(value):
            raise UsageError(f"{flag} must be {expected} (got {value:g})")
    if args.level == CUSTOM and not (args.custom_text or "").strip():
        raise UsageError("--level custom needs --custom-text")
    return config_from_args(args)


def cmd_run(args: argparse.Namespace) -> int:
    """The headless run (befair_tui's command line sends `run` without --headless to the console)."""
    config = validate_run_args(args)
    from engine.agent.runner import install_sigterm_handler, run, start_session
    from engine.session.store import SessionStore

    coder = _coder(config, args)
    store = SessionStore(db_from_args(args))
    progress = Progress(quiet=args.quiet)
    progress.start_ticker()
    install_sigterm_handler()
    if not args.quiet:
        what = "generating/loading SynthDerm" if config.data == "synth" else f"opening {config.data}"
        progress.write(f"{what} …")
    from engine.agent.runner import resolve_workspace
    from engine.progress import task_progress

    with task_progress("SynthDerm", quiet=args.quiet) as generating:
        workspace = resolve_workspace(config, progress=generating)
    writer = start_session(store, config, coder=coder, session_id=args.session_id, workspace=workspace)
    progress(_last_event(store, writer.session_id), writer.state)
    for text in args.guidance or []:
        if text.strip():
            gid = max(writer.state.guidance, default=0) + 1
            writer.emit(ev.GUIDANCE, {"guidance_id": gid, "text": text.strip(), "scope": "global", "node_id": None,
                                      "by": args.participant or "cli", "command_id": None})
    try:
        state = run(store, writer.session_id, coder=coder, on_event=progress, writer=writer)
    finally:
        progress.stop_ticker()
    return 0 if state.status in ("finished", "stopped") else 1


def _last_event(store: SessionStore, session_id: str) -> ev.Event:
    events = store.events(session_id)
    return events[-1]


def cmd_resume(args: argparse.Namespace) -> int:
    from engine.agent.runner import install_sigterm_handler, recover, run
    from engine.session.cli import open_store

    store = open_store(db_from_args(args))  # resuming never creates a database
    sid = store.resolve(args.session)
    state = store.state(sid)
    if not state.config:
        raise DataError(f"session {sid} in {store.path} has no recorded settings; it cannot be resumed")
    if state.coder.get("name") == "import" or "import" in str(state.coder.get("name", "")) \
            or (store.session(sid).get("origin") not in (None, "live")):
        raise UsageError(f"session {sid} was imported; only live sessions can be resumed")
    if state.status == "finished" and not _budget_raised(store, sid, state):
        reason = f": {state.finish_reason}" if state.finish_reason else ""
        raise UsageError(f"session {sid} already finished ({state.status}{reason}); nothing to resume "
                         f"(raise its budget first: befair steer {sid} budget N)")
    try:
        config = SessionConfig.from_dict(state.config)
    except (TypeError, ValueError) as exc:
        raise DataError(f"session {sid} in {store.path} has settings this version cannot use ({exc})") from None
    coder = _coder(config, args)
    progress = Progress(quiet=args.quiet)
    progress.start_ticker()
    install_sigterm_handler()
    writer, _ = recover(store, sid, force=args.force)
    progress(_last_event(store, sid), writer.state)
    try:
        state = run(store, sid, coder=coder, on_event=progress, writer=writer)
    finally:
        progress.stop_ticker()
    return 0 if state.status in ("finished", "stopped") else 1


def _budget_raised(store: SessionStore, session_id: str, state: SessionState) -> bool:
    """A finished session may go on when a pending `befair steer ... budget N` gives it steps."""
    for command in store.pending_commands(session_id):
        if command["kind"] == "set_budget":
            try:
                if int(command["payload"].get("steps")) > state.agent_steps:
                    return True
            except (TypeError, ValueError):
                pass
    return False
