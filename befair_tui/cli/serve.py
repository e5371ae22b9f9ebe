"""`befair serve`: the console in a browser, through textual-serve.

Three ways, each browser tab getting its own process on the same session database:

- `befair serve` (or `--researcher`): the whole console in every tab. It listens on this machine
  only (127.0.0.1): the console starts, steers, exports and deletes any session.
- `befair serve --study SPEC.toml|NAME`: a study with people. Every tab gets the participant's
  app (`befair participate`): their id (from `?participant=ID` in the URL or a form), the study's
  instructions and consent, then their own sessions with steering only. The researcher's view (the
  live grid and the whole console, `befair study watch`) needs the token printed at start:
  `/?researcher=TOKEN`. Only this mode may listen beyond this machine (`--host 0.0.0.0`).
- `befair serve --study NAME --researcher`: the researcher's view in every tab, this machine only.

A page load gets a one-time ticket for its websocket (`/ws/<ticket>`): the server decides what the
tab runs when the page is asked for, from its URL, and the websocket can ask for nothing else.
"""
from __future__ import annotations

import argparse
import asyncio
import hmac
import ipaddress
import re
import secrets
import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import BefairError, UsageError
from engine.paths import add_db_arg, db_from_args

if TYPE_CHECKING:
    from aiohttp import web

TICKET_TTL = 120.0  # seconds a page's ticket waits for its websocket
PARTICIPANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "serve", help="the console in a browser (textual-serve); --study: a study's participants, each their own",
        description="Serve befair over HTTP, each browser tab its own process. Without --study: the whole console, "
        "on this machine only. With --study: the participant's view of that study in every tab (their own "
        "sessions, steering only), the researcher's view with the token printed at start.")
    p.add_argument("--host", default="127.0.0.1",
                   help="interface to listen on (default 127.0.0.1; another needs --study: participants only)")
    p.add_argument("--port", type=int, default=8000, help="port (default 8000)")
    p.add_argument("--study", default=None, metavar="SPEC|NAME",
                   help="a study with people: its spec (TOML; recorded on first use) or the name of a recorded one")
    p.add_argument("--researcher", action="store_true",
                   help="the researcher's view in every tab (with --study: its live grid), on this machine only")
    p.add_argument("--dry-run", action="store_true",
                   help="with --study SPEC: the study with the offline coder (no API key), as NAME-dry-run")
    add_db_arg(p)
    p.set_defaults(func=cmd_serve)


def console_command(db: Path | str) -> str:
    return shlex.join([sys.executable, "-m", "befair_tui.cli", "--db", str(db)])


def participant_command(db: Path | str, study: str, participant: str | None = None) -> str:
    argv = [sys.executable, "-m", "befair_tui.cli", "participate", "--study", study, "--db", str(db)]
    if participant:
        argv += ["--participant", participant]
    return shlex.join(argv)


def researcher_command(db: Path | str, study: str) -> str:
    return shlex.join([sys.executable, "-m", "befair_tui.cli", "study", "watch", study, "--db", str(db)])


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from textual_serve.server import Server  # noqa: F401 - checked before anything else
    except ImportError:
        raise BefairError("befair serve needs textual-serve: pip install 'befair[serve]'") from None
    if not 0 < args.port < 65536:
        raise UsageError(f"--port must be between 1 and 65535, not {args.port}")
    if args.dry_run and not args.study:
        raise UsageError("--dry-run needs --study SPEC")
    local = is_loopback(args.host)
    if not local and (args.researcher or not args.study):
        raise UsageError(f"--host {args.host}: the whole console (and a researcher's view) is served on this machine "
                         "only (127.0.0.1); beyond it, serve a study's participants: befair serve --study SPEC")
    db = db_from_args(args).resolve()
    study = _prepare_study(db, args) if args.study else None
    token = None if args.researcher or study is None else secrets.token_urlsafe(18)
    server = BefairServer(db, study=study, researcher_only=bool(args.researcher), token=token, host=args.host,
                          port=args.port)
    _announce(args, db, study, token, local)
    server.serve()
    return 0


