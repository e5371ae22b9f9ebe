"""`befair run` and `befair resume`: a whole search session from the command line.

    befair run --headless --level fairness-methods --steps 20 --coder offline --data synth
    befair resume SESSION

Prints a progress bar and one line per node (id, stage, status, validation AUC / gap, audit
badges) unless --quiet. Without --headless, the `befair` command line (befair_tui) starts the
same headless run in its own process and opens the console on it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import engine.agent.coder_registry  # noqa: F401  the coder kinds: the --coder option's choices
from engine.agent.headless import Progress
from engine.agent.session_config import SessionConfig
from engine.agent.settings import OPTIONS, add_arguments, check_values
from engine.agent.task_protocol import task_protocol
from engine.errors import EXIT_INTERRUPTED, BefairError, DataError, UsageError
from engine.paths import add_db_arg, db_from_args
from engine.session import event_types as et
from engine.session import events as ev
from engine.session.state import SessionState
from engine.task import CUSTOM

if TYPE_CHECKING:
    from engine.session.store import SessionStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run", help="run a search session (headless with --headless)",
        description="Run an agent's search over ML pipelines on the skin-lesion task and record it as a session.",
    )
    add_arguments(p)   # every session option of engine.agent.settings, a group per section
    add_db_arg(p)
    p.set_defaults(func=cmd_run)
    _register_resume(subparsers)


def _register_resume(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    r = subparsers.add_parser("resume", help="continue a session after a crash, kill or stop",
                              description="Continue a session: the node that was running is marked interrupted "
                                          "and the search goes on until the budget is spent.")
    r.add_argument("session", help="session id, unique prefix, or 'last'")
    # run's options, with resume's words
    OPTIONS["headless"].add_to(r, "accepted for symmetry with run (resume is always headless)")
    OPTIONS["quiet"].add_to(r)
    r.add_argument("--force", action="store_true", help="resume even if the session's process seems alive")
    OPTIONS["model"].add_to(r, "LLM model (openai sessions; default: the session's)")
    OPTIONS["base_url"].add_to(r, "server URL (openai sessions)")
    add_db_arg(r)
    r.set_defaults(func=cmd_resume)


# --------------------------------------------------------------------------- commands


def config_from_args(args: argparse.Namespace) -> SessionConfig:
    """The session's settings from `run`'s flags (engine.agent.settings' options, by dest)."""
    try:
        return SessionConfig.from_options(vars(args))
    except ValueError as exc:
        raise BefairError(str(exc)) from None


def _coder(config: SessionConfig, args: argparse.Namespace) -> Any:
    from engine.agent.coder_registry import make_coder

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
    bad = check_values(vars(args))
    if bad is not None:
        raise UsageError(bad)
    if args.level == CUSTOM and not (args.custom_text or "").strip():
        raise UsageError("--level custom needs --custom-text")
    if args.coder in task_protocol(getattr(args, "protocol", "befair")).refused_coders:
        raise UsageError("--protocol be-fair gives the agent the study's task, which the offline coder cannot write "
                         "pipelines for; use --coder openai (or the default protocol)")
    return config_from_args(args)


def check_agent_environment(config: SessionConfig) -> None:
    """Under --protocol be-fair the agent is told AIDE's words, "all packages are already
    installed!": refuse to start unless they are (pip install 'befair[agent]')."""
    check = task_protocol(config.protocol).check_environment
    if check is not None:
        check()


def write_run_request(path: Path, args: argparse.Namespace) -> SessionConfig:
    """Validate `run`'s arguments and write what the detached run needs into `path` (save_run_request)."""
    config = validate_run_args(args)
    check_agent_environment(config)
    save_run_request(path, config, guidance=args.guidance or [], llm_config=getattr(args, "llm_config", None),
                     model=getattr(args, "model", None), base_url=getattr(args, "base_url", None),
                     participant=args.participant)
    return config


def save_run_request(path: Path, config: SessionConfig, *, guidance: list[str] | None = None,
                     llm_config: str | None = None, model: str | None = None, base_url: str | None = None,
                     participant: str | None = None) -> None:
    """Write a detached run's request (`run --request FILE`): the session's settings, its opening
    guidance and the LLM settings file. Never the API key (it travels in the child's environment)."""
    request = {"config": config.to_dict(), "guidance": [t for t in guidance or [] if t.strip()],
               "llm_config": llm_config, "model": model, "base_url": base_url, "participant": participant}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request, indent=2, default=str) + "\n", encoding="utf-8")


