"""The web side of `befair serve`: what each browser tab runs, the server, its pages and tabs.

A page load gets a one-time ticket for its websocket (`/ws/<ticket>`): the server decides what the
tab runs when the page is asked for, from its URL, and the websocket can ask for nothing else.
befair_tui/cli/serve.py is the command; this is the server it runs.
"""
from __future__ import annotations

import asyncio
import hmac
import ipaddress
import re
import secrets
import shlex
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any


from befair_tui.cli.people import CODE_ENV

if TYPE_CHECKING:
    from aiohttp import web

TICKET_TTL = 120.0  # seconds a page's ticket waits for its websocket
PARTICIPANT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,39}$")


@dataclass(frozen=True)
class TabCommand:
    """What one browser tab runs: its argv, the environment it adds (a participant's code: secrets
    stay off command lines), the tab's id, and the participant it signs in (None: asked)."""

    argv: list[str]
    tab: str
    participant: str | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def command(self) -> str:
        return shlex.join(self.argv)


def console_command(db: Path | str) -> str:
    return shlex.join(_console_argv(db))


def _console_argv(db: Path | str) -> list[str]:
    return [sys.executable, "-m", "befair_tui.cli", "--db", str(db)]


def participant_command(db: Path | str, study: str, participant: str | None = None, *, code: str | None = None,
                        tab: str | None = None, via: str | None = None) -> str:
    """`befair participate` as a command line (the code on it only when given: the server passes it in
    the environment instead, see TabCommand)."""
    return shlex.join(_participant_argv(db, study, participant, code=code, tab=tab, via=via))


def _participant_argv(db: Path | str, study: str, participant: str | None, *, code: str | None = None,
                      tab: str | None = None, via: str | None = None) -> list[str]:
    argv = [sys.executable, "-m", "befair_tui.cli", "participate", "--study", study, "--db", str(db)]
    for flag, value in (("--participant", participant), ("--code", code), ("--tab", tab), ("--via", via)):
        if value:
            argv.append(f"{flag}={value}")   # one word: a value starting with "-" is not taken for a flag
    return argv


def researcher_command(db: Path | str, study: str) -> str:
    return shlex.join(_researcher_argv(db, study))


def _researcher_argv(db: Path | str, study: str) -> list[str]:
    return [sys.executable, "-m", "befair_tui.cli", "study", "watch", study, "--db", str(db)]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False



# --------------------------------------------------------------------------- the server


TAB_RE = re.compile(r"^[A-Za-z0-9_-]{16,32}$")
HALT_GRACE_S = 0.4      # a tab's app gets this long to quit when asked, then SIGTERM, then as long again: SIGKILL
CLOSE_TIMEOUT_S = 0.5   # a browser gets this long to answer a websocket's close
ENDED_KEPT_S = 600.0    # how long the server remembers a tab whose app ended (its page asks)


def new_tab() -> str:
    return secrets.token_urlsafe(12)


@dataclass
class TabRecord:
    """A tab this server runs: "running", or "ended" when its app stopped on its own."""

    command: TabCommand
    service: Any
    websocket: Any
    state: str = "running"
    ended_at: float | None = None