def _prepare_study(db: Path, args: argparse.Namespace) -> str:
    """Record the study of a spec file (or find a recorded one), check it can run, build its data."""
    from engine.progress import task_progress
    from engine.session.lifecycle import open_store
    from engine.session.store import SessionStore
    from engine.study import grid, people
    from engine.study.pool import prepare_data
    from engine.study.spec import load_spec

    from_spec = Path(args.study).suffix == ".toml" or Path(args.study).is_file()
    store = SessionStore(db) if from_spec else open_store(db)  # a spec may start a new database
    try:
        if from_spec:
            spec = load_spec(args.study)
            if args.dry_run:
                spec = people.dry_run_spec(spec)
            people.people_of(spec)
            grid.ensure_study(store, spec, source=str(Path(args.study).resolve()))
        else:
            if args.dry_run:
                raise UsageError("--dry-run takes the study's spec file (--study SPEC.toml), not a name")
            spec = grid.stored_spec(store, args.study)
            people.people_of(spec)
    finally:
        store.close()
    _check_coders(spec)
    with task_progress("study data", quiet=False) as progress:
        prepare_data(spec, progress=progress)
    return str(spec.name)


def _check_coders(spec: Any) -> None:
    """An LLM agent without a key or server would fail every participant's session: refuse now."""
    from engine.agent.llm_config import LlmConfig

    for coder in spec.coders:
        if coder.name != "openai":
            continue
        problem = LlmConfig.load({k: v for k, v in {"model": coder.model, **coder.llm}.items() if v}).problem()
        if problem:
            raise UsageError(f"study {spec.name}: its agent {coder.label} cannot reach a model ({problem}); "
                             "try the study first with --dry-run (the offline coder, no API key)")


def _announce(args: argparse.Namespace, db: Path, study: str | None, token: str | None, local: bool) -> None:
    url = f"http://{'127.0.0.1' if args.host in ('0.0.0.0', '::') else args.host}:{args.port}"

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    if study is None:
        say(f"befair: serving the console on {url} (this machine only; database {db}); Ctrl+C stops")
    elif token is None:
        say(f"befair: serving the researcher's view of study {study} on {url} (this machine only; database {db}); "
            "Ctrl+C stops")
    else:
        say(f"befair: serving study {study} to its participants on {url}/?participant=ID (database {db})")
        say(f"befair: the researcher's view (keep this link to yourself): {url}/?researcher={token}")
        if not local:
            say(f"befair: listening on {args.host}: anyone who can reach port {args.port} can open a participant's "
                "view with a participant id; the researcher's view needs the token; nothing is encrypted (use a "
                "trusted network, or a TLS proxy in front)")
        say("befair: Ctrl+C stops the server; participants' sessions keep running and resume when it is back")


def _make_server_class() -> type:
    from aiohttp import web
    from aiohttp_jinja2 import render_template
    from textual_serve.server import Server

    class _BefairServer(Server):
        """textual-serve's server, with the command a tab runs chosen when its page is asked for."""

        def __init__(self, db: Path, *, study: str | None, researcher_only: bool, token: str | None,
                     host: str, port: int) -> None:
            self.db, self.study, self.researcher_only, self.token = db, study, researcher_only, token
            self.tickets: dict[str, tuple[str, float]] = {}
            title = f"befair · study {study}" if study else "befair"
            super().__init__(console_command(db), host=host, port=port, title=title)

        def command_for(self, query: Any) -> str:
            """What a tab with this URL runs (web.HTTPForbidden / HTTPBadRequest when nothing)."""
            return _command_for(self.db, self.study, self.researcher_only, self.token, query)

        async def _make_app(self) -> web.Application:
            return _web_app(self)

        async def on_startup(self, app: web.Application) -> None:
            pass  # befair's own lines are printed before the server starts

        async def handle_index(self, request: web.Request) -> web.Response:
            command = self.command_for(request.query)
            now = time.monotonic()
            self.tickets = {k: v for k, v in self.tickets.items() if now - v[1] < TICKET_TTL}
            ticket = secrets.token_urlsafe(18)
            self.tickets[ticket] = (command, now)
            scheme = "wss" if request.secure else "ws"
            host = request.host  # as the browser reached us: works behind 0.0.0.0 and proxies alike
            context = _page_context(request.query, request.scheme, scheme, host, ticket, self.title)
            response = render_template("app_index.html", request, context)
            response.headers["Cache-Control"] = "no-store"
            response.headers["Referrer-Policy"] = "no-referrer"  # the researcher's token stays in this URL
            return response

        async def handle_ticket(self, request: web.Request) -> web.WebSocketResponse:
            found = self.tickets.pop(request.match_info["ticket"], None)
            if found is None or time.monotonic() - found[1] >= TICKET_TTL:
                raise web.HTTPForbidden(text="befair: this page's ticket is used or expired; reload the page\n")
            command = found[0]
            websocket = web.WebSocketResponse(heartbeat=15)
            width = _int(request.query.get("width"), 80)
            height = _int(request.query.get("height"), 24)
            await _run_tab(self, request, websocket, command, width, height)
            return websocket

    return _BefairServer


