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
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.agent.coder_registry import CODERS
from engine.agent.headless import Progress
from engine.agent.session_config import BEST_CRITERIA, DEFAULT_CRITERION, FEEDBACK, POLICIES, PROTOCOLS, SessionConfig
from engine.agent.task_protocol import task_protocol
from engine.coders.llm.config import add_cli_arguments as add_llm_arguments, cli_overrides
from engine.errors import EXIT_INTERRUPTED, BefairError, DataError, UsageError
from engine.measures.operating_point import Setting
from engine.paths import add_db_arg, db_from_args
from engine.session import event_types as et
from engine.session import events as ev
from engine.session.state import SessionState
from engine.task import CUSTOM, LEVELS

if TYPE_CHECKING:
    from engine.session.store import SessionStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "run", help="run a search session (headless with --headless)",
        description="Run an agent's search over ML pipelines on the skin-lesion task and record it as a session.",
    )
    _task_options(p.add_argument_group("the task: instruction level, budget, coder"))
    add_llm_arguments(p.add_argument_group("LLM coder (--coder openai)"))
    _data_options(p.add_argument_group("data"))
    _search_options(p.add_argument_group("what the agent is shown and what 'best' means"))
    _limit_options(p.add_argument_group("limits, blinding and the sandbox"))
    _agent_options(p.add_argument_group("search policy, the offline coder, the evaluation device"))
    _study_options(p.add_argument_group("studies, guidance, and where the settings come from"))
    add_db_arg(p)
    p.set_defaults(func=cmd_run)
    _register_resume(subparsers)