def _make_server_class() -> type:
    from aiohttp import web
    from textual_serve.server import Server

    class _BefairServer(Server):
        """textual-serve's server: a tab's command chosen with its page, befair's page, a quick stop."""

        def __init__(self, db: Path, *, study: str | None, researcher_only: bool, token: str | None,
                     host: str, port: int) -> None:
            self.db, self.study, self.researcher_only, self.token = db, study, researcher_only, token
            self.tickets: dict[str, tuple[TabCommand, float]] = {}
            self.tabs: dict[str, TabRecord] = {}
            self.stopping: float | None = None
            self.stopped_tabs = 0
            self.codes: dict[str, str] = {}
            self._store: Any = None   # opened on first use
            super().__init__(console_command(db), host=host, port=port,
                             title=f"befair · study {study}" if study else "befair")

        @property
        def store(self) -> Any:
            self._store = self._store or _open_store(self.db)
            return self._store

        def command_for(self, query: Any) -> TabCommand:
            """What a tab with this URL runs (an aiohttp HTTP error with a page saying why when nothing)."""
            return _command_for(self, query)

        def serve(self, debug: bool = False) -> None:
            _serve(self, debug)

        def request_exit(self) -> None:
            self.stopping = time.monotonic()
            super().request_exit()

        def stop_summary(self) -> str:
            return _stop_summary(self.stopped_tabs, self.stopping)

        async def _make_app(self) -> web.Application:
            return _web_app(self)

        async def on_startup(self, app: web.Application) -> None:
            pass  # befair's own lines are printed before the server starts

        async def on_shutdown(self, app: web.Application) -> None:
            """Close every tab at once: its browser told to reconnect, its app stopped."""
            await _close_tabs(self)

        async def handle_index(self, request: web.Request) -> web.Response:
            return _index_page(self, request)

        async def handle_tab(self, request: web.Request) -> web.Response:
            """What became of a tab (its page asks when its websocket closed): running, ended, unknown."""
            record = self.tabs.get(request.query.get("tab", ""))
            return web.json_response({"state": "unknown" if record is None else record.state},
                                     headers={"Cache-Control": "no-store"})

        async def handle_ticket(self, request: web.Request) -> web.WebSocketResponse:
            return await _tab_socket(self, request)
    return _BefairServer



def _open_store(db: Path) -> Any:
    from engine.session.store import SessionStore

    return SessionStore(db)


def _stop_summary(closed: int, stopping: float | None) -> str:
    took = "" if stopping is None else f" in {time.monotonic() - stopping:.1f} s"
    return f"{closed} open tab{'s' if closed != 1 else ''} closed{took}"


def _serve(server: Any, debug: bool) -> None:
    """aiohttp's run_app with befair's signal handling: SIGINT and SIGTERM close the tabs at once."""
    import signal

    from aiohttp import web

    server.debug = debug
    server.initialize_logging()
    loop = asyncio.new_event_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, server.request_exit)
    web.run_app(server._make_app(), host=server.host, port=server.port, handle_signals=False, loop=loop,
                print=lambda *_: None, shutdown_timeout=CLOSE_TIMEOUT_S)


def _index_page(server: Any, request: web.Request) -> web.Response:
    """The tab's page: what it runs is decided here, from its URL, and handed to its websocket by ticket."""
    from aiohttp_jinja2 import render_template

    command = server.command_for(request.query)
    now = time.monotonic()
    server.tabs = {k: r for k, r in server.tabs.items() if r.ended_at is None or now - r.ended_at < ENDED_KEPT_S}
    server.tickets = {k: v for k, v in server.tickets.items() if now - v[1] < TICKET_TTL}
    ticket = secrets.token_urlsafe(18)
    server.tickets[ticket] = (command, now)
    scheme = "wss" if request.secure else "ws"
    host = request.host  # as the browser reached us: works behind 0.0.0.0 and proxies alike
    context = _page_context(request.query, request.scheme, scheme, host, ticket, server.title)
    context["tab"] = command.tab
    response: web.Response = render_template("app_index.html", request, context)
    response.headers["Cache-Control"] = "no-store"
    response.headers["Referrer-Policy"] = "no-referrer"  # the token or code stays in this URL
    return response


async def _tab_socket(server: Any, request: web.Request) -> web.WebSocketResponse:
    """The websocket a page's ticket opens: the tab's app, run until the tab goes."""
    from aiohttp import web

    found = server.tickets.pop(request.match_info["ticket"], None)
    if found is None or time.monotonic() - found[1] >= TICKET_TTL:
        raise web.HTTPForbidden(text="befair: this page's ticket is used or expired; reload the page\n")
    websocket = web.WebSocketResponse(heartbeat=15, timeout=CLOSE_TIMEOUT_S)
    width = _int(request.query.get("width"), 80)
    height = _int(request.query.get("height"), 24)
    await _run_tab(server, request, websocket, found[0], width, height)
    return websocket


