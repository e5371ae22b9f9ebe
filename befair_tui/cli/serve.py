"""`befair serve`: the console in a browser, through textual-serve.

Every browser tab that connects gets its own `befair` console process (setup screen first) on the
same session database, so participants of a study can each steer from a browser on a shared
machine. Listens on 127.0.0.1 unless told otherwise: the console can start runs, so put it behind
an authenticating proxy before exposing it to a network.
"""
from __future__ import annotations

import shlex
import sys

from engine.errors import BefairError
from engine.paths import add_db_arg, db_from_args


def register(subparsers) -> None:
    p = subparsers.add_parser("serve", help="the console in a browser (textual-serve)",
                              description="Serve the console over HTTP: each browser tab gets its own console.")
    p.add_argument("--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    add_db_arg(p)
    p.set_defaults(func=cmd_serve)


def console_command(db) -> str:
    return shlex.join([sys.executable, "-m", "befair_tui.cli", "--db", str(db)])


def cmd_serve(args) -> int:
    try:
        from textual_serve.server import Server
    except ImportError:
        raise BefairError("befair serve needs textual-serve: pip install 'befair[serve]'") from None
    if not 0 < args.port < 65536:
        raise BefairError(f"--port must be between 1 and 65535, not {args.port}")
    db = db_from_args(args).resolve()
    print(f"befair: serving the console on http://{args.host}:{args.port} (database {db}); Ctrl+C stops",
          file=sys.stderr, flush=True)
    Server(console_command(db), host=args.host, port=args.port, title="befair").serve()
    return 0
