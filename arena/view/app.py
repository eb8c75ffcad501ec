"""The viewer's web app (FastAPI + Jinja2, server-rendered; small JS for charts and polling).

Every page is a GET that reads the run folder, except the play routes
(``POST /play``, ``POST /play/<id>/reply``), the only ones that write. Jinja2
autoescaping is on for every template, and data for scripts is fetched as JSON,
never pasted into a page, so model text always shows as text.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jinja2
from fastapi import FastAPI, Form, HTTPException, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from arena.view import render
from arena.view.play import PlayHost
from arena.view.store import Row, RunStore

HERE = Path(__file__).parent
PER_PAGE = 100
MAX_PER_PAGE = 1000


def make_env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    env.filters["num"] = lambda x, d=3: "" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))
    return env


def filter_rows(rows: list[Row], q: dict[str, str]) -> list[Row]:
    """Rows matching every given filter: step, game, role, phase, outcome, source, and all words of ``q``."""
    out = rows
    if q.get("step"):
        out = [r for r in out if str(r.step) == q["step"]]
    for key, attr in (("game", "game"), ("outcome", "outcome"), ("source", "source")):
        if q.get(key):
            out = [r for r in out if getattr(r, attr) == q[key]]
    if q.get("role"):
        out = [r for r in out if q["role"] in r.roles.values()]
    if q.get("phase"):
        out = [r for r in out if q["phase"] in r.phases]
    words = (q.get("q") or "").lower().split()
    if words:
        out = [r for r in out if all(w in r.text for w in words)]
    return out


def _int(text: str | None, default: int) -> int:
    return int(text) if text is not None and text.isdigit() else default


def create_app(run_dir: Path, tournaments: list[Path] | None = None) -> FastAPI:
    store = RunStore(run_dir, tournaments)
    host = PlayHost(run_dir, store.config())
    env = make_env()
    app = FastAPI(title="arena view", docs_url=None, redoc_url=None, openapi_url=None)
    app.mount("/static", StaticFiles(directory=HERE / "static"), name="static")

    def page(name: str, **ctx: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(run_dir=str(run_dir), **ctx))

    @app.get("/", response_class=HTMLResponse)
    def episodes(request: Request) -> HTMLResponse:
        t0 = time.perf_counter()
        q = {k: v for k, v in request.query_params.items() if v}
        rows = store.rows()
        shown = filter_rows(rows, q)
        per_page = min(MAX_PER_PAGE, max(1, _int(q.get("per_page"), PER_PAGE)))
        pages = max(1, math.ceil(len(shown) / per_page))
        page_no = min(pages, max(1, _int(q.get("page"), 1)))
        facets = {
            "step": sorted({str(r.step) for r in rows if r.step is not None}, key=int),
            "game": sorted({r.game for r in rows}),
            "role": sorted({x for r in rows for x in r.roles.values()}),
            "phase": sorted({x for r in rows for x in r.phases}),
            "outcome": sorted({r.outcome for r in rows}),
            "source": sorted({r.source for r in rows}),
        }
        link = {k: v for k, v in q.items() if k != "page"}
        return page("episodes.html", rows=shown[(page_no - 1) * per_page : page_no * per_page], total=len(rows),
                    matched=len(shown), q=q, facets=facets, page=page_no, pages=pages, link=link,
                    elapsed=time.perf_counter() - t0)

    @app.get("/episode/{name}/{line}", response_class=HTMLResponse)
    def episode(name: str, line: str) -> HTMLResponse:
        found = store.episode(f"{name}/{line}")
        if found is None:
            raise HTTPException(404, "no such episode")
        row, ep = found
        phases, seats, cells = render.action_grid(ep)
        turns = [{**t, "spans": render.token_spans(t)} for t in ep.get("turns") or []]
        return page("episode.html", row=row, ep=ep, turns=turns, views=render.private_views(ep, store.config()),
                    phases=phases, seats=seats, cells=cells,
                    has_weights=any(t.get("token_weights") for t in turns))

    @app.get("/curves", response_class=HTMLResponse)
    def curves() -> HTMLResponse:
        return page("curves.html")

    @app.get("/api/metrics")
    def metrics(since: int = 0) -> JSONResponse:
        rows, count = store.metrics(max(0, since))
        return JSONResponse({"rows": rows, "next": count})

    @app.get("/tournaments", response_class=HTMLResponse)
    def tournaments() -> HTMLResponse:
        items = [(str(p), render.tournament_view(data)) for p, data in store.tournaments()]
        return page("tournaments.html", items=items)

    # ----------------------------------------------------------------- play: the only writes
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
        return page("play_form.html", names=names, chosen=chosen, seats=seats, opponents=opponents, error=error)

    def same_origin(request: Request) -> None:
        """Refuse a form posted by another site's page (a browser sends Origin with every POST)."""
        origin = request.headers.get("origin")
        if origin is not None and urlsplit(origin).netloc != request.headers.get("host"):
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
        session = host.start(config, seat, opponent, seed)
        return RedirectResponse(f"/play/{session.id}", status_code=303)

    @app.get("/play/{sid}", response_class=HTMLResponse)
    def play_page(sid: str) -> HTMLResponse:
        session = host.sessions.get(sid)
        if session is None:
            raise HTTPException(404, "no such game")
        return page("play.html", s=session)

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
        session.reply(reply.replace("\r\n", "\n"))
        return RedirectResponse(f"/play/{sid}", status_code=303)

    app.state.store, app.state.host = store, host
    return app
