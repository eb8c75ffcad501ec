"""``python -m arena.train CONFIG``: self-play training from one YAML file.

    python -m arena.train games/spy/spy.yaml
    python -m arena.train spy                                         # a game's own YAML, by name
    python -m arena.train games/spy.yaml                              # the same (games/<name>.yaml)
    python -m arena.train games/spy/spy.yaml --set learner.lr=3e-6 --max-steps 5
    python -m arena.train games/spy/spy.yaml --resume runs/spy       # newest checkpoint of a run
    python -m arena.train games/spy/spy.yaml --ranks 2               # 2 ranks on this machine (torchrun inside)
    torchrun --nproc_per_node 2 -m arena.train games/spy/spy.yaml     # the same (arena/core/distributed.py)
    deepspeed --num_gpus 2 --module arena.train games/spy/spy.yaml    # the same, with DeepSpeed's launcher

The whole config (``--set`` overrides included) is validated before any model
loads; a mistake exits with code 2 and one line naming the field (with ``--ranks N``, once, before any
rank starts; a rank that fails later is one line too, where torchrun itself adds its own report). A policy server
(``backend: openai``) that stops answering mid-run, after its retries, exits with
code 1 and one line: the server's URL, the newest checkpoint, and the command to
continue once the server is back (the unfinished step is not saved).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from arena.cli import RANK_ERRORS, run_cli
from arena.core.errors import ConfigError, OneLineParser, RunStopped, check_range
from arena.loop.config import ArenaConfig, load_config
from arena.loop.components.evals import check_exact_evals


#: The most ranks ``--ranks`` starts on one machine.
MAX_RANKS = 64


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m arena.train", description=__doc__.split("\n")[0])
    p.add_argument("config", help="YAML config (e.g. games/spy/spy.yaml) or a registered game name (spy)")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help="override a key")
    p.add_argument("--max-steps", type=int, default=None,
                   help="stop after this step (default: train.steps; 0 with train.warm_start: the warm start alone)")
    p.add_argument("--resume", type=Path, default=None, help="run folder or checkpoint folder to continue from")
    p.add_argument("--run-dir", type=Path, default=None, help="output folder (default: train.run_dir)")
    p.add_argument("--ranks", type=int, default=None, metavar="N", help=f"train on N ranks on this machine (1 to "
                   f"{MAX_RANKS}; torchrun --standalone --nproc-per-node N): the config is checked once, before "
                   "any rank starts, and a failed rank is one line")
    # The deepspeed launcher passes --local_rank=N; the rank is read from LOCAL_RANK (arena/core/distributed.py).
    p.add_argument("--local_rank", "--local-rank", type=int, default=None, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    from arena.core.memory import cap_onednn_cache

    cap_onednn_cache()  # before any oneDNN primitive is made (#54: a step's new shapes no longer pile up)
    args = build_parser().parse_args(argv)
    check_range("--ranks", args.ranks, 1, MAX_RANKS)
    cfg = load_config(args.config, args.overrides)
    check_exact_evals(cfg, str(args.config))  # a game too large to enumerate: one line before any model loads
    least = 0 if cfg.train.warm_start is not None else 1  # 0: the warm start alone
    if args.max_steps is not None and args.max_steps < least:
        raise ConfigError(f"--max-steps: must be >= {least} (got {args.max_steps})")
    run_dir = args.run_dir or (args.resume if args.resume and (args.resume / "metrics.jsonl").exists() else None)
    run_dir = Path(run_dir or cfg.run_dir)
    if args.resume is not None and not args.resume.exists():
        raise ConfigError(f"--resume: {args.resume} does not exist")
    from arena.core import distributed

    dist = distributed.from_env()
    if args.ranks is not None and not dist.active and RANK_ERRORS not in os.environ:  # the launcher (not a rank)
        if args.ranks > 1:
            check_ranks(cfg, args.ranks)
        from arena.cli import launch_ranks

        return launch_ranks("arena.train", args.ranks, without_option(sys.argv[1:] if argv is None else argv, "--ranks"))
    if dist.active:
        check_ranks(cfg, dist.world)
    from arena.loop.plan import precision_report, resolve
    from arena.loop.trainer import Trainer, seed_everything

    plan = resolve(cfg, run_dir, args.resume, dist)  # the run's own checks, one line, before anything is printed
    if dist.main:
        print(precision_report(cfg), flush=True)
    if cfg.train.async_ is None or not cfg.train.async_.max_staleness:  # async: its pipeline says its own split
        from arena.policies.hardware import set_torch_threads

        ranks = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))  # torchrun's ranks on this machine
        set_torch_threads(jobs=ranks, what=f"arena.train, {ranks} rank{'s' if ranks > 1 else ''} here, "
                          "rollouts and updates taking turns")
    from arena.core.memory import keep_mmap_threshold

    keep_mmap_threshold()  # freed tensors go back to the system, not to malloc's heaps (#54)
    distributed.init(dist, cfg.learner.device)
    seed_everything(cfg.train.seed)
    from arena.policies.openai import ServerError

    try:
        trainer = Trainer(cfg, run_dir, resume=args.resume, dist=dist, plan=plan)
        rows = trainer.run(args.max_steps)
    except ServerError as e:
        raise RunStopped(server_lost(e, run_dir)) from None
    distributed.finish(dist)
    if not dist.main:
        return 0
    if cfg.train.plot and (run_dir / "metrics.jsonl").is_file():  # --max-steps 0 (a warm start alone) logs no step
        from arena.loop.plot import plot_run

        png = plot_run(run_dir)
        print(f"plot: {png}")
    if rows:
        last = rows[-1]
        keys = ("step", *(f"game/{k}" for k in cfg.game.cls.headline_metrics), "kl", "logprob_gap")
        shown = {k: last[k] for k in keys if k in last}
        print("last step:", ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in shown.items()))
    print(f"run folder: {run_dir} (metrics.jsonl, tensorboard/, checkpoints/)")
    return 0


def without_option(argv: list[str], flag: str) -> list[str]:
    """``argv`` without ``flag VALUE`` or ``flag=VALUE``."""
    out, skip = [], False
    for item in argv:
        if skip:
            skip = False
        elif item == flag:
            skip = True
        elif not item.startswith(flag + "="):
            out.append(item)
    return out


def server_lost(err: Exception, run_dir: Path) -> str:
    """The one line for a policy server that failed mid-run: what failed, what was kept, how to go on."""
    from arena.loop.checkpoint import find_checkpoint

    what = " ".join(str(err).split())  # a server's reply quoted in it may hold line breaks
    try:
        newest = find_checkpoint(run_dir).name
    except FileNotFoundError:
        return f"{what} No checkpoint yet: once the server answers again, run the same command again."
    return (f"{what} The unfinished step was not saved; the newest checkpoint is {newest}. Once the server "
            f"answers again, run the same command with --resume {run_dir}")


def check_ranks(cfg: ArenaConfig, world: int) -> None:
    """What several ranks (WORLD_SIZE > 1) need of the config; one-line errors."""
    n = cfg.train.games_per_step
    if n % world:
        raise ConfigError(f"train.games_per_step: {n} games do not split over WORLD_SIZE={world} ranks; "
                          f"use a multiple of {world}")
    if cfg.train.league.enabled:
        raise ConfigError("train.league.enabled: the league runs in one process only; set it false "
                          "or launch one rank")
    if cfg.train.async_ is not None and cfg.train.async_.max_staleness:
        raise ConfigError("train.async: async rollouts run on one rank for now; remove train.async or launch one rank")
    if cfg.learner.backend == "deepspeed" and cfg.learner.deepspeed.zero_stage == 3:
        raise ConfigError("learner.deepspeed.zero_stage: 3 is not supported with several ranks yet (each rank's "
                          "forward passes would have to match in number); use 1 or 2")


if __name__ == "__main__":
    run_cli(main)
