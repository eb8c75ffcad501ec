"""The viewer's web app (FastAPI + Jinja2, server-rendered; small JS for charts and polling).

Every page is a GET that reads the run folder, except the play routes
(``POST /play``, ``POST /play/<id>/reply``), the only ones that write. Jinja2
autoescaping is on for every template, and data for scripts is fetched as JSON,
never pasted into a page, so model text always shows as text.

A web page the person visits must not drive the viewer, so:

* only requests whose ``Host`` is an allowed host are served (Starlette's
  ``TrustedHostMiddleware``; 127.0.0.1, localhost and ::1 by default, more with
  ``--allow-host``): a DNS-rebinding page, whose requests carry its own host name, gets 400;
* a write must come from the viewer's own origin: its ``Origin`` must be
  ``http://<allowed host>:<the port the server listens on>`` (or a port given with the host);
  it is never compared with the ``Host`` header, which the other site controls;
* every response carries a strict Content-Security-Policy (scripts and styles from
  /static only, no framing) and X-Frame-Options, X-Content-Type-Options and Referrer-Policy;
* play sessions are capped (429 beyond the cap) and end after an idle timeout;
* a request head of more than ``MAX_HEADERS`` lines or ``MAX_HEAD_BYTES`` gets 431 (the server,
  :mod:`arena.view.serve`, also times out slow heads and bodies and caps connections).
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from starlette.datastructures import Headers
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from arena.view.files import Gone
from arena.view.pages import (
    HERE, MAX_PAGE_BYTES, Pages, add_episode_routes, add_list_routes, add_metric_routes, add_tournament_routes,
)
from arena.view.play import IDLE_S, MAX_SESSIONS, PlayHost, SessionCap
from arena.view.store import RunStore

MAX_REPLY_CHARS = 100_000
MAX_BODY_BYTES = 1 * 2**20  # a write's whole body (the play forms are a few KB)
MAX_HEADERS = 100  # header lines of a request
MAX_HEAD_BYTES = 64 * 2**10  # a request's target and headers together (the server buffers at most this of an
# incomplete head, arena/view/serve.py; a complete one that arrived in one read is refused here)
DEFAULT_HOSTS = ("127.0.0.1", "localhost", "::1")
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # not no-referrer: Chrome then posts Origin: null
]


class SecurityHeaders:
    """ASGI middleware: the security headers on every HTTP response (errors and static files too);
    a request of more than :data:`MAX_HEADERS` header lines or :data:`MAX_HEAD_BYTES` of head gets 431."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(k) + len(v) + 4 for k, v in scope["headers"])
        if len(scope["headers"]) > MAX_HEADERS or head > MAX_HEAD_BYTES:
            why = f"a request holds at most {MAX_HEADERS} header lines and {MAX_HEAD_BYTES // 1024} KiB of head"
            await PlainTextResponse(why, 431, headers={"connection": "close"})(scope, receive, self._with(send))
            return
        await self.app(scope, receive, self._with(send))

    @staticmethod
    def _with(send: Send) -> Send:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        return send_with_headers


def split_host(text: str) -> tuple[str, int | None]:
    """'name', 'name:port', '[::1]:port' or '::1' -> (lowercased name without brackets, port or None)."""
    text = text.strip().lower()
    if text.startswith("["):
        name, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif text.count(":") == 1:
        name, port = text.split(":")
    else:
        name, port = text, ""
    if port and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        raise ValueError(f"not a host[:port]: {text!r}")
    if not name:
        raise ValueError(f"not a host[:port]: {text!r}")
    return name, int(port) if port else None