def _command_for(server: Any, query: Any) -> TabCommand:
    """The command a tab with this URL's query runs (an aiohttp HTTP error with a page when nothing)."""
    from aiohttp import web

    if server.study is not None and not server.researcher_only and not server.codes:
        from engine.study import links

        server.codes = links.codes(server.store, server.study)
    db, study = server.db, server.study
    given_tab = query.get("tab") or ""
    known = server.tabs.get(given_tab)
    # this tab again (after a restart, or its app ended); a copy of a URL whose tab is open is a new tab
    reconnect = bool(TAB_RE.match(given_tab)) and (known is None or known.state == "ended")
    tab = given_tab if reconnect else new_tab()
    if study is None:
        return TabCommand(_console_argv(db), tab)
    if server.researcher_only:
        return TabCommand(_researcher_argv(db, study), tab)
    given = query.get("researcher")
    if given is not None:
        if server.token is None or not hmac.compare_digest(given.encode(), server.token.encode()):
            raise web.HTTPForbidden(text="befair: wrong researcher token (befair serve prints a new one each time it "
                                         "starts: open the link it printed last)\n")
        return TabCommand(_researcher_argv(db, study), tab)
    participant = (query.get("participant") or "").strip() or None
    if participant is None:
        return _form_or_reconnect(server, tab if reconnect else None, tab)
    code = _checked_code(server, participant, query.get("code"))
    return TabCommand(_participant_argv(db, study, participant, tab=tab, via="reconnect" if reconnect else "link"),
                      tab, participant, {CODE_ENV: code})


def _form_or_reconnect(server: Any, reconnecting: str | None, tab: str) -> TabCommand:
    """No id in the URL: the sign-in form, or the participant this tab signed in before a restart."""
    from engine.session import participants as log

    participant = None if reconnecting is None else log.participant_of_tab(server.store, server.study, reconnecting)
    if participant is None or participant not in server.codes:
        return TabCommand(_participant_argv(server.db, server.study, None, tab=tab, via="form"), tab)
    return TabCommand(_participant_argv(server.db, server.study, participant, tab=tab, via="reconnect"), tab,
                      participant, {CODE_ENV: server.codes[participant]})


def _checked_code(server: Any, participant: str, code: str | None) -> str:
    """The participant's code when the link's is theirs; else an error page saying what to do."""
    from aiohttp import web

    from engine.study.links import LinkRefused, check

    title = f"befair · study {server.study}"
    if not PARTICIPANT_RE.match(participant):
        raise _page(web.HTTPBadRequest, title, "A participant id is letters, digits, '.', '_' or '-': this link is "
                    "damaged.", "Open the exact link you were given, or ask the researcher for your link.")
    try:
        check(server.codes, server.study, participant, code)
    except LinkRefused as refused:
        kind = web.HTTPNotFound if refused.unknown else web.HTTPForbidden
        raise _page(kind, title, f"This link does not open a session: {refused}.",
                    "Your link is in the researcher's invitation; it ends in ?participant=ID&code=CODE.") from None
    return str(server.codes[participant])


def _page(kind: Any, title: str, problem: str, what_to_do: str) -> Any:
    from befair_tui.serve_page import error_page

    return kind(text=error_page(title, problem, what_to_do), content_type="text/html",
                headers={"Cache-Control": "no-store"})


