"""Pure helpers that shape saved data for the templates (no web framework here).

Every shape here is linear in its input: a table is never the product of two lists
the input can make long (a grid of seats by phases, rows by the union of their keys)
without a cap on both, so the page a file makes grows with the file, and
:mod:`arena.view.pages` caps what any page may add up to.

Colours: a token's log-probability ``lp`` maps to a hue ``120 * clamp(1 + lp/5)``
(green at ``lp = 0``, red at ``lp <= -5``); an AUSO action weight ``w`` maps to
``clamp(w / 2)`` on a white-to-blue scale (1 is the plain weight). Masked spans
are found by the per-game functions in :data:`MASKS` (SpyRL: runs of its mask
token in the spy's view). Templates escape every string these return.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from itertools import islice
from typing import Any

Segment = tuple[str, bool]  # (text, highlighted)
MAX_ROWS = 200  # rows shown of any tournament table (ratings, a schedule, every game's record)
MAX_COLS = 50  # columns shown of a tournament table (the union of its rows' keys)
MAX_HEATMAP = 100  # rows and columns shown of a payoff heatmap
MAX_HEATMAPS = 8  # payoff heatmaps shown of one file (overall, per role, ...)
MAX_CELL_CHARS = 500  # of one table cell, scalar or cycle
MAX_TOKENS = 20_000  # a completion's tokens coloured on the page (the rest shows as plain text)
MAX_GRID_CELLS = 2_000  # seats x phases of the "who did what" table; past it, a list of the cells that hold turns


def logprob_colour(lp: float | None) -> str:
    """``hsl(hue, 75%, 80%)`` with hue ``120 * clamp(1 + lp/5, 0, 1)``; grey when unknown."""
    if lp is None or not isinstance(lp, int | float) or math.isnan(lp):
        return "#e5e5e5"
    hue = 120 * min(1.0, max(0.0, 1 + lp / 5))
    return f"hsl({hue:.0f}, 75%, 80%)"


def weight_colour(w: float | None) -> str:
    """White (w = 0) to blue (w >= 2): ``hsl(210, 80%, 100% - 40% * clamp(w/2))``."""
    if w is None or not isinstance(w, int | float) or math.isnan(w):
        return "#e5e5e5"
    return f"hsl(210, 80%, {100 - 40 * min(1.0, max(0.0, w / 2)):.0f}%)"


def token_spans(turn: dict[str, Any]) -> list[dict[str, Any]]:
    """Each completion token with its colours and a tooltip; empty when the turn has no tokens."""
    return list(iter_token_spans(turn))


def iter_token_spans(turn: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """:func:`token_spans` one at a time, as the page is written (a page cut at its size cap never
    makes the spans past the cut: a dict a token, 20,000 tokens a turn, would be most of its memory)."""
    tokens = turn.get("tokens") or []
    if isinstance(tokens, list) and len(tokens) > MAX_TOKENS:
        tokens = [*tokens[:MAX_TOKENS], "".join(map(str, tokens[MAX_TOKENS:]))]
    lps = turn.get("logprobs") or []
    weights = turn.get("token_weights") or []
    for i, tok in enumerate(tokens):
        lp = lps[i] if i < len(lps) else None
        w = weights[i] if i < len(weights) else None
        tip = f"logprob {lp:.3f}" if isinstance(lp, int | float) else "logprob ?"
        if w is not None:
            tip += f" · weight {w:.3f}"
        yield {"text": str(tok), "lp": logprob_colour(lp), "w": weight_colour(w) if weights else None, "tip": tip}


class Spans:
    """A turn's token spans for the template: true when the turn has tokens, made when iterated."""

    def __init__(self, turn: dict[str, Any]):
        self.turn = turn
        self.any = bool(turn.get("tokens"))

    def __bool__(self) -> bool:
        return self.any

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return iter_token_spans(self.turn)


# ---------------------------------------------------------------- private views
def mask_runs(text: str, token: str) -> list[Segment]:
    """``text`` cut into plain pieces and runs of ``token`` (with the spaces between them) to highlight."""
    if not token:
        return [(text, False)]
    t = re.escape(token)
    pattern = re.compile(rf"{t}(?:[ \t]*{t})*")
    out: list[Segment] = []
    pos = 0
    for m in pattern.finditer(text):
        if m.start() > pos:
            out.append((text[pos : m.start()], False))
        out.append((m.group(0), True))
        pos = m.end()
    if pos < len(text):
        out.append((text[pos:], False))
    return out


