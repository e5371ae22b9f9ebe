"""`befair llm check` and `befair llm serve-local`: the LLM coder's server, before a session.

    befair llm check [--base-url URL --model M] [--json]   # models, a streamed completion, speeds, settings
    befair llm serve-local [--port 8080] [--threads N]     # the local model (make local-model), on 127.0.0.1
"""
from __future__ import annotations

import argparse
import json
import signal

from engine.coders.llm.config import LlmConfig, LlmConfigError
from engine.errors import BefairError, UsageError


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("llm", help="check an LLM server, or serve the local model",
                              description="The LLM coder's server: probe one, or start the local model.")
    sub = p.add_subparsers(dest="llm_command", metavar="SUBCOMMAND")
    c = sub.add_parser("check", help="probe an OpenAI-compatible server: models, a short streamed completion, "
                                     "tokens/s, context window, and the settings to use",
                       description="Probe the server the LLM coder would use (same sources as `befair run "
                                   "--coder openai`: flags, environment, config file).")
    c.add_argument("--base-url", default=None, help="OpenAI-compatible server (default: $OPENAI_BASE_URL)")
    c.add_argument("--model", default=None, help="model name (default: config file, $BEFAIR_LLM_MODEL)")
    c.add_argument("--api-key", default=None, help="API key (default: $OPENAI_API_KEY; none for a local server)")
    c.add_argument("--llm-config", default=None, help="LLM config file")
    c.add_argument("--scaffold", default=None, metavar="on|off",
                   help="as you will run it: with `on`, no advice to turn the scaffold on")
    c.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the probe's reply (default 120)")
    c.add_argument("--json", action="store_true", help="print the report as JSON")
    c.set_defaults(func=cmd_check)
    s = sub.add_parser("serve-local", help="run the local coding model (Qwen2.5-Coder-1.5B, llama.cpp) on 127.0.0.1",
                       description="Start llama-server with the local model installed by `make local-model`; "
                                   "the data never leaves this machine. Ctrl-C stops it.")
    s.add_argument("--port", type=int, default=8080, help="port on 127.0.0.1 (default 8080)")
    s.add_argument("--threads", type=int, default=None,
                   help="CPU threads (default: half the CPUs, at least 1: on 2 shared cores, 2 threads stall "
                        "each other)")
    s.add_argument("--reproducible", action="store_true",
                   help="no prompt caching, so that a seeded run (befair run --llm-seed N) gets the same "
                        "replies to the same prompts (each prompt is read in full: slower)")
    s.set_defaults(func=cmd_serve_local)
    p.set_defaults(func=lambda args: _usage(p))


def _usage(parser: argparse.ArgumentParser) -> int:
    parser.print_help()
    return 2


def cmd_check(args: argparse.Namespace) -> int:
    from engine.coders.llm.server_check import check_server

    try:
        config = LlmConfig.load({"base_url": args.base_url, "model": args.model, "api_key": args.api_key,
                                 "scaffold": args.scaffold}, path=args.llm_config)
    except LlmConfigError as exc:
        raise UsageError(str(exc)) from None
    problem = config.problem()
    if problem:
        raise UsageError(problem)
    report = check_server(config, timeout=args.timeout)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
    else:
        print("\n".join(report.lines()))
    return 0 if report.ok else 1


def cmd_serve_local(args: argparse.Namespace) -> int:
    from engine.coders.llm import local_model

    model = local_model.find()
    if not model.present:
        raise BefairError(f"the local model is not installed in {model.root}: {local_model.INSTALL_HINT}")
    server = local_model.LocalServer(model, port=args.port, threads=args.threads, reproducible=args.reproducible)
    print(f"loading {model.model.name} (sha256 {(model.sha256 or '?')[:12]}…) …", flush=True)
    try:
        server.wait_ready()
        print(f"serving on {server.base_url} (127.0.0.1 only: the data stays on this machine)\n"
              f"  befair llm check --base-url {server.base_url} --model {local_model.MODEL_ALIAS}\n"
              f"  befair run --coder openai --base-url {server.base_url} --model {local_model.MODEL_ALIAS} "
              f"--scaffold on{' --llm-seed 0' if args.reproducible else ''} ...\n"
              "Ctrl-C stops it.", flush=True)
        signal.signal(signal.SIGTERM, signal.default_int_handler)   # a kill stops the server too
        code = server.proc.wait()
        if code:
            raise BefairError(f"llama-server exited with code {code}")
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