def _web_app(server: Any) -> web.Application:
    """textual-serve's aiohttp application, with the server's own page and websocket handlers."""
    import aiohttp_jinja2
    import jinja2
    from aiohttp import web

    from befair_tui.serve_page import PAGE

    app = web.Application()
    aiohttp_jinja2.setup(app, loader=jinja2.DictLoader({"app_index.html": PAGE}), autoescape=True)
    app.add_routes([
        web.get("/", server.handle_index, name="index"),
        web.get("/tab", server.handle_tab, name="tab"),
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


# --------------------------------------------------------------------------- a tab's app


def _tab_service_class() -> type:
    import json

    from textual_serve.app_service import AppService

    class TabService(AppService):
        """textual-serve's AppService running a TabCommand: its argv without a shell (so the process
        it stops is the app itself), its environment added, and whether the app exited on its own."""

        def __init__(self, command: TabCommand, **kw: Any) -> None:
            super().__init__(command.command, **kw)
            self.tab_command = command
            self.exited = False

        async def _open_app_process(self, width: int = 80, height: int = 24) -> Any:
            env = {**self._build_environment(width=width, height=height), **self.tab_command.env}
            self._process = process = await asyncio.create_subprocess_exec(
                *self.tab_command.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=env)
            self._stdin = process.stdin
            return process

        async def on_meta(self, data: bytes) -> None:
            if json.loads(data).get("type") == "exit":
                self.exited = True
            await super().on_meta(data)

        async def halt(self) -> None:
            """Stop the app now: asked to quit, then SIGTERM, then SIGKILL (HALT_GRACE_S each)."""
            process = self._process
            if process is None or process.returncode is not None:
                return
            await self.send_meta({"type": "quit"})
            for stop in (process.terminate, process.kill):
                try:
                    await asyncio.wait_for(process.wait(), HALT_GRACE_S)
                    return
                except TimeoutError:
                    try:
                        stop()
                    except ProcessLookupError:
                        return
            await process.wait()

    return TabService


async def _run_tab(server: Any, request: Any, websocket: Any, command: TabCommand, width: int, height: int) -> None:
    """One browser tab's terminal: the command run until the tab goes or its app ends."""

    from textual_serve.server import log

    service: Any = None
    try:
        await websocket.prepare(request)
        service = _tab_service_class()(command, write_bytes=websocket.send_bytes, write_str=websocket.send_str,
                                       close=websocket.close, download_manager=server.download_manager,
                                       debug=server.debug)
        record = server.tabs[command.tab] = TabRecord(command, service, websocket)
        await service.start(width, height)
        messages = asyncio.ensure_future(server._process_messages(websocket, service))
        await asyncio.wait({messages, service._task}, return_when=asyncio.FIRST_COMPLETED)
        if not messages.done():  # the app ended on its own (or died): the page says so, not "Session ended"
            record.state, record.ended_at = "ended", time.monotonic()
            messages.cancel()
            await websocket.close()
    except asyncio.CancelledError:
        await websocket.close()
    except Exception as error:  # noqa: BLE001 - one tab's failure is logged, the server goes on
        log.exception(error)
    finally:
        if service is not None:
            await service.halt()
            await service.stop()
        found = server.tabs.get(command.tab)
        if found is not None and found.service is service and found.state == "running":
            del server.tabs[command.tab]


async def _close_tabs(server: Any) -> None:
    """Every open tab at once: its browser told the server restarts (it reconnects), its app stopped."""

    from aiohttp import WSCloseCode

    records = [r for r in server.tabs.values() if r.state == "running"]
    server.stopped_tabs = len(records)

    async def close(record: TabRecord) -> None:
        try:
            await asyncio.wait_for(record.websocket.close(code=WSCloseCode.SERVICE_RESTART,
                                                          message=b"the server is stopping"), CLOSE_TIMEOUT_S)
        except (TimeoutError, ConnectionError, RuntimeError):
            pass
        await record.service.halt()

    await asyncio.gather(*(close(r) for r in records), return_exceptions=True)


def _int(value: str | None, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except ValueError:
        return default


def BefairServer(db: Path, **kw: Any) -> Any:  # noqa: N802 - a class made on first use (textual-serve is optional)
    return _make_server_class()(db, **kw)