def spy_mask(ep: dict[str, Any], seat: str, text: str, config: dict[str, Any]) -> list[Segment]:
    """SpyRL: the spy's view has one masked span, runs of the game's mask token."""
    if (ep.get("roles") or {}).get(seat) != "spy":
        return [(text, False)]
    token = str((config.get("game") or {}).get("mask_token") or "*")
    return mask_runs(text, token)


MASKS: dict[str, Callable[[dict[str, Any], str, str, dict[str, Any]], list[Segment]]] = {"spy": spy_mask}


def game_family(game: str) -> str:
    """'spy_v0' -> 'spy'."""
    return re.sub(r"_v\d+$", "", game)


def private_views(ep: dict[str, Any], config: dict[str, Any]) -> list[dict[str, Any]]:
    """Per seat: its role and what it was shown first (the user message of its first turn), masks marked."""
    mark = MASKS.get(game_family(str(ep.get("game", ""))))
    seen: dict[str, dict[str, Any]] = {}
    for t in ep.get("turns") or []:
        seat = str(t.get("seat", ""))
        if seat in seen:
            continue
        user = [m for m in t.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
        text = str(user[-1].get("content", "")) if user else ""
        segments = mark(ep, seat, text, config) if mark else [(text, False)]
        seen[seat] = {"seat": seat, "role": (ep.get("roles") or {}).get(seat, "?"), "segments": segments,
                      "masked": any(h for _, h in segments)}
    return list(seen.values())


def action_grid(ep: dict[str, Any]) -> tuple[list[str], list[str], dict[tuple[str, str], list[dict[str, Any]]]]:
    """Phases (columns), seats (rows) and each (seat, phase)'s turns: who did what, votes included.
    Linear in the turns (a dict keeps each list's order); the page draws the grid only when
    ``len(seats) * len(phases)`` is at most :data:`MAX_GRID_CELLS` (:func:`grid_fits`), else the cells
    that hold turns, one a line: 3,500 turns of distinct seats and phases made 200 MiB of empty cells."""
    phases: dict[str, None] = {}
    seats: dict[str, None] = dict.fromkeys(str(s) for s in (ep.get("roles") or {}))
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t in ep.get("turns") or []:
        phase, seat = str(t.get("phase", "")), str(t.get("seat", ""))
        phases.setdefault(phase)
        seats.setdefault(seat)
        cells.setdefault((seat, phase), []).append(t)
    return list(phases), list(seats), cells


def grid_fits(phases: list[str], seats: list[str]) -> bool:
    return len(phases) * len(seats) <= MAX_GRID_CELLS


# ---------------------------------------------------------------- tournaments
def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def tournament_view(data: Any) -> dict[str, Any]:
    """Whatever a tournament JSON holds, as tables: ratings, a payoff heatmap, cycles, and the rest.
    Every table keeps at most :data:`MAX_ROWS` rows and :data:`MAX_COLS` columns (a heatmap
    :data:`MAX_HEATMAP` of each), every cell :data:`MAX_CELL_CHARS` characters; ``more`` says what
    was left out. (Rows times the union of their keys, uncapped, made 89 MiB of a 161 KiB file.)"""
    view: dict[str, Any] = {"ratings": None, "payoff": None, "payoffs": [], "cycles": None, "tables": [], "scalars": [],
                            "raw": None, "more": []}
    if not isinstance(data, dict):
        view["raw"] = _dumps(data, 20000, indent=2)[:20000]
        return view
    rest = dict(data)
    players = [str(p) for p in rest.pop("players", []) or []] if isinstance(data.get("players"), list) else []
    ratings = rest.pop("ratings", None)
    if isinstance(ratings, dict):
        ratings = [{"player": k, **(v if isinstance(v, dict) else {"rating": v})} for k, v in ratings.items()
                   if not str(k).startswith("_")]  # '_anchor' and the like are notes, not players
    if isinstance(ratings, list) and all(isinstance(r, dict) for r in ratings):
        view["ratings"] = _ratings(ratings, view["more"])
        if view["ratings"] is None and ratings:
            view["tables"].append(_table("ratings", [(None, r) for r in ratings]))
        players = players or [str(r.get("player", "")) for r in ratings]
    for key in ("payoff", "payoff_matrix", "payoffs"):
        if key in rest:
            value = rest.pop(key)
            if isinstance(value, dict) and value and all(isinstance(m, list) for m in value.values()):
                named = [(str(k), m) for k, m in islice(value.items(), MAX_HEATMAPS)]
                _left_out(view["more"], key, len(value), MAX_HEATMAPS, "heatmaps")
            else:
                named = [("", value)]
            for title, matrix in named:
                heatmap = _heatmap(matrix, players)
                if heatmap is not None:
                    view["payoffs"].append((title, heatmap))
                elif isinstance(matrix, dict) and matrix and all(isinstance(r, dict) for r in matrix.values()):
                    view["tables"].append(_table(f"{key} {title}".strip(), list(matrix.items())))  # mostly empty
            view["payoff"] = view["payoffs"][0][1] if view["payoffs"] else None
            break
    cycles = rest.pop("cycles", None)
    if isinstance(cycles, list):
        view["cycles"] = [_cut(" → ".join(map(str, [*c[:MAX_COLS], c[0]])) if isinstance(c, list) and c else str(c))
                          for c in cycles[:MAX_ROWS]]
        _left_out(view["more"], "cycles", len(cycles), MAX_ROWS, "cycles")
    for k, v in rest.items():
        if isinstance(v, str | int | float | bool) or v is None:
            view["scalars"].append((k, _cut(v) if isinstance(v, str) else v))
        elif isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
            view["tables"].append(_table(k, [(None, r) for r in v]))
        elif isinstance(v, dict) and v and all(isinstance(r, dict) for r in v.values()):
            view["tables"].append(_table(k, list(v.items())))
        else:
            view["tables"].append({"title": k, "cols": ["value"], "rows": [[_cell(v)]], "more": ""})
    return view


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CELL_CHARS else text[:MAX_CELL_CHARS] + "…"


def _left_out(notes: list[str], what: str, n: int, shown: int, unit: str) -> None:
    if n > shown:
        notes.append(f"{what}: the first {shown} of {n} {unit} shown")


def _columns(rows: list[dict[str, Any]]) -> tuple[list[str], int]:
    """The first :data:`MAX_COLS` keys of ``rows`` in order of appearance, and how many there are."""
    cols = list(dict.fromkeys(str(c) for r in rows for c in r))
    return cols[:MAX_COLS], len(cols)


def _sparse(rows: int, cols: int, values: int) -> bool:
    """A grid of mostly empty cells (rows times the union of their keys, far more than the values):
    drawn as one row a value instead, so the page grows with the values, not with their product."""
    return rows * cols > 2 * values + 100


def _table(title: str, rows: list[tuple[str | None, dict[str, Any]]]) -> dict[str, Any]:
    """A table of dicts (named ones get a first column of their names), within the caps; a mostly
    empty one as (row, key, value) rows."""
    cols, ncols = _columns([r for _, r in rows])
    shown = rows[:MAX_ROWS]
    named = rows[0][0] is not None
    more = [f"first {MAX_ROWS} of {len(rows)} rows" if len(rows) > MAX_ROWS else "",
            f"first {MAX_COLS} of {ncols} columns" if ncols > MAX_COLS else ""]
    if _sparse(len(shown), len(cols), sum(min(len(r), MAX_COLS) for _, r in shown)):
        return {"title": title, "cols": ["row", "key", "value"],
                "rows": [[str(n) if named else str(i), str(k), _cell(v)]
                         for i, (n, r) in enumerate(shown) for k, v in islice(r.items(), MAX_COLS)],
                "more": "; ".join([*(m for m in more if m), "mostly empty: one row a value"])}
    return {"title": title, "cols": ["", *cols] if named else cols,
            "rows": [[*([str(n)] if named else []), *(_cell(r.get(c)) for c in cols)] for n, r in shown],
            "more": "; ".join(m for m in more if m)}


def _ratings(ratings: list[dict[str, Any]], notes: list[str]) -> dict[str, Any] | None:
    """Ratings with their intervals as bars on one scale (the scale from every rating, the rows
    capped); None when mostly empty (the caller shows them as a table of one row a value)."""
    cols, ncols = _columns(ratings)
    rows = ratings[:MAX_ROWS]
    if _sparse(len(rows), len(cols), sum(min(len(r), MAX_COLS) for r in rows)):
        return None
    _left_out(notes, "ratings", len(ratings), MAX_ROWS, "players")
    _left_out(notes, "ratings", ncols, MAX_COLS, "columns")
    span = [v for r in ratings for v in (_num(r.get("low")), _num(r.get("high")), _num(r.get("rating")))
            if v is not None]
    lo, hi = (min(span), max(span)) if span else (0.0, 1.0)
    width = (hi - lo) or 1.0
    bars = []
    for r in rows:
        a, b, m = _num(r.get("low")), _num(r.get("high")), _num(r.get("rating"))
        bars.append(None if a is None or b is None else
                    {"left": 100 * (a - lo) / width, "width": max(0.5, 100 * (b - a) / width),
                     "mid": None if m is None else 100 * (m - lo) / width})
    return {"cols": cols, "rows": [{c: _rating_cell(r.get(c)) for c in cols} for r in rows], "bars": bars}


def _rating_cell(v: Any) -> Any:
    """A number stays a number (the page rounds it); anything else becomes a capped string."""
    return v if v is None or isinstance(v, int | float) else _cell(v)


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return _cut(v if isinstance(v, str) else _dumps(v, MAX_CELL_CHARS))


def _dumps(v: Any, limit: int, indent: int | None = None) -> str:
    """The start of ``json.dumps(v)``, about ``limit`` characters of it: written piece by piece and
    stopped there, so a cell holding a list of a million numbers costs what it shows."""
    out, n = [], 0
    # check_circular=False: parsed JSON has no cycles, and the encoder's markers (a dict of every
    # list and dict being written, held by a cycle of closures) would keep ``v`` alive until a gc
    # when the writing stops early: six 16 MiB tournament files stayed in memory that way
    pieces = json.JSONEncoder(indent=indent, check_circular=False).iterencode(v)
    try:
        for piece in pieces:
            out.append(piece)
            n += len(piece)
            if n > limit:
                break
    finally:
        pieces.close()
    return "".join(out)


def _heatmap(matrix: Any, players: list[str]) -> dict[str, Any] | None:
    """A square (or rectangular) matrix as rows of (value, colour), at most :data:`MAX_HEATMAP` of
    each; dict-of-dicts accepted too (its columns: the union of the rows' keys; None when mostly empty)."""
    if isinstance(matrix, dict):
        keys = list(islice(matrix, MAX_HEATMAP))
        rows = [matrix[k] if isinstance(matrix[k], dict) else {} for k in keys]
        cols_names = list(dict.fromkeys(str(c) for r in matrix.values() if isinstance(r, dict) for c in r))
        cols_names = cols_names[:MAX_HEATMAP]
        if _sparse(len(rows), len(cols_names), sum(len(r) for r in rows)):
            return None
        rows_names = [str(k) for k in keys]
        grid = [[_num(r.get(c)) for c in cols_names] for r in rows]
    elif isinstance(matrix, list) and all(isinstance(r, list) for r in matrix):
        grid = [[_num(x) for x in r[:MAX_HEATMAP]] for r in matrix[:MAX_HEATMAP]]
        width = max((len(r) for r in grid), default=0)
        rows_names = players[: len(grid)] if len(players) >= len(grid) else [str(i) for i in range(len(grid))]
        cols_names = players[:width] if len(players) >= width else [str(i) for i in range(width)]
    else:
        return None
    values = [x for r in grid for x in r if x is not None]
    lo, hi = (min(values), max(values)) if values else (0.0, 1.0)
    width = (hi - lo) or 1.0

    def colour(x: float | None) -> str:
        if x is None:
            return "#eeeeee"
        return f"hsl({120 * (x - lo) / width:.0f}, 70%, 75%)"

    return {"rows": [_cut(n) for n in rows_names], "cols": [_cut(n) for n in cols_names],
            "grid": [[("" if x is None else f"{x:.3g}", colour(x)) for x in r] for r in grid]}
