"""The viewer's read-only pages: the episode list, one episode, curves, metrics, tournaments.

Every page is written by :meth:`Pages.render`, which runs its template as a stream
(``Template.generate``) and stops at :data:`MAX_PAGE_BYTES`, closing what is open and
saying where the page stops and why; whatever the data, a page costs at most that
much memory and the time to write it. What a page shows is made as it is written:
an episode's token spans turn by turn (:class:`arena.view.render.Spans`), the
tournament files one at a time (:class:`TournamentSections`), so a page cut at the cap
never reads or builds what follows the cut. The tournaments page also stops reading
files past :data:`MAX_TOURNAMENT_BYTES` of JSON; each file left out is one link away
(``/tournaments?file=N`` shows that file alone).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from html import escape
from pathlib import Path
from typing import Any

import jinja2
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, Response

from arena.view import render
from arena.view.files import Refused
from arena.view.listing import Listed
from arena.view.store import READERS, Row, RunStore

HERE = Path(__file__).parent
PER_PAGE = 100
MAX_PER_PAGE = 1000
MAX_PAGE_BYTES = 8 * 2**20  # of HTML one page may add up to; past it the page stops, saying so
MAX_TOURNAMENT_BYTES = 32 * 2**20  # of tournament JSON one page reads; the files past it are links
MAX_LINKS = 200  # links to the files a page left out (the rest are counted)
MAX_OPTIONS = 500  # values of a filter offered as a menu; past it, a text box (20,000 steps: 0.7 MiB of options)
# what may be open where a page is cut: closed (an end tag with nothing to close is ignored)
_CLOSE = "</option></select></textarea></pre></span></div></td></tr></tbody></table></details></section>"


def make_env() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"), autoescape=True)
    env.filters["num"] = lambda x, d=3: "" if x is None else (f"{x:.{d}f}" if isinstance(x, float) else str(x))
    return env


class Pages:
    """The templates, written within :data:`MAX_PAGE_BYTES`; at most :data:`READERS` heavy pages
    (an episode, metrics, tournaments: each takes memory in proportion to its data) at once."""

    def __init__(self, run_dir: Path, max_page_bytes: int = MAX_PAGE_BYTES):
        self.run_dir, self.max_page_bytes = run_dir, max_page_bytes
        self.env = make_env()
        self.heavy = threading.BoundedSemaphore(READERS)

    def render(self, name: str, cut: Callable[[], str] | None = None, **ctx: Any) -> HTMLResponse:
        """Template ``name`` written up to :attr:`max_page_bytes`; past it the page stops where it is
        (never inside a tag: markup is the only raw ``<`` in a page, text is escaped), closes what
        may be open, and ends with a note (``cut()`` adds what this page left out, as HTML)."""
        out, size = [], 0
        stream = self.env.get_template(name).generate(run_dir=str(self.run_dir), **ctx)
        try:
            for chunk in stream:
                out.append(chunk)
                size += len(chunk.encode())
                if size > self.max_page_bytes:
                    break
            else:
                return HTMLResponse("".join(out))
        finally:
            stream.close()
        html = "".join(out).encode()[: self.max_page_bytes].decode("utf-8", "ignore")
        if html.rfind("<") > html.rfind(">"):  # inside a tag: cut before it
            html = html[: html.rfind("<")]
        note = (f'{_CLOSE}<p class="truncated badc" id="truncated">This page stops here: it reached '
                f"{self.max_page_bytes / 2**20:g} MiB of HTML, the most one page may hold. {cut() if cut else ''}</p>"
                "</main></body></html>")
        return HTMLResponse(html + note)


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
    """A page number from the query: ``default`` when absent; 404 for anything but a few ASCII digits
    (``²`` passes ``str.isdigit`` but not ``int``; 5,000 digits pass neither sensibly)."""
    if text is None or text == "":
        return default
    if not (text.isascii() and text.isdigit()) or len(text) > 9:
        raise HTTPException(404, "no such page")
    return int(text)


def facets(rows: list[Row]) -> dict[str, list[str]]:
    """The values each filter of the list offers."""
    return {
        "step": sorted({str(r.step) for r in rows if r.step is not None}, key=int),
        "game": sorted({r.game for r in rows}),
        "role": sorted({x for r in rows for x in r.roles.values()}),
        "phase": sorted({x for r in rows for x in r.phases}),
        "outcome": sorted({r.outcome for r in rows}),
        "source": sorted({r.source for r in rows}),
    }


class TournamentSections:
    """The tournaments page's files, read, shaped and written one at a time as the page iterates
    them (one parsed file in memory, whatever the folder holds); past ``max_bytes`` of JSON read the
    rest are left out. :attr:`rest` (after the loop) and :meth:`left_out` (when the page is cut
    short) name the files not shown, as links to each alone."""

    def __init__(self, store: RunStore, files: list[tuple[int, Listed]], max_bytes: int = MAX_TOURNAMENT_BYTES):
        self.store, self.files, self.max_bytes = store, files, max_bytes
        self.at = 0  # the position in ``files`` being written
        self.rest: list[tuple[int, str]] = []

    def __iter__(self) -> Iterator[tuple[int, str, dict[str, Any]]]:
        read = 0
        for self.at, (i, f) in enumerate(self.files):
            if read >= self.max_bytes:
                self.rest = [(j, str(g.path)) for j, g in self.files[self.at :]]
                return
            data = self.store.tournament(f)
            read += f.sig[2] if f.sig else _size(f.path)  # its size on disk
            try:
                view = render.tournament_view(data)
            except Exception as e:  # noqa: BLE001 - one odd file is shown as an error, the page stays
                view = render.tournament_view({"error": f"cannot show: {type(e).__name__}"})
            del data
            yield i, str(f.path), view

    def left_out(self) -> str:
        """HTML: links to the files from the one being written on."""
        return links([(i, str(f.path)) for i, f in self.files[self.at :]])


def _size(path: Path) -> int:
    try:
        return path.stat().st_size  # a file named on the command line (read wherever it lies)
    except OSError:
        return 0


def links(files: list[tuple[int, str]]) -> str:
    """HTML: each file a link to itself alone (at most :data:`MAX_LINKS`, the rest counted)."""
    shown = ", ".join(f'<a href="/tournaments?file={i}">{escape(p)}</a>' for i, p in files[:MAX_LINKS])
    more = f" and {len(files) - MAX_LINKS} more" if len(files) > MAX_LINKS else ""
    return f"Files not shown in full (open each alone): {shown}{more}." if files else ""


def add_list_routes(app: FastAPI, store: RunStore, pages: Pages) -> None:
    """``/``: the episode list, filtered and paged."""

    @app.get("/", response_class=HTMLResponse)
    def episodes(request: Request) -> HTMLResponse:
        t0 = time.perf_counter()
        q = {k: v for k, v in request.query_params.items() if v}
        rows, skips = store.scan()
        shown = filter_rows(rows, q)
        per_page = min(MAX_PER_PAGE, max(1, _int(q.get("per_page"), PER_PAGE)))
        pages_n = max(1, math.ceil(len(shown) / per_page))
        page_no = min(pages_n, max(1, _int(q.get("page"), 1)))
        link = {k: v for k, v in q.items() if k != "page"}
        return pages.render("episodes.html", rows=shown[(page_no - 1) * per_page : page_no * per_page],
                            total=len(rows), matched=len(shown), q=q, facets=facets(rows), page=page_no,
                            pages=pages_n, link=link, skips=skips, max_options=MAX_OPTIONS,
                            elapsed=time.perf_counter() - t0)


def add_episode_routes(app: FastAPI, store: RunStore, pages: Pages) -> None:
    """``/episode/<key>``: one episode, its turns written as the page is (see the module docstring)."""

    @app.get("/episode/{key:path}", response_class=HTMLResponse)
    def episode(key: str) -> Response:
        try:
            found = store.episode(key)
        except Refused as e:
            return PlainTextResponse(f"this episode's file is not read: {e}", 422)
        if found is None:
            raise HTTPException(404, "no such episode")
        row, ep = found
        ep = {**ep, **{k: ep[k] if isinstance(ep.get(k), dict) else {}
                       for k in ("roles", "rewards", "outcome", "info", "metrics")}}
        try:
            with pages.heavy:
                phases, seats, cells = render.action_grid(ep)
                turns = [{**t, "spans": render.Spans(t)} for t in ep.get("turns") or [] if isinstance(t, dict)]
                return pages.render(
                    "episode.html", cut=lambda: f"The episode has {len(turns)} turns.", row=row, ep=ep, turns=turns,
                    views=render.private_views(ep, store.config()), phases=phases, seats=seats, cells=cells,
                    grid=render.grid_fits(phases, seats), has_spans=any(t["spans"] for t in turns),
                    has_weights=any(t.get("token_weights") for t in turns))
        except Exception as e:  # noqa: BLE001 - an episode of an odd shape: say so, never a 500
            raise HTTPException(422, f"this episode cannot be shown ({type(e).__name__})") from None


def add_metric_routes(app: FastAPI, store: RunStore, pages: Pages) -> None:
    """``/curves`` and ``/api/metrics``: metrics.jsonl, streamed a piece at a time."""

    @app.get("/curves", response_class=HTMLResponse)
    def curves() -> HTMLResponse:
        return pages.render("curves.html")

    @app.get("/api/metrics")
    def metrics(since: str | None = None) -> Response:
        start = _int(since, 0)
        with pages.heavy:  # the rows become bytes before the next request parses its own
            rows, count, skipped, more = store.metrics(start)
            body = json.dumps({"rows": rows, "next": count, "skipped": skipped, "more": more},
                              ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
        return Response(body, media_type="application/json")


def add_tournament_routes(app: FastAPI, store: RunStore, pages: Pages) -> None:
    """``/tournaments`` (every file, one at a time, within the caps) and ``/tournaments?file=N`` (one)."""

    @app.get("/tournaments", response_class=HTMLResponse)
    def tournaments(file: str | None = None) -> HTMLResponse:
        files = list(enumerate(store.tournament_files()))
        if file is not None:
            i = _int(file, 0)
            if i >= len(files):
                raise HTTPException(404, "no such tournament file")
            files = files[i : i + 1]
        sections = TournamentSections(store, files)
        with pages.heavy:
            return pages.render("tournaments.html", cut=sections.left_out, items=sections, count=len(files),
                                links=links)
