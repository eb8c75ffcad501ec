"""``python -m arena.play CONFIG``: play games and print readable transcripts.

    python -m arena.play games/spy/spy.yaml                      # the built-in model plays every seat
    python -m arena.play games/spy/spy.yaml --human player_0     # you take seat player_0
    python -m arena.play games/spy/spy.yaml --policy scripted --seed 1
    python -m arena.play games/spy/spy.yaml --policy scripted --bot fixed_vote:2 --episodes 3
    python -m arena.play wwlite --policy scripted                # a game a package registers (arena.games entry point)
"""

from __future__ import annotations

import argparse
import sys

from arena.cli import load_cli_config, run_cli
from arena.core.errors import ConfigError, OneLineParser, RunStopped, check_output_file, check_range
from arena.core.transcript import format_episode
from arena.core.types import write_jsonl


#: The most games one command plays: every episode is held in memory and printed.
MAX_EPISODES = 100_000


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m arena.play", description=__doc__.split("\n")[0])
    p.add_argument("config", help="YAML config (e.g. games/spy/spy.yaml), a registered game name (spy, or one a "
                   "package registers under the arena.games entry points) or module:Class")
    p.add_argument(
        "--policy", choices=["model", "scripted"], default="model",
        help="model: the config's seat map (default: the model plays every seat); scripted: bots everywhere",
    )
    p.add_argument("--bot", default=None, help="scripted bot name (default: the config's play.bot)")
    p.add_argument("--human", action="append", default=[], metavar="SEAT", help="seat a person (repeatable)")
    p.add_argument("--seed", type=int, default=None, help="seed of the first game (>= 0)")
    p.add_argument("--episodes", type=int, default=None, help=f"number of games (1 to {MAX_EPISODES})")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--jsonl", default=None, help="append the episodes to this JSONL file")
    p.add_argument("--full", action="store_true", help="do not shorten long prompts and outputs")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_output_file("--jsonl", args.jsonl)
    check_range("--seed", args.seed, 0)
    check_range("--episodes", args.episodes, 1, MAX_EPISODES, "run the command again with another --seed for more")
    overrides = list(args.overrides)
    cfg = load_cli_config(args.config, overrides)
    check_humans(args.human, cfg.game.make_env().possible_agents)
    seats = {seat: "human" for seat in args.human}
    if args.policy == "scripted":
        seats["*"] = f"scripted:{args.bot or cfg.play.bot}"
    else:
        seats.update(cfg.seat_table())
    cfg = cfg.model_copy(update={"seats": seats})
    from arena.loop.build import build_policies, build_runner

    seed = cfg.play.seed if args.seed is None else args.seed
    episodes = cfg.play.episodes if args.episodes is None else args.episodes
    for name in dict.fromkeys(seats.values()):  # loading a model takes minutes on CPU: say so first
        model = getattr(cfg.policy_spec(name), "model", None)
        if model is not None:
            print(f"loading model {model} for policy {name!r} (minutes on CPU the first time) ...", file=sys.stderr, flush=True)
    policies = build_policies(cfg, names=dict.fromkeys(seats.values()))
    print(f"playing {episodes} game(s) of {cfg.game.name} from seed {seed} ...", file=sys.stderr, flush=True)
    runner = build_runner(
        cfg, policies, state=cfg.game.make_env().make_state(),
        num_envs=1 if args.human else min(episodes, cfg.runner.num_envs),
        progress=cfg.runner.progress and not args.human,
    )
    results = runner.play([seed + i for i in range(episodes)])
    for ep in results:
        print(format_episode(ep, None if args.full else 600))
        print()
    if args.jsonl or cfg.runner.episodes_jsonl:
        path = args.jsonl or cfg.runner.episodes_jsonl
        try:
            write_jsonl(results, path)
        except OSError as e:  # a disk that filled while the games ran: the transcripts above are all there is
            raise RunStopped(f"--jsonl: could not write the episodes to {path} ({e.strerror or e})") from None
    return 0


def check_humans(humans: list[str], seats: list[str]) -> None:
    """Each ``--human`` names a seat of the game (a seat it lacks would seat nobody and play on)."""
    for seat in humans:
        if seat not in seats:
            raise ConfigError(f"--human: the game has no seat {seat!r}; its seats are {', '.join(seats)}")


if __name__ == "__main__":
    run_cli(main)
