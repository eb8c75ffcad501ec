"""Pure helpers that shape saved data for the templates (no web framework here).

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
from collections.abc import Callable
from typing import Any

Segment = tuple[str, bool]  # (text, highlighted)
MAX_ROWS = 200  # rows shown of a tournament's other tables (a schedule, every game's record)
MAX_TOKENS = 20_000  # a completion's tokens coloured on the page (the rest shows as plain text)


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
    tokens = turn.get("tokens") or []
    if isinstance(tokens, list) and len(tokens) > MAX_TOKENS:
        tokens = [*tokens[:MAX_TOKENS], "".join(map(str, tokens[MAX_TOKENS:]))]
    lps = turn.get("logprobs") or []
    weights = turn.get("token_weights") or []
    out = []
    for i, tok in enumerate(tokens):
        lp = lps[i] if i < len(lps) else None
        w = weights[i] if i < len(weights) else None
        tip = f"logprob {lp:.3f}" if isinstance(lp, int | float) else "logprob ?"
        if w is not None:
            tip += f" · weight {w:.3f}"
        out.append({"text": str(tok), "lp": logprob_colour(lp), "w": weight_colour(w) if weights else None, "tip": tip})
    return out


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
    """Phases (columns), seats (rows) and each (seat, phase)'s turns: who did what, votes included."""
    phases: list[str] = []
    seats: list[str] = list((ep.get("roles") or {}).keys())
    cells: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for t in ep.get("turns") or []:
        phase, seat = str(t.get("phase", "")), str(t.get("seat", ""))
        if phase not in phases:
            phases.append(phase)
        if seat not in seats:
            seats.append(seat)
        cells.setdefault((seat, phase), []).append(t)
    return phases, seats, cells


# ---------------------------------------------------------------- tournaments
def _num(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and not isinstance(x, bool) else None


def tournament_view(data: Any) -> dict[str, Any]:
    """Whatever a tournament JSON holds, as tables: ratings, a payoff heatmap, cycles, and the rest."""
    view: dict[str, Any] = {"ratings": None, "payoff": None, "payoffs": [], "cycles": None, "tables": [], "scalars": [],
                            "raw": None}
    if not isinstance(data, dict):
        view["raw"] = json.dumps(data, indent=2)[:20000]
        return view
    rest = dict(data)
    players = [str(p) for p in rest.pop("players", []) or []] if isinstance(data.get("players"), list) else []
    ratings = rest.pop("ratings", None)
    if isinstance(ratings, dict):
        ratings = [{"player": k, **(v if isinstance(v, dict) else {"rating": v})} for k, v in ratings.items()
                   if not str(k).startswith("_")]  # '_anchor' and the like are notes, not players
    if isinstance(ratings, list) and all(isinstance(r, dict) for r in ratings):
        cols = list(dict.fromkeys(k for r in ratings for k in r))
        lows = [_num(r.get("low")) for r in ratings]
        highs = [_num(r.get("high")) for r in ratings]
        span = [v for v in [*lows, *highs, *(_num(r.get("rating")) for r in ratings)] if v is not None]
        lo, hi = (min(span), max(span)) if span else (0.0, 1.0)
        width = (hi - lo) or 1.0
        bars = []
        for r in ratings:
            a, b, m = _num(r.get("low")), _num(r.get("high")), _num(r.get("rating"))
            bars.append(None if a is None or b is None else
                        {"left": 100 * (a - lo) / width, "width": max(0.5, 100 * (b - a) / width),
                         "mid": None if m is None else 100 * (m - lo) / width})
        view["ratings"] = {"cols": cols, "rows": ratings, "bars": bars}
        players = players or [str(r.get("player", "")) for r in ratings]
    view["payoffs"] = []
    for key in ("payoff", "payoff_matrix", "payoffs"):
        if key in rest:
            value = rest.pop(key)
            if isinstance(value, dict) and value and all(isinstance(m, list) for m in value.values()):
                named = [(str(k), _heatmap(m, players)) for k, m in value.items()]  # e.g. overall and per role
            else:
                named = [("", _heatmap(value, players))]
            view["payoffs"] = [(k, h) for k, h in named if h is not None]
            view["payoff"] = view["payoffs"][0][1] if view["payoffs"] else None
            break
    cycles = rest.pop("cycles", None)
    if isinstance(cycles, list):
        view["cycles"] = [" → ".join(map(str, [*c, c[0]])) if isinstance(c, list) and c else str(c) for c in cycles]
    for k, v in rest.items():
        if isinstance(v, str | int | float | bool) or v is None:
            view["scalars"].append((k, v))
        elif isinstance(v, list) and v and all(isinstance(r, dict) for r in v):
            cols = list(dict.fromkeys(c for r in v for c in r))
            view["tables"].append({"title": k, "cols": cols, "rows": [[_cell(r.get(c)) for c in cols] for r in v[:MAX_ROWS]],
                                   "more": max(0, len(v) - MAX_ROWS)})
        elif isinstance(v, dict) and v and all(isinstance(r, dict) for r in v.values()):
            cols = list(dict.fromkeys(c for r in v.values() for c in r))
            view["tables"].append({"title": k, "cols": ["", *cols],
                                   "rows": [[str(n), *(_cell(r.get(c)) for c in cols)] for n, r in v.items()]})
        else:
            view["tables"].append({"title": k, "cols": ["value"], "rows": [[_cell(v)]]})
    return view


def _cell(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    return v if isinstance(v, str) else json.dumps(v)


def _heatmap(matrix: Any, players: list[str]) -> dict[str, Any] | None:
    """A square (or rectangular) matrix as rows of (value, colour); dict-of-dicts accepted too."""
    if isinstance(matrix, dict):
        rows_names = [str(k) for k in matrix]
        cols_names = list(dict.fromkeys(str(c) for r in matrix.values() if isinstance(r, dict) for c in r))
        grid = [[_num((matrix[r] or {}).get(c)) if isinstance(matrix[r], dict) else None for c in cols_names]
                for r in matrix]
    elif isinstance(matrix, list) and all(isinstance(r, list) for r in matrix):
        grid = [[_num(x) for x in r] for r in matrix]
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

    return {"rows": rows_names, "cols": cols_names,
            "grid": [[("" if x is None else f"{x:.3g}", colour(x)) for x in r] for r in grid]}