def _read_run_request(args: argparse.Namespace) -> SessionConfig:
    """The settings of a `--request FILE` run; its guidance and LLM settings go onto `args`."""
    try:
        request = json.loads(Path(args.request).read_text(encoding="utf-8"))
        config = SessionConfig.from_dict(request["config"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{args.request}: not a run request this version can start ({exc})") from None
    args.guidance = list(request.get("guidance") or [])
    args.participant = request.get("participant")
    for name in ("llm_config", "model", "base_url"):
        if request.get(name) is not None:
            setattr(args, name, request[name])
    return config


def cmd_run(args: argparse.Namespace) -> int:
    """The headless run (befair_tui's command line sends `run` without --headless to the console)."""
    config = _read_run_request(args) if args.request else validate_run_args(args)
    check_agent_environment(config)
    from engine.agent.runner import run
    from engine.agent.session_setup import start_session
    from engine.agent.signals import install_sigterm_handler
    from engine.session.store import SessionStore

    coder = _coder(config, args)
    store = SessionStore(db_from_args(args))
    progress = Progress(quiet=args.quiet)
    progress.start_ticker()
    install_sigterm_handler()
    if not args.quiet:
        what = "generating/loading SynthDerm" if config.data == "synth" else f"opening {config.data}"
        progress.write(f"{what} …")
    from engine.agent.session_setup import resolve_workspace
    from engine.progress import task_progress

    with task_progress("SynthDerm", quiet=args.quiet) as generating:
        workspace = resolve_workspace(config, progress=generating)
    if not args.quiet:
        _warn_too_few(workspace)
    writer = start_session(store, config, coder=coder, session_id=args.session_id, workspace=workspace)
    from engine.session import live_reply

    progress.live_path = live_reply.live_path(store.path, writer.session_id)
    progress(_last_event(store, writer.session_id), writer.state)
    for text in args.guidance or []:
        if text.strip():
            gid = max(writer.state.guidance, default=0) + 1
            writer.emit(et.Guidance(guidance_id=gid, text=text.strip(), scope="global", node_id=None,
                                    by=args.participant or "cli", command_id=None))
    try:
        state = run(store, writer.session_id, coder=coder, on_event=progress, writer=writer)
    finally:
        progress.stop_ticker()
    return _exit_code(state)


def _warn_too_few(workspace: Any) -> None:
    """Say before the session starts where the held-out data are too few to judge fairness."""
    from engine.evaluation.adequacy import warnings, workspace_counts

    for line in warnings(workspace_counts(workspace)):
        print(f"befair: warning: {line}", file=sys.stderr)


def _exit_code(state: SessionState) -> int:
    """0 for a session that finished or was stopped by a command; 130 when a signal (Ctrl-C,
    SIGTERM) ended it; 1 when it failed."""
    from engine.agent.signals import INTERRUPTED

    if state.status == "stopped" and state.finish_reason == INTERRUPTED:
        return EXIT_INTERRUPTED
    return 0 if state.status in ("finished", "stopped") else 1


def _last_event(store: SessionStore, session_id: str) -> ev.Event:
    events = store.events(session_id)
    return events[-1]


def cmd_resume(args: argparse.Namespace) -> int:
    from engine.agent.recovery import recover
    from engine.agent.runner import run
    from engine.agent.signals import install_sigterm_handler
    from engine.session.runner_control import open_store

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
    from engine.session import live_reply

    progress.live_path = live_reply.live_path(store.path, sid)
    progress(_last_event(store, sid), writer.state)
    try:
        state = run(store, sid, coder=coder, on_event=progress, writer=writer)
    finally:
        progress.stop_ticker()
    return _exit_code(state)


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
