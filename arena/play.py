"""``python -m arena.play CONFIG``: play games and print readable transcripts.

    python -m arena.play games/spy.yaml --policy scripted --seed 1
    python -m arena.play games/spy.yaml --policy scripted --bot fixed_vote:2 --episodes 3
"""

from __future__ import annotations

import argparse

from arena.cli import run_cli
from arena.config import ConfigError, load_config
from arena.runner import Runner, SeatMap
from arena.transcript import format_episode
from arena.types import write_jsonl


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m arena.play", description=__doc__.split("\n")[0])
    p.add_argument("config", help="YAML config, e.g. games/spy.yaml")
    p.add_argument("--policy", choices=["scripted"], default="scripted", help="who plays every seat")
    p.add_argument("--bot", default=None, help="scripted bot name (default: the config's play.bot)")
    p.add_argument("--seed", type=int, default=None, help="seed of the first game")
    p.add_argument("--episodes", type=int, default=None, help="number of games")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--jsonl", default=None, help="append the episodes to this JSONL file")
    p.add_argument("--full", action="store_true", help="do not shorten long prompts and outputs")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    from arena.registry import game_class
    from policies.scripted import ScriptedPolicy, make_bot

    game_cls = game_class(cfg.game.name)
    bot_name = args.bot or cfg.play.bot
    try:
        bot = make_bot(game_cls, bot_name)
    except ValueError as e:
        raise ConfigError(f"--bot: {e}") from None
    seed = cfg.play.seed if args.seed is None else args.seed
    episodes = cfg.play.episodes if args.episodes is None else args.episodes
    runner = Runner(
        cfg.game.make_env,
        {"scripted": ScriptedPolicy(bot, name=f"scripted:{bot_name}")},
        SeatMap({"*": "scripted"}),
        num_envs=min(episodes, 8),
    )
    results = runner.play([seed + i for i in range(episodes)])
    for ep in results:
        print(format_episode(ep, None if args.full else 600))
        print()
    if args.jsonl:
        write_jsonl(results, args.jsonl)
    return 0


if __name__ == "__main__":
    run_cli(main)
