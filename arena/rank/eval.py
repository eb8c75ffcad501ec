"""``python -m arena.eval CONFIG``: a game's metrics on held-out seeds, with 95% bootstrap intervals.

    python -m arena.eval games/spy/spy.yaml --games 64                         # the config's seats
    python -m arena.eval spy --set policies.learner.model=runs/spy --games 64  # a trained checkpoint
    python -m arena.eval examples/sealed_bid.yaml --set "seats={'*': 'scripted:shrewd'}" --games 50
    python -m arena.eval pairwise games/lsp/lsp.yaml --base judge --judge judge   # win rate vs a base (arena/rank/pairwise.py)
    python -m arena.eval exploitability games/openspiel/kuhn.yaml   # exact exploitability (arena/rank/exploitability.py)

Seats play the policies the config (with ``--set``) maps them to, so a
checkpoint, the base model, a bot or a server is evaluated the same way.
Games use HELD-OUT seeds, ``2**40 + seed * 1_000_003 + i``, a range training
never reaches (its seeds are ``train.seed * 1_000_003 + step * games + i``).
Every game metric, the mean reward and outcome score per role, the invalid-turn
and truncation rates are reported as a mean with a 95% percentile-bootstrap
interval over games (seeded resampling), printed and optionally written as JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from arena.core.errors import ConfigError, OneLineParser, RunStopped, check_output_file, check_range
from arena.core.types import write_jsonl
from arena.loop.config import load_config
from arena.stats.heldout import held_out_seeds, summarise


#: The most games one evaluation plays: every episode is held in memory for the intervals.
MAX_GAMES = 100_000


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m arena.eval", description=__doc__.split("\n")[0])
    p.add_argument("config", help="YAML config (e.g. games/spy/spy.yaml) or a registered game name")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--games", type=int, default=64, help=f"held-out games to play (2 to {MAX_GAMES}; default 64)")
    p.add_argument("--seed", type=int, default=0, help="which block of held-out seeds (>= 0; default 0)")
    p.add_argument("--json", type=Path, default=None, help="write the summary (and the seeds) here")
    p.add_argument("--episodes", type=Path, default=None, help="append the games to this JSONL file (gzip if it ends in .gz)")
    p.add_argument("--compare-set", dest="compare", action="append", default=[], metavar="KEY=VALUE",
                   help="paired comparison: arm B is the config plus these overrides, on the same seeds (arena/rank/compare.py)")
    return p


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["pairwise"]:  # win rate against a base on held-out instructions: arena/rank/pairwise.py
        from arena.rank.pairwise import main as pairwise_main

        return pairwise_main(argv[1:])
    if argv[:1] == ["exploitability"]:  # exact exploitability of the seats' policies: arena/rank/exploitability.py
        from arena.rank.exploitability import main as exploitability_main

        return exploitability_main(argv[1:])
    args = build_parser().parse_args(argv)
    check_output_file("--json", args.json)
    check_output_file("--episodes", args.episodes)
    if args.games < 2:
        raise ConfigError(f"--games: at least 2 games make an interval (got {args.games})")
    check_range("--games", args.games, 2, MAX_GAMES, "evaluate in blocks of held-out seeds (--seed 0, 1, ...)")
    check_range("--seed", args.seed, 0)
    cfg = load_config(args.config, args.overrides)
    cfg_b = load_config(args.config, args.overrides + args.compare) if args.compare else None
    from arena.loop.build import build_policies, build_runner

    names = dict.fromkeys(cfg.seat_table().values())
    policies = build_policies(cfg, names=names, played_only=True)
    runner = build_runner(cfg, policies, state=cfg.game.make_env().make_state())
    seeds = held_out_seeds(args.seed, args.games)
    episodes = runner.play(seeds)
    summary = summarise(episodes, seed=args.seed)
    print(f"{cfg.game.name}: {args.games} held-out games, seats {cfg.seat_table()}")
    print(f"{'metric':<32} {'mean':>9} {'95% interval':>22}")
    for key, s in summary.items():
        print(f"{key:<32} {s['mean']:>9.4f}   [{s['low']:>8.4f}, {s['high']:>8.4f}]")
    from arena.rank.compare import paired_summary, play_held_out, print_paired, print_ratios, ratio_summary

    extra: dict = {"ratios": ratio_summary(cfg.game.cls, cfg.game.settings, episodes, seed=args.seed)}
    print_ratios(extra["ratios"])
    if cfg_b is not None:
        del policies, runner  # arm A's models are not needed while B plays
        extra["paired"] = paired_summary(episodes, play_held_out(cfg_b, seeds), cfg.game.cls, seed=args.seed)
        extra["compare_set"] = args.compare
        print_paired(extra["paired"], " ".join(args.overrides) or "the config", " ".join(args.compare))
    try:  # a disk that filled while the games ran: the table above is all there is
        if args.json:
            args.json.write_text(json.dumps({"seats": cfg.seat_table(), "seeds": seeds, "metrics": summary} | extra, indent=2))
        if args.episodes:
            write_jsonl(episodes, args.episodes)
    except OSError as e:
        raise RunStopped(f"could not write {e.filename or 'the results'} ({e.strerror or e})") from None
    return 0

