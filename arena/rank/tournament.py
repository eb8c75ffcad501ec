"""``python -m arena.tournament CONFIG --players P1 P2 ... --games N``: rate players against each other.

    python -m arena.tournament games/spy/spy.yaml --games 40 --layouts "[{spy: 0}, {spy: 1}, {spy: 2}, {spy: 3}]" \\
        --players base=smollm2-135m s4=runs/spy/checkpoints/step_000004 s8=runs/spy scripted:copycat scripted:fixed_vote:1
    python -m arena.tournament tests/fixtures/rps.yaml --players scripted:rock scripted:paper scripted:scissors --games 30

Players. Each is ``[LABEL=]SPEC``; SPEC is anything the policy table can name:
a policy of the config (``learner``, an ``openai`` server entry, ...),
``scripted:<bot>``, or a model (built-in name, model folder, checkpoint or run
folder, hub id) played with the sampling of the config's trainable policy.
Models that resolve to the same weights share one loaded copy.

Schedule. :mod:`arena.stats.seating`: rounds of ``len(seats)`` games in which the
table's players rotate through every seat, under reset-option *layouts* that
fix the roles (``--layouts``, a YAML list of the game's options, cycled per
round; SpyRL: ``{spy: k}``). ``--games`` is rounded up to whole rounds. Game i
uses the held-out seed of :func:`arena.stats.heldout.held_out_seeds` (never a training
seed). Games are played by the batched runner, many at once, one generate call
per policy per tick.

Outcomes come from ``LLMGame.outcome()`` only; :mod:`arena.stats.ratings` turns them
into Bradley-Terry ratings with 95% bootstrap intervals (anchor ``--anchor``,
default the first player, = 1000), openskill ratings, payoff matrices (overall
and per role) and significant non-transitive cycles.

Exact (``--exact``; OpenSpiel games small enough to enumerate, e.g. Kuhn and Leduc poker). No
game is played: each player's policy is its exact action distribution at every information state
(arena/loop/exact.py: a model's normalised teacher-forced likelihood of each legal action at its
sampling temperature; a bot's own distribution), and for each pair (i, j) and each seat i can hold,
with j in every other seat, OpenSpiel's ``expected_game_score.policy_value`` sums the whole tree
(arena/exact/values.py ``head_to_head``). The payoff matrix is i's exact expected pairwise
result against j (1 win, 0.5 tie, 0 loss: what a sampled tournament's payoff matrix estimates) and the
Bradley-Terry ratings are fitted to it, with no interval (no sampling noise); beside it, i's exact
expected return (chips) against j. The JSON (``--json``, default ``<run_dir>/tournament_exact.json``)
holds ``payoff`` (results), ``returns`` and ``ratings``; the PNG both matrices.
``--games``, ``--layouts`` and ``--bootstrap`` do not apply and are refused. Another game, or one too
large to enumerate, is one line and exit 2.

Output: a table on the terminal, the JSON (``--json``, default
``<run_dir>/tournament.json``) with the schedule and every game's seed,
options, seating, roles and outcome (replayable and refittable), and a PNG
heatmap of the payoff matrices beside it. The JSON is rewritten atomically
after every batch of games; running the same command again resumes: finished
games are read back, never replayed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections import defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from arena.core.errors import ConfigError, OneLineParser
from arena.loop.checks import check_bots, check_models
from arena.loop.config import ArenaConfig, load_config
from arena.rank.flags import MAX_BOOTSTRAP, MAX_GAMES, check_tournament_flags
from arena.stats.heldout import held_out_seeds
from arena.policies.config import ModelPolicySpec, shorthand_policy
from arena.stats.ratings import (
    GameResult,
    bradley_terry,
    cycles,
    game_from_outcome,
    online_ratings,
    payoff_matrix,
    roles_of,
)
from arena.runner import EpisodeSpec, SeatMap
from arena.stats.seating import Table, schedule

FORMAT = "arena-tournament-v1"
SHOWN_ROUNDS = 12


# ------------------------------------------------------------------ players
def parse_players(cfg: ArenaConfig, items: Sequence[str]) -> dict[str, Any]:
    """``[LABEL=]SPEC`` strings -> label -> policy spec (see the module docstring)."""
    if len(items) < 2:
        raise ConfigError(f"--players: a tournament needs at least 2 players (got {len(items)})")
    out: dict[str, Any] = {}
    for item in items:
        label, sep, spec = item.partition("=")
        if not sep:
            label, spec = item, item
        if not label or not spec:
            raise ConfigError(f"--players: {item!r} is not [LABEL=]SPEC")
        if label in out:
            raise ConfigError(f"--players: {label!r} is named twice; give one a label (LABEL=SPEC)")
        out[label] = resolve_player(cfg, spec)
    return out


def _template(cfg: ArenaConfig) -> ModelPolicySpec:
    if cfg.trainable:
        return cfg.policies[cfg.trainable]
    models = [s for s in cfg.policies.values() if isinstance(s, ModelPolicySpec)]
    return models[0] if models else ModelPolicySpec()


def resolve_player(cfg: ArenaConfig, spec: str) -> Any:
    from arena.core.models import BUILTIN_MODELS

    if spec in cfg.policies:
        found = cfg.policies[spec]
        if isinstance(found, ModelPolicySpec) and found.trainable:  # played, never trained, here
            found = found.model_copy(update={"trainable": False, "frozen": True})
        return found
    short = shorthand_policy(spec)
    if short is not None:
        if short.kind == "human":
            raise ConfigError("--players: 'human' cannot play a batched tournament")
        return short
    path = Path(spec)
    if spec not in BUILTIN_MODELS and not path.exists() and (spec.startswith((".", "/", "~")) or
                                                             (len(path.parts) > 1 and Path(path.parts[0]).is_dir())):
        raise ConfigError(f"--players: {spec!r}: no such folder (a player is a policy of the config "
                          f"({', '.join(cfg.policies)}), scripted:<bot>, a built-in model "
                          f"({', '.join(BUILTIN_MODELS)}), a model/checkpoint/run folder or a hub id)")
    if spec not in BUILTIN_MODELS and not path.exists() and "/" not in spec:  # not org/name: a mistyped policy
        raise ConfigError(f"--players: {spec!r} is not a policy of the config ({', '.join(cfg.policies)}), "
                          f"scripted:<bot>, a built-in model ({', '.join(BUILTIN_MODELS)}), a model folder "
                          "or a hub id (org/name)")
    return _template(cfg).model_copy(update={"model": spec, "trainable": False, "frozen": True})


def player_config(cfg: ArenaConfig, players: Mapping[str, Any]) -> ArenaConfig:
    """The config whose policy table is exactly the players (labels as policy names)."""
    return cfg.model_copy(update={"policies": dict(players), "seats": {"*": next(iter(players))}})


def check_layouts(cfg: ArenaConfig, layouts: Sequence[Mapping[str, Any]]) -> dict[int, dict[str, str]]:
    """Reset a probe env with each layout (bad options fail here, in one line); warn when roles
    still depend on the seed, i.e. the layouts do not fix them. Returns layout -> seat -> role."""
    env = cfg.game.make_env()
    out = {}
    for k, layout in enumerate(layouts):
        seen = []
        for seed in (HELD_PROBE, HELD_PROBE + 1, HELD_PROBE + 2):
            try:
                type(env).validate_options(layout)  # strict here: reset itself only warns of unknown keys
                env.reset(seed=seed, options=dict(layout))
            except Exception as e:  # noqa: BLE001 - any refusal of the options is a config error
                raise ConfigError(f"--layouts: {dict(layout)} is not valid for {cfg.game.name}: {e}".replace("\n", " ")) from None
            seen.append({s: env.role(s) for s in env.possible_agents})
        if any(r != seen[0] for r in seen[1:]):
            print(f"warning: with layout {dict(layout)} the roles of {cfg.game.name} change with the seed, so roles are "
                  "not balanced; fix them with --layouts (reset options, e.g. SpyRL: \"[{spy: 0}, {spy: 1}]\")",
                  file=sys.stderr)
        out[k] = seen[0]
    return out


HELD_PROBE = 2**41


# ------------------------------------------------------------------ results
def game_record(table: Table, seed: int, ep: Any) -> dict[str, Any]:
    return {
        **table.to_json(), "seed": seed, "episode_id": ep.episode_id, "roles": dict(ep.roles),
        "outcome": {s: o.model_dump() for s, o in ep.outcome.items()}, "truncated": ep.truncated,
        "metrics": dict(ep.metrics),
    }


def results_as_games(records: Sequence[Mapping[str, Any]]) -> list[GameResult]:
    return [game_from_outcome(r["seating"], r["roles"], r["outcome"]) for r in records]


def summarise(records: Sequence[Mapping[str, Any]], players: Sequence[str], anchor: str, seed: int = 0,
              rounds: int = 1000) -> dict[str, Any]:
    """Ratings, payoffs and cycles of the finished games (all from ``outcome()`` ranks)."""
    games = results_as_games(records)
    players = list(players)
    bt = bradley_terry(games, players, anchor=anchor, rounds=rounds, seed=seed)
    roles = roles_of(games)
    per_role_score: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for g in games:
        for s in g.seats:
            per_role_score[s.player][s.role].append(s.score)
    overall = payoff_matrix(games, players)

    def clean(m: np.ndarray) -> list[list[float | None]]:
        return [[None if math.isnan(v) else round(float(v), 6) for v in row] for row in m]

    return {
        "games": len(games),
        "bradley_terry": bt.to_json(),
        "openskill": online_ratings(games, players),
        "payoff": {"overall": clean(overall), **{r: clean(payoff_matrix(games, players, role=r)) for r in roles}},
        "mean_score_by_role": {p: {r: float(np.mean(v)) for r, v in per_role_score[p].items()} for p in players},
        "cycles": cycles(games, players),
    }


def print_table(summary: Mapping[str, Any], players: Sequence[str]) -> None:
    bt, os_ = summary["bradley_terry"], summary["openskill"]
    overall = summary["payoff"]["overall"]
    roles = sorted({r for p in players for r in summary["mean_score_by_role"].get(p, {})})
    head = f"{'player':<24} {'BT rating':>9} {'95% interval':>17} {'openskill mu±sigma':>19} {'win rate':>8} {'games':>5}"
    print(head + "".join(f" {('score/' + r)[:14]:>14}" for r in roles))
    order = sorted(range(len(players)), key=lambda k: -bt[players[k]]["rating"])
    for k in order:
        p = players[k]
        row = [v for j, v in enumerate(overall[k]) if j != k and v is not None]
        win = f"{np.mean(row):.3f}" if row else "-"
        line = (f"{p[:24]:<24} {bt[p]['rating']:>9.1f} [{bt[p]['low']:>7.1f}, {bt[p]['high']:>7.1f}] "
                f"{os_[p]['mu']:>10.2f}±{os_[p]['sigma']:<8.2f} {win:>8} {bt[p]['games']:>5}")
        scores = summary["mean_score_by_role"].get(p, {})
        print(line + "".join(f" {scores[r]:>14.3f}" if r in scores else f" {'-':>14}" for r in roles))
    print(f"anchor: {bt['_anchor']} = 1000 (Elo scale); win rate = mean pairwise result against the others")
    print("payoff (row's mean result against column):")
    print(" " * 16 + "".join(f"{p[:10]:>11}" for p in players))
    for k, p in enumerate(players):
        print(f"{p[:16]:<16}" + "".join(f"{'-' if v is None else f'{v:.2f}':>11}" for v in overall[k]))
    found = summary["cycles"]
    print("non-transitive cycles (significant at 5%): " + ("; ".join(" > ".join(c + c[:1]) for c in found) or "none"))


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


# ------------------------------------------------------------------ the CLI
def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m arena.tournament", description=__doc__.split("\n")[0])
    p.add_argument("config", help="YAML config (e.g. games/spy/spy.yaml) or a registered game name")
    p.add_argument("--players", nargs="+", required=True, metavar="[LABEL=]SPEC", help="at least two players")
    p.add_argument("--games", type=int, default=None, help="games to play (rounded up to whole rounds; default 4 "
                   f"rounds; at most {MAX_GAMES})")
    p.add_argument("--seed", type=int, default=0, help="seeds the schedule and picks the block of held-out game "
                   "seeds (>= 0)")
    p.add_argument("--layouts", default=None, help="YAML list of reset options fixing the roles, cycled per round")
    p.add_argument("--anchor", default=None, help="player rated 1000 (default: the first)")
    p.add_argument("--json", type=Path, default=None, help="results file, resumed if present (default <run_dir>/tournament.json)")
    p.add_argument("--png", type=Path, default=None, help="payoff heatmap (default: beside the JSON)")
    p.add_argument("--bootstrap", type=int, default=None, help="bootstrap resamples for the intervals (default 1000, "
                   f"at most {MAX_BOOTSTRAP})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--exact", action="store_true", help="exact expected payoffs from the policies' action "
                   "probabilities, no games played (OpenSpiel games small enough to enumerate)")
    return p


def parse_layouts(text: str | None) -> list[dict[str, Any]]:
    if text is None:
        return [{}]
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = None
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list) or not value or not all(isinstance(v, dict) for v in value):
        raise ConfigError(f"--layouts: expected a YAML list of option mappings, e.g. \"[{{spy: 0}}, {{spy: 1}}]\" (got {text!r})")
    return value


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_tournament_flags(args)
    cfg = load_config(args.config, args.overrides)
    players = parse_players(cfg, args.players)
    check_bots(player_config(cfg, players), "--players")  # before the schedule prints
    check_models(player_config(cfg, players), "--players")
    labels = list(players)
    anchor = args.anchor or labels[0]
    if anchor not in players:
        raise ConfigError(f"--anchor: {anchor!r} is not a player ({', '.join(labels)})")
    if args.exact:
        return exact_tournament(cfg, players, anchor, args)
    layouts = parse_layouts(args.layouts)
    seats = cfg.game.make_env().possible_agents
    rounds = math.ceil((args.games or 4 * len(seats)) / len(seats))
    check_layouts(cfg, layouts)
    tables = schedule(labels, seats, rounds, seed=args.seed, layouts=layouts)
    seeds = held_out_seeds(args.seed, len(tables))
    json_path = args.json or Path(cfg.run_dir) / "tournament.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "format": FORMAT, "game": cfg.game.name, "config": str(args.config), "overrides": args.overrides,
        "players": labels, "player_specs": dict(zip(labels, args.players, strict=True)), "anchor": anchor, "seed": args.seed,
        "layouts": layouts, "schedule": [t.to_json() | {"seed": s} for t, s in zip(tables, seeds, strict=True)],
    }
    done: dict[int, dict[str, Any]] = {}
    if json_path.exists():
        old = read_old_results(json_path)
        if any(old.get(k) != header[k] for k in ("format", "game", "players", "player_specs", "seed", "layouts", "schedule")):
            raise ConfigError(f"--json: {json_path} holds a different tournament (players, seed, games or layouts "
                              "differ); give another --json or remove it")
        done = {r["index"]: r for r in old.get("results", [])}
        print(f"resuming {json_path}: {len(done)} of {len(tables)} games already played")
    print(f"{cfg.game.name}: {len(labels)} players, {rounds} rounds x {len(seats)} seats = {len(tables)} games, seed {args.seed}")
    print("schedule (round: seat -> player, options):")
    firsts = tables[:: len(seats)]
    for t in firsts[:SHOWN_ROUNDS]:
        print(f"  {t.round:>3}: {', '.join(f'{s}={p}' for s, p in t.seating.items())}  {dict(t.options) or ''}"
              f"(then rotated through the seats)")
    if len(firsts) > SHOWN_ROUNDS:
        print(f"  ... {len(firsts) - SHOWN_ROUNDS} more rounds in {json_path}")

    todo = [t for t in tables if t.index not in done]
    if todo:
        play(cfg, players, todo, seeds, done, header, json_path)
    records = [done[t.index] for t in tables]
    summary = summarise(records, labels, anchor, seed=args.seed, rounds=args.bootstrap)
    ratings = {p: v for p, v in summary["bradley_terry"].items() if p != "_anchor"}  # top level: what arena.view shows
    write_json(json_path, header | {"ratings": ratings, "payoff": summary["payoff"]["overall"], "cycles": summary["cycles"],
                                    "results": records, "summary": summary})
    print_table(summary, labels)
    from arena.loop.plot import plot_payoff

    png = plot_payoff(labels, summary["payoff"], args.png or json_path.with_suffix(".png"), title=f"{cfg.game.name}: {len(records)} games")
    print(f"results: {json_path}\nheatmap: {png}")
    return 0


def read_old_results(json_path: Path) -> dict[str, Any]:
    """The tournament already in ``--json`` (to resume), or a one-line ConfigError when it is not one."""
    try:
        old = json.loads(json_path.read_text(encoding="utf-8"))
    except IsADirectoryError:
        raise ConfigError(f"--json: {json_path} is a directory; give a file name") from None
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise ConfigError(f"--json: {json_path} is not a readable tournament JSON file ({type(e).__name__}); "
                          "give another --json or remove it") from None
    if not isinstance(old, dict) or not isinstance(old.get("results", []), list):
        raise ConfigError(f"--json: {json_path} is not a tournament JSON file; give another --json or remove it")
    return old


class Progress:
    """The tournament's progress line: games done of all, and below a game, turns played and generate calls
    made (a slow model shows it is moving long before a whole batch of games is done)."""

    def __init__(self, total: int, done: int, enabled: bool) -> None:
        from tqdm.auto import tqdm

        self.turns = self.calls = 0
        self.bar = tqdm(total=total, initial=done, desc="tournament", unit="game", disable=not enabled)
        self.bar.set_postfix_str("0 turns, 0 generate calls", refresh=False)

    def generated(self, turns: int) -> None:
        """One generate call answered ``turns`` turns (the runner's ``on_generate``)."""
        self.turns += turns
        self.calls += 1
        self.bar.set_postfix_str(f"{self.turns} turns, {self.calls} generate calls")

    def games(self, n: int) -> None:
        self.bar.update(n)

    def close(self) -> None:
        self.bar.close()


def play(cfg: ArenaConfig, players: Mapping[str, Any], todo: Sequence[Table], seeds: Sequence[int],
         done: dict[int, dict[str, Any]], header: Mapping[str, Any], json_path: Path) -> None:
    """Play the tables not yet done through the batched runner, saving after each batch."""
    from arena.loop.build import build_policies, build_runner

    pcfg = player_config(cfg, players)
    for label, spec in players.items():  # loading a model takes minutes on CPU: say so first
        if isinstance(spec, ModelPolicySpec):
            print(f"loading model {spec.model} for player {label!r} ...", file=sys.stderr, flush=True)
    policies = build_policies(pcfg, names=list(players), played_only=True)
    runner = build_runner(pcfg, policies, state=cfg.game.make_env().make_state(), progress=False)
    progress = Progress(len(todo) + len(done), len(done), cfg.runner.progress)
    runner.on_generate = progress.generated
    chunk = max(1, 4 * len(runner.envs))
    for start in range(0, len(todo), chunk):
        part = todo[start:start + chunk]
        specs = [EpisodeSpec(seed=seeds[t.index], options=dict(t.options), seats=SeatMap(dict(t.seating))) for t in part]
        for table, ep in zip(part, runner.play(specs), strict=True):
            done[table.index] = game_record(table, seeds[table.index], ep)
        write_json(json_path, dict(header) | {"results": [done[k] for k in sorted(done)]})
        progress.games(len(part))
    progress.close()



# ------------------------------------------------------------------ exact (no games played)
def exact_fit(results: np.ndarray, players: Sequence[str], anchor: str) -> dict[str, float]:
    """Bradley-Terry ratings (Elo scale, ``anchor`` = 1000) fitted to exact expected pairwise results
    ``results[i, j]`` (i's expected score against j, as fractional wins; NaN on the diagonal)."""
    from arena.stats.ratings import ELO_BASE, ELO_SCALE, _fit_theta

    wins = np.nan_to_num(np.asarray(results, dtype=float), nan=0.0)
    theta = _fit_theta(wins, list(players).index(anchor), ridge=1e-6)
    return {p: ELO_BASE + float(t) * ELO_SCALE for p, t in zip(players, theta, strict=True)}


def exact_policies(cfg: ArenaConfig, players: Mapping[str, Any]) -> tuple[Any, list[Any]]:
    """The game's tree (an ``arena.exact.ExactGame``'s) and one ``TabularPolicy`` per player; one ConfigError
    line for a game that cannot be enumerated or a player without exact action probabilities."""
    from arena.exact.tree import ExactGame, TooLarge, count_info_states, tabular_policy
    from arena.loop.build import build_policies, sampling_table
    from arena.loop.exact import policies_action_probs

    env = cfg.game.make_env()
    if not isinstance(env, ExactGame):
        raise ConfigError(f"--exact: exact head-to-head values are for games small enough to enumerate (an "
                          f"arena.exact.ExactGame: game.name: openspiel, e.g. kuhn_poker, leduc_poker); "
                          f"{cfg.game.name!r} is not one")
    tree = env.exact_tree()
    try:
        count_info_states(tree.game, tree.max_states)
    except TooLarge as e:
        raise ConfigError(f"--exact: {' '.join(str(e).split())}") from None
    pcfg = player_config(cfg, players)
    policies = build_policies(pcfg, names=list(players), played_only=True)
    sampling = sampling_table(pcfg)
    phase = cfg.game.cls.phases[0] if cfg.game.cls.phases else ""
    tables = []
    for label in players:
        try:
            tables.append(tabular_policy(tree, policies_action_probs(policies, lambda _seat, lab=label: lab,
                                                                     sampling, phase)))
        except ValueError as e:
            raise ConfigError(f"--players: {label}: {' '.join(str(e).split())}") from None
    return tree.game, tables


def exact_tournament(cfg: ArenaConfig, players: Mapping[str, Any], anchor: str, args: argparse.Namespace) -> int:
    """``--exact``: the exact payoff matrices and the ratings fitted to them (see the module docstring)."""
    from arena.exact.values import head_to_head

    labels = list(players)
    game, tables = exact_policies(cfg, players)
    returns, results = head_to_head(game, tables)
    ratings = exact_fit(results, labels, anchor)

    def clean(m: np.ndarray) -> list[list[float | None]]:
        return [[None if math.isnan(v) else float(v) for v in row] for row in m]

    print(f"{cfg.game.name} ({game}): exact head-to-head of {len(labels)} players, no games sampled")
    print(f"{'player':<24} {'BT rating':>9} {'mean return':>12} {'mean result':>12}")
    for k in sorted(range(len(labels)), key=lambda k: -ratings[labels[k]]):
        others = [j for j in range(len(labels)) if j != k]
        print(f"{labels[k][:24]:<24} {ratings[labels[k]]:>9.1f} {np.mean(returns[k, others]):>12.4f} "
              f"{np.mean(results[k, others]):>12.4f}")
    print(f"anchor: {anchor} = 1000 (Elo scale), fitted to the exact expected results (win 1, tie 0.5)")
    for title, matrix in (("payoff (row's exact expected result against column: win 1, tie 0.5)", results),
                          ("returns (row's exact expected return against column)", returns)):
        print(title + ":")
        print(" " * 16 + "".join(f"{p[:10]:>11}" for p in labels))
        for k, p in enumerate(labels):
            print(f"{p[:16]:<16}" + "".join(f"{'-' if math.isnan(v) else f'{v:.4f}':>11}" for v in matrix[k]))
    json_path = args.json or Path(cfg.run_dir) / "tournament_exact.json"
    json_path.parent.mkdir(parents=True, exist_ok=True)
    write_json(json_path, {"format": FORMAT, "exact": True, "game": cfg.game.name, "openspiel_game": str(game),
                           "config": str(args.config), "overrides": args.overrides, "players": labels,
                           "player_specs": dict(zip(labels, args.players, strict=True)), "anchor": anchor,
                           "ratings": {p: {"rating": r, "low": r, "high": r} for p, r in ratings.items()},
                           "payoff": clean(results), "returns": clean(returns)})
    from arena.loop.plot import plot_payoff

    png = plot_payoff(labels, {"overall": clean(results), "returns": clean(returns)},
                      args.png or json_path.with_suffix(".png"), title=f"{cfg.game.name}: exact expected values")
    print(f"results: {json_path}\nheatmap: {png}")
    return 0