class WriteGuard:
    """ASGI middleware for every request that is not GET/HEAD: its Origin is checked (see
    :meth:`Origins.allows`) and its body capped at :data:`MAX_BODY_BYTES` *before* the app parses
    the form, so another site's page can neither write nor make the server buffer a huge body."""

    def __init__(self, app: ASGIApp, origins: Origins):
        self.app, self.origins = app, origins

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD"):
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if not self.origins.same_origin(headers, scope):
            await PlainTextResponse("writes must come from this viewer's own pages", 403)(scope, receive, send)
            return
        declared = headers.get("content-length", "0")
        too_big = PlainTextResponse(f"a request body holds at most {MAX_BODY_BYTES} bytes", 413)
        if not (declared.isascii() and declared.isdigit()) or int(declared[:12]) > MAX_BODY_BYTES:
            await too_big(scope, receive, send)
            return
        body, more = b"", True
        while more:  # chunked bodies too: read at most the cap, then replay it to the app
            message = await receive()
            if message["type"] != "http.request":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > MAX_BODY_BYTES:
                await too_big(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


class Origins:
    """The allowed hosts: what ``TrustedHostMiddleware`` matches the Host header with, and the
    origins a write may come from (http, an allowed host, the server's port or the host's own)."""

    def __init__(self, extra: list[str] | None = None):
        self.hosts: dict[str, set[int]] = {}
        for text in [*DEFAULT_HOSTS, *(extra or [])]:
            name, port = split_host(text)
            self.hosts.setdefault(name, set()).update([port] if port else [])

    def trusted_hosts(self) -> list[str]:
        """Host header patterns, IPv6 literals in brackets as the header writes them."""
        return [f"[{h}]" if ":" in h else h for h in self.hosts]

    def same_origin(self, headers: Headers, scope: Scope) -> bool:
        """A write from this viewer's pages: its Origin is allowed on the port the server listens on
        (never compared with the Host header, which the other site controls). Without Origin (curl),
        a browser's Sec-Fetch-Site must not say another site sent it."""
        origin = headers.get("origin")
        if origin is None:
            return headers.get("sec-fetch-site", "same-origin") in ("same-origin", "none")
        server = scope.get("server")
        return self.allows(origin, server[1] if server else None)

    def allows(self, origin: str, server_port: int | None) -> bool:
        try:
            parts = urlsplit(origin)
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError:
            return False
        host = (parts.hostname or "").lower()
        if parts.scheme != "http" or host not in self.hosts or parts.path not in ("", "/"):
            return False
        return port == server_port or port in self.hosts[host]


def create_app(run_dir: Path, tournaments: list[Path] | None = None, allow_hosts: list[str] | None = None,
               max_sessions: int = MAX_SESSIONS, idle_s: float = IDLE_S, *,
               max_page_bytes: int = MAX_PAGE_BYTES) -> FastAPI:
    """The viewer of ``run_dir``; ``allow_hosts``: host names (``name`` or ``name:port``) served besides
    127.0.0.1, localhost and ::1; ``max_sessions`` live play sessions at most, each ended after
    ``idle_s`` seconds without a reply; ``max_page_bytes``: the most HTML one page holds."""
    store = RunStore(run_dir, tournaments)
    host = PlayHost(run_dir, store.config(), max_sessions=max_sessions, idle_s=idle_s)
    origins = Origins(allow_hosts)
    pages = Pages(run_dir, max_page_bytes)
    app = FastAPI(title="arena view", docs_url=None, redoc_url=None, openapi_url=None)
    add_guards(app, origins)
    add_list_routes(app, store, pages)
    add_episode_routes(app, store, pages)
    add_metric_routes(app, store, pages)
    add_tournament_routes(app, store, pages)
    add_play_routes(app, host, origins, pages)
    app.state.store, app.state.host, app.state.origins = store, host, origins
    return app


def add_guards(app: FastAPI, origins: Origins) -> None:
    """The middleware (see the module docstring), the static files, and 404 for a run folder gone."""
    app.add_middleware(WriteGuard, origins=origins)
    app.add_middleware(TrustedHostMiddleware, allowed_hosts=origins.trusted_hosts(), www_redirect=False)
    app.add_middleware(SecurityHeaders)  # added last: outermost, so the Host check's 400 carries them too
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    async def gone(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(f"{exc}: nothing to show", 404)

    app.add_exception_handler(Gone, gone)


def add_play_routes(app: FastAPI, host: PlayHost, origins: Origins, pages: Pages) -> None:
    """The play pages: the form, a game's page and status, and the two writes (start, reply)."""

    @app.get("/play", response_class=HTMLResponse)
    def play_form(config: str | None = None) -> HTMLResponse:
        names = host.config_names()
        chosen = config if config in names else names[0]
        error, seats, opponents = None, [], []
        try:
            cfg = host.load(chosen)
            seats, opponents = host.seats(cfg), host.opponents(cfg, chosen)
        except (ValueError, KeyError, OSError) as e:
            error = f"{chosen}: {e}"
        return pages.render("play_form.html", names=names, chosen=chosen, seats=seats, opponents=opponents,
                            error=error)

    def same_origin(request: Request) -> None:
        """Refuse a form posted by another site's page (WriteGuard did already; kept beside each write)."""
        if not origins.same_origin(request.headers, request.scope):
            raise HTTPException(403, "the play form must be posted from this viewer")

    @app.post("/play")
    def play_start(request: Request, config: str = Form(...), seat: str = Form(...), opponent: str = Form(...),
                   seed: int = Form(0)) -> RedirectResponse:
        same_origin(request)
        if config not in host.config_names():
            raise HTTPException(400, f"unknown config {config!r}")
        try:
            cfg = host.load(config)
        except (ValueError, KeyError, OSError) as e:
            raise HTTPException(400, f"{config}: {e}") from None
        if seat not in host.seats(cfg) or opponent not in host.opponents(cfg, config):
            raise HTTPException(400, "unknown seat or opponent")
        try:
            session = host.start(config, seat, opponent, seed)
        except SessionCap as e:
            raise HTTPException(429, str(e), headers={"Retry-After": "60"}) from None
        return RedirectResponse(f"/play/{session.id}", status_code=303)

    @app.get("/play/{sid}", response_class=HTMLResponse)
    def play_page(sid: str) -> HTMLResponse:
        session = host.sessions.get(sid)
        if session is None:
            raise HTTPException(404, "no such game")
        return pages.render("play.html", s=session)

    @app.get("/api/play/{sid}")
    def play_status(sid: str) -> JSONResponse:
        session = host.sessions.get(sid)
        if session is None:
            raise HTTPException(404, "no such game")
        return JSONResponse({"status": session.status, "turns": len(session.history)})

    @app.post("/play/{sid}/reply")
    def play_reply(request: Request, sid: str, reply: str = Form("")) -> Response:
        same_origin(request)
        session = host.sessions.get(sid)
        if session is None:
            raise HTTPException(404, "no such game")
        if len(reply) > MAX_REPLY_CHARS:
            raise HTTPException(413, f"a reply holds at most {MAX_REPLY_CHARS} characters")
        session.reply(reply.replace("\r\n", "\n"))
        return RedirectResponse(f"/play/{sid}", status_code=303)