def _register_resume(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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


def _task_options(p: argparse._ArgumentGroup) -> None:
    """How it runs, the instruction level, the budget and the coder."""
    p.add_argument("--headless", action="store_true", help="no console: print progress to the terminal")
    p.add_argument("--level", choices=[*LEVELS, CUSTOM], default="base", help="instruction level (default: base)")
    p.add_argument("--custom-text", default=None, help="the instruction for --level custom (recorded verbatim)")
    p.add_argument("--steps", type=int, default=20, help="step budget: nodes the search may create (default 20)")
    p.add_argument("--coder", choices=list(CODERS), default="offline",
                   help="; ".join(f"{kind.name}: {kind.help}" for kind in CODERS.values()))


def _data_options(p: argparse._ArgumentGroup) -> None:
    """The data, and the seed."""
    p.add_argument("--data", default="synth",
                   help="'synth' (generated SynthDerm, cached) or a prepared workspace folder")
    p.add_argument("--synth-n-train", type=int, default=None, help="SynthDerm training images (default 2000)")
    p.add_argument("--synth-n-test", type=int, default=None, help="SynthDerm test images (default 656)")
    p.add_argument("--synth-size", type=int, default=None, help="SynthDerm image size in pixels (default 96)")
    p.add_argument("--seed", type=int, default=0, help="the agent's seed (same seed, same session)")


def _search_options(p: argparse._ArgumentGroup) -> None:
    """What "best" means, and the task protocol."""
    p.add_argument("--best", choices=BEST_CRITERIA, default=None,
                   help="what 'best node' means for ★ and for the search's improve step (default: validation; "
                        "claimed under --protocol be-fair); switch it live with `befair steer SESSION criterion C` "
                        "or the console")
    p.add_argument("--feedback", choices=FEEDBACK, default=None,
                   help="what the agent is shown of befair's measurements: none (its own output only, as AIDE), "
                        "auc (the measured validation AUC; the default at every level) or groups (AUC, each "
                        "skin-tone group's AUC and the gap); switch it live with `befair steer SESSION feedback F`; "
                        "--protocol be-fair: none")
    p.add_argument("--operating-point", default=None, metavar="SPEC",
                   help="where a lesion is called malignant in every per-skin-tone figure: sensitivity:0.90 (the "
                        "default: the cut-off that catches 90%% of malignant lesions on validation, all skin tones "
                        "pooled), sensitivity:0.95, or a fixed probability:0.3")
    p.add_argument("--protocol", choices=PROTOCOLS, default="befair",
                   help="befair: the product's task (a validation set withheld and measured); be-fair: the study's "
                        "exact task (mydataset.csv + MyImages/, AIDE's prompts, test set only, blinded; needs an "
                        "LLM coder)")


def _limit_options(p: argparse._ArgumentGroup) -> None:
    """Blinding, and each node's limits and sandbox."""
    p.add_argument("--blind-test", action="store_true", help="mark test metrics blinded (studies)")
    p.add_argument("--step-timeout", type=float, default=None,
                   help="seconds per node execution (default 600; 3600 under --protocol be-fair, as the study's AIDE)")
    p.add_argument("--memory-limit", type=int, default=None,
                   help="MiB per node, for its run and its evaluation (default 8192; 0: no limit)")
    p.add_argument("--eval-timeout", type=float, default=None,
                   help="seconds per node evaluation (default: the step timeout)")
    p.add_argument("--sandbox", choices=["auto", "bwrap", "none"], default="auto",
                   help="run agent code in a bubblewrap sandbox (auto/bwrap: refuse where namespaces are "
                        "unavailable); none: run it unsandboxed, and mark the session UNSANDBOXED")


def _agent_options(p: argparse._ArgumentGroup) -> None:
    """The offline coder's failures, the search policy, and the evaluation device."""
    p.add_argument("--failure-rate", type=float, default=None,
                   help="offline coder: share of pipelines written with a bug (default 0.15)")
    p.add_argument("--policy", choices=POLICIES, default=None,
                   help="how the next step is chosen: befair (default; drafts scale with the budget, a failure is "
                        "debugged at once) or aide (AIDE's exact rule: 5 drafts, then debug with --debug-prob); "
                        "--protocol be-fair always uses aide")
    p.add_argument("--num-drafts", type=int, default=None,
                   help="initial drafts (default: budget/4 in 1-5 under --policy befair, 5 under aide)")
    p.add_argument("--debug-prob", type=float, default=None,
                   help="--policy aide: probability of debugging a buggy leaf (default 0.5)")
    p.add_argument("--max-debug-depth", type=int, default=None, help="debug attempts in a row (default 3)")
    p.add_argument("--device", default=None, help="evaluation device (cpu, cuda); default: GPU when present")


def _study_options(p: argparse._ArgumentGroup) -> None:
    """User studies, starting guidance, and where the settings come from."""
    p.add_argument("--participant", default=None, help="participant id (user studies)")
    p.add_argument("--study", default=None, help="study id (user studies)")
    p.add_argument("--repeat", type=int, default=None, help="repeat index within a study")
    p.add_argument("--guidance", action="append", default=[], metavar="TEXT",
                   help="global guidance in force from the first step (repeatable)")
    p.add_argument("--session-id", default=None, help="use this id for the new session")
    p.add_argument("--request", type=Path, default=None, metavar="FILE",
                   help="start the session this JSON file describes (written by the console for the run it "
                        "starts detached); the settings flags above are then not read")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")


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
        level=args.level, custom_text=args.custom_text, steps=args.steps, best=_best(args), protocol=args.protocol,
        feedback=getattr(args, "feedback", None),
        blind_test=args.blind_test, coder=args.coder, model=args.model, seed=args.seed, data=args.data,
        participant_id=args.participant, study_id=args.study, repeat_index=args.repeat, extra=extra,
    )
    from engine.execution.sandbox import resolve_mode

    kw["sandbox"] = resolve_mode(getattr(args, "sandbox", "auto") or "auto")
    for name, value in (("step_timeout", args.step_timeout), ("memory_limit_mb", args.memory_limit),
                        ("eval_timeout", getattr(args, "eval_timeout", None)),
                        ("failure_rate", args.failure_rate), ("num_drafts", args.num_drafts),
                        ("debug_prob", args.debug_prob), ("max_debug_depth", args.max_debug_depth),
                        ("policy", getattr(args, "policy", None)),
                        ("operating_point", getattr(args, "operating_point", None))):
        if value is not None:
            kw[name] = value
    try:
        return SessionConfig(**kw)
    except ValueError as exc:
        raise BefairError(str(exc)) from None


def _best(args: argparse.Namespace) -> str:
    if args.best is not None:
        return str(args.best)
    criteria = task_protocol(getattr(args, "protocol", "befair")).criteria
    return criteria[0] if criteria else DEFAULT_CRITERION


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
    if getattr(args, "operating_point", None) is not None:
        try:
            Setting.parse(args.operating_point)
        except ValueError as exc:
            raise UsageError(f"--operating-point: {exc}") from None
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
    """Validate `run`'s arguments and write what the detached run needs into `path`: the
    session's settings, its opening guidance and the LLM settings file. Never the API key (it
    travels in the child's environment)."""
    config = validate_run_args(args)
    check_agent_environment(config)
    request = {"config": config.to_dict(), "guidance": [t for t in args.guidance or [] if t.strip()],
               "llm_config": getattr(args, "llm_config", None), "model": getattr(args, "model", None),
               "base_url": getattr(args, "base_url", None), "participant": args.participant}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(request, indent=2, default=str) + "\n", encoding="utf-8")
    return config


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