def _command_for(db: Path, study: str | None, researcher_only: bool, token: str | None, query: Any) -> str:
    """The command a tab with this URL's query runs (web.HTTPForbidden / HTTPBadRequest when nothing)."""
    from aiohttp import web

    if study is None:
        return console_command(db)
    if researcher_only:
        return researcher_command(db, study)
    given = query.get("researcher")
    if given is not None:
        if token is None or not hmac.compare_digest(given.encode(), token.encode()):
            raise web.HTTPForbidden(text="befair: wrong researcher token\n")
        return researcher_command(db, study)
    participant = (query.get("participant") or "").strip() or None
    if participant is not None and not PARTICIPANT_RE.match(participant):
        raise web.HTTPBadRequest(text="befair: a participant id is letters, digits, '.', '_' or '-'\n")
    return participant_command(db, study, participant)


def _web_app(server: Any) -> web.Application:
    """textual-serve's aiohttp application, with the server's own page and websocket handlers."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web

    app = web.Application()
    aiohttp_jinja2.setup(app, loader=jinja2.FileSystemLoader(server.templates_path))
    app.add_routes([
        web.get("/", server.handle_index, name="index"),
        web.get("/ws/{ticket}", server.handle_ticket, name="websocket"),
        web.get("/download/{key}", server.handle_download, name="download"),
        web.static("/static", server.statics_path, name="static"),
    ])
    app.on_startup.append(server.on_startup)
    app.on_shutdown.append(server.on_shutdown)
    return app


def _page_context(query: Any, page_scheme: str, ws_scheme: str, host: str, ticket: str, title: str) -> dict[str, Any]:
    """The page template's values: the tab's websocket (by its one-use ticket), static files, font size."""
    return {
        "font_size": _int(query.get("fontsize"), 16),
        "app_websocket_url": f"{ws_scheme}://{host}/ws/{ticket}",
        "config": {"static": {"url": f"{page_scheme}://{host}/static/"}},
        "application": {"name": title},
    }


async def _run_tab(server: Any, request: Any, websocket: Any, command: str, width: int, height: int) -> None:
    """One browser tab's terminal: the command run by textual-serve's AppService until the tab goes."""
    from textual_serve.app_service import AppService
    from textual_serve.server import log

    app_service: AppService | None = None
    try:
        await websocket.prepare(request)
        app_service = AppService(command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                 close=websocket.close, download_manager=server.download_manager,
                                 debug=server.debug)
        await app_service.start(width, height)
        try:
            await server._process_messages(websocket, app_service)
        finally:
            await app_service.stop()
    except asyncio.CancelledError:
        await websocket.close()
    except Exception as error:  # noqa: BLE001 - one tab's failure is logged, the server goes on
        log.exception(error)
    finally:
        if app_service is not None:
            await app_service.stop()


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def BefairServer(db: Path, **kw: Any) -> Any:  # noqa: N802 - a class made on first use (textual-serve is optional)
    return _make_server_class()(db, **kw)
