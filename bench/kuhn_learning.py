"""Self-play on Kuhn poker: exact exploitability of the built-in model, RAE against plain GRPO, per seed.

    .venv/bin/python bench/kuhn_learning.py                         # 3 seeds x (RAE, GRPO), 8 steps each
    .venv/bin/python bench/kuhn_learning.py --seeds 0 1 --steps 12 --parallel 1 --set learner.lr=1e-4
    .venv/bin/python bench/kuhn_learning.py --report runs/kuhn_bench  # the table and plot of finished runs
    .venv/bin/python bench/kuhn_learning.py --report runs/kuhn_bench --played 20  # first sample the played policies

Each arm is ``python -m arena.train games/openspiel/kuhn.yaml`` (RAE), ``kuhn.grpo.yaml`` (GRPO),
``kuhn.players.yaml`` (RAE, one trainable policy per player), ``kuhn.score.yaml`` (RAE, moves drawn
from the scored policy: the exact number is the played policy's), ``kuhn.hidden.yaml`` (score mode with a
per-observation baseline, an entropy bonus on the choice and a magnet: the hidden-information switches),
``kuhn.br.yaml`` (score mode against the
exact best response) or ``kuhn.ed.yaml`` (exploitability descent over the whole tree, no games) with ``train.seed=N`` and the same budget; the exploitability eval (``kind: exact``: the model's
teacher-forced action probabilities at the sampling temperature, OpenSpiel's exact best
response) runs at step 0 (the base model), every ``--every`` steps and at the end. Prints a
markdown table (exploitability per step, final minus base, the played policy's exploitability by
the exact-text formula, the last step's invalid-turn rate), the per-seed ends (the played policy
sampled where ``--played N`` ran), each arm's mean with a bootstrap interval over seeds and its
collapse rate (exploitability >= 0.9 or invalid replies >= 0.9 at the end), the difference of
means between arms with paired and unpaired bootstrap intervals, and writes ``exploitability.png``.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from arena.core.errors import ConfigError, OneLineParser, RunStopped, check_range

ROOT = Path(__file__).resolve().parents[1]
ARMS = {"RAE": "games/openspiel/kuhn.yaml", "GRPO": "games/openspiel/kuhn.grpo.yaml",
        "players": "games/openspiel/kuhn.players.yaml",  # one trainable policy per player (issue #36)
        "score": "games/openspiel/kuhn.score.yaml",  # action_mode score: the scored policy is the played one
        "br": "games/openspiel/kuhn.br.yaml",  # score mode against the exact best response to the current policy
        "ed": "games/openspiel/kuhn.ed.yaml",  # exploitability descent, full width: the whole tree each step
        "hidden": "games/openspiel/kuhn.hidden.yaml"}  # score mode + obs_baseline, choice entropy, magnet (#51)
KEY = "eval/exploitability/exploitability"
PLAYED = "eval/exploitability/exploitability_played"  # exp(l_i) + invalid share on the uniform fallback
AVERAGE = "eval/exploitability/exploitability_average"  # the average policy of the evaluations so far


def run_arm(arm: str, seed: int, out: Path, steps: int, every: int, threads: int, extra: list[str]) -> int:
    """Train one arm on one seed into ``out/<arm>_seed<seed>``; its exit code (the log is ``<run>.log``)."""
    run = out / f"{arm.lower()}_seed{seed}"
    argv = [sys.executable, "-m", "arena.train", ARMS[arm], "--run-dir", str(run),
            "--set", f"train.seed={seed}", "--set", f"train.steps={steps}", "--set", f"train.checkpoint_every={steps}",
            "--set", f"train.evals=[{{name: exploitability, kind: exact, every: {every}}}]",
            "--set", "runner.progress=false", "--set", "train.plot=false", "--set", "train.loggers=[]"]
    for item in extra:
        argv += ["--set", item]
    env = {**__import__("os").environ, "OMP_NUM_THREADS": str(threads)}
    t0 = time.perf_counter()
    with (out / f"{run.name}.log").open("w") as log:
        rc = subprocess.run(argv, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
    wall = time.perf_counter() - t0
    (out / f"{run.name}.wall").write_text(f"{wall:.0f} {rc}\n")
    return rc


#: Logged by train.descent at step s: the exploitability of the policy before step s's update, i.e. of
#: step s - 1's weights (score mode: the played policy), from the tree walk the step makes anyway.
DESCENT = "descent/exploitability"


def curve(run: Path, key: str = KEY, fill: bool = True) -> dict[int, float]:
    """``key`` per step; for the exploitability keys, a descent run's per-step number fills the steps between
    evaluations (at step s - 1: it is that policy's)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()] if (run / "metrics.jsonl").exists() else []
    out = {int(r["step"]): float(r[key]) for r in rows if isinstance(r.get(key), (int, float))}
    if fill and key in (KEY, PLAYED) and out:
        out = {int(r["step"]) - 1: float(r[DESCENT]) for r in rows if isinstance(r.get(DESCENT), (int, float))} | out
    return dict(sorted(out.items()))


def last_value(run: Path, key: str) -> float | None:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()] if (run / "metrics.jsonl").exists() else []
    values = [r[key] for r in rows if isinstance(r.get(key), (int, float))]
    return float(values[-1]) if values else None


def report(out: Path) -> None:
    runs = sorted(p for p in out.iterdir() if p.is_dir())
    curves = {p.name: curve(p, fill=False) for p in runs}  # the evaluations' steps (a descent run logs every step)
    if not any(curves.values()):
        raise RunStopped(f"no run in {out} has logged an exploitability: nothing to report (see the runs' logs there)")
    steps = sorted({s for c in curves.values() for s in c})
    print("| run | " + " | ".join(f"step {s}" for s in steps)
          + " | final - base | played, final (exact-text) | invalid turns, last step | wall s |")
    print("|---|" + "---|" * (len(steps) + 4))
    for name, c in curves.items():
        wall = (out / f"{name}.wall").read_text().split()[0] if (out / f"{name}.wall").exists() else "?"
        delta = f"{c[max(c)] - c[min(c)]:+.4f}" if len(c) > 1 else "n/a"
        played = curve(out / name, PLAYED, fill=False)
        invalid = last_value(out / name, "game/invalid_turn_rate")
        print(f"| {name} | " + " | ".join(f"{c[s]:.4f}" if s in c else "" for s in steps) + f" | {delta} | "
              + (f"{played[max(played)]:.4f}" if played else "n/a") + " | "
              + (f"{invalid:.2f}" if invalid is not None else "n/a") + f" | {wall} |")
    compare(out)
    plot([out], out / "exploitability.png")


def played_sampled(out: Path, n: int, parallel: int, threads: int) -> None:
    """``arena.eval exploitability --sample n`` on each finished free-generation run's last checkpoint, into
    ``<run>/played.json``: the played policy estimated from ``n`` sampled replies per information state,
    parsed by the game (the exact-text formula counts only the exact action names as legal replies, while the
    parser also takes "I bet", so it overstates a free-generation policy's invalid share). Score-mode and
    descent runs play their scored policy: nothing to sample."""
    import os

    todo = []
    for run in sorted(p for p in out.iterdir() if p.is_dir() and "_seed" in p.name):
        arm = next((a for a in ARMS if a.lower() == run.name.rsplit("_seed", 1)[0]), None)
        steps = sorted((run / "checkpoints").glob("step_*")) if (run / "checkpoints").is_dir() else []
        if arm in (None, "score", "br", "ed") or not steps or (run / "played.json").exists():
            continue
        sets = [f"policies.learner.model={steps[-1]}"]
        if arm == "players":  # the first policy is the checkpoint's model/, the other under policies/<name>/
            sets = [f"policies.p0.model={steps[-1]}", f"policies.p1.model={steps[-1]}/policies/p1/model"]
        argv = [sys.executable, "-m", "arena.eval", "exploitability", ARMS[arm], "--sample", str(n),
                "--json", str(run / "played.json")]
        for item in sets:
            argv += ["--set", item]
        todo.append((run, argv))
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}

    def one(job: tuple[Path, list[str]]) -> None:
        with (job[0].parent / f"{job[0].name}.played.log").open("w") as log:
            subprocess.run(job[1], cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env)

    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(one, todo))


def final(run: Path) -> dict[str, float] | None:
    """A finished run's end: scored exploitability, played exploitability and invalid share. The played
    numbers are the sampled estimate of ``played.json`` (:func:`played_sampled`) where it exists, else the
    exact-text formula and the last training step's invalid-turn rate; score mode logs no played number,
    its scored policy is the played one."""
    scored = curve(run, fill=False)
    if not scored:
        return None
    end = max(scored)
    if (run / "played.json").exists():
        values = json.loads((run / "played.json").read_text())["values"]
        return {"scored": scored[end], "played": values["exploitability_played_sampled"],
                "invalid": values["invalid_share_sampled"], "sampled": 1.0}
    played = curve(run, PLAYED, fill=False)
    invalid = last_value(run, "game/invalid_turn_rate")
    return {"scored": scored[end], "played": played.get(end, scored[end]), "invalid": invalid or 0.0, "sampled": 0.0}


def collapsed(end: dict[str, float], key: str = "played") -> bool:
    """Issue #34's collapse: exploitability (``key``: of the played policy, or the scored one) >= 0.9 or
    invalid replies >= 0.9 at the end."""
    return end[key] >= 0.9 or end["invalid"] >= 0.9


def compare(out: Path) -> None:
    """Per arm: the mean final exploitability (scored and played), the collapse rate; between each pair of
    arms, the difference of means over the seeds both ran, with a paired 95% bootstrap interval (each
    seed's difference resampled) and the unpaired one (each arm's seeds resampled on their own)."""
    from arena.stats.heldout import bootstrap, bootstrap_difference

    ends: dict[str, dict[int, dict[str, float]]] = {}
    for run in sorted(p for p in out.iterdir() if p.is_dir() and "_seed" in p.name):
        arm, seed = run.name.rsplit("_seed", 1)
        end = final(run)
        if end is not None and seed.isdigit():
            ends.setdefault(arm, {})[int(seed)] = end
    if not ends:
        return
    print("\n| run | scored, final | played, final | invalid share | collapsed (played) | collapsed (scored) |")
    print("|---|---|---|---|---|---|")
    for arm, by_seed in ends.items():
        for seed, e in sorted(by_seed.items()):
            print(f"| {arm} seed {seed} | {e['scored']:.4f} | {e['played']:.4f}{'' if e['sampled'] else ' (exact-text)'} "
                  f"| {e['invalid']:.2f} | {'yes' if collapsed(e) else 'no'} | {'yes' if collapsed(e, 'scored') else 'no'} |")
    print("\n| arm | seeds | scored, final [95%] | played, final [95%] | collapsed: played >= 0.9 or invalid >= 0.9 "
          "| the same with the scored exploitability |")
    print("|---|---|---|---|---|---|")
    for arm, by_seed in ends.items():
        cells = []
        for key in ("scored", "played"):
            m, lo, hi = bootstrap([e[key] for e in by_seed.values()], resamples=10000)
            cells.append(f"{m:.4f} [{lo:.4f}, {hi:.4f}]")
        bad = sum(collapsed(e) for e in by_seed.values())
        worse = sum(collapsed(e, "scored") for e in by_seed.values())
        print(f"| {arm} | {len(by_seed)} | {cells[0]} | {cells[1]} | {bad}/{len(by_seed)} = {bad / len(by_seed):.2f} "
              f"| {worse}/{len(by_seed)} |")
    arms = list(ends)
    for i, a in enumerate(arms):
        for b in arms[i + 1:]:
            seeds = sorted(set(ends[a]) & set(ends[b]))
            if len(seeds) < 2:
                continue
            for key in ("scored", "played"):
                xa, xb = [ends[a][s][key] for s in seeds], [ends[b][s][key] for s in seeds]
                d, lo, hi = bootstrap_difference(xa, xb)
                _, ulo, uhi = bootstrap_difference(xa, xb, paired=False)
                print(f"{a} - {b}, {key} exploitability at the end, {len(seeds)} seeds: {d:+.4f}, paired 95% "
                      f"[{lo:+.4f}, {hi:+.4f}], unpaired [{ulo:+.4f}, {uhi:+.4f}]")


#: Horizontal reference lines of the plot: exploitability of Kuhn poker policies.
REFERENCES = {"uniform random": 0.458333, "card-blind floor": 1 / 3, "a2c, 1e7 episodes": 0.198,
              "RM-PG, 1e7 episodes": 0.124, "NFSP, 1e7 episodes": 0.0198, "CFR+": 0.0001}


def plot(folders: list[Path], path: Path) -> None:
    """Exploitability against step: one thin line per seed, one colour per arm (a folder's runs named
    ``<arm>_seed<N>``; the arm's label is ``<folder>/<arm>`` when there are several folders), log scale, the
    tabular references as horizontal lines. The lines are the scored policy (score mode and descent: the
    played one); a cross marks a free-generation run's played policy at its end, sampled (``played.json``).
    The exact-text formula is not drawn: it counts "I bet" as invalid, so it sits near uniform play."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colours: dict[str, str] = {}
    for folder in folders:
        for run in sorted(p for p in folder.iterdir() if p.is_dir()):
            c = curve(run)
            if not c:
                continue
            arm = run.name.rsplit("_seed", 1)[0]
            label = f"{folder.name}/{arm}" if len(folders) > 1 else arm
            first = label not in colours
            colours.setdefault(label, f"C{len(colours)}")
            ax.plot(sorted(c), [c[s] for s in sorted(c)], lw=1, marker=".", color=colours[label],
                    label=label if first else None)
            end = final(run)
            if end is not None and end["sampled"]:
                ax.plot([max(c)], [end["played"]], marker="x", ms=7, color=colours[label])
    finish(fig, ax, path, "step", "exploitability (Kuhn, exact; x: played, sampled)")


def plot_stages(runs: list[Path], path: Path) -> None:
    """One run in consecutive stages (each a run folder whose model is the previous one's last checkpoint):
    the played policy's exploitability per step (a descent run's per-step number) and the average policy of
    each stage's evaluations, steps offset by the stages before, log scale, the tabular references."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    offset = 0
    for i, run in enumerate(runs):
        c, avg = curve(run), curve(run, AVERAGE, fill=False)
        ax.plot([offset + s for s in sorted(c)], [c[s] for s in sorted(c)], lw=0.8, color=f"C{i}",
                label=f"{run.name}: last iterate")
        ax.plot([offset + s for s in sorted(avg)], [avg[s] for s in sorted(avg)], lw=1.2, ls="--", marker=".",
                color=f"C{i}", label=f"{run.name}: average of its evaluations")
        offset += max(c)
    finish(fig, ax, path, "step (the stages one after the other)", "exploitability (Kuhn, exact, played policy)")


def finish(fig: Any, ax: Any, path: Path, xlabel: str, ylabel: str) -> None:
    """The tabular references as horizontal lines, log scale, labels and legend; saved to ``path``."""
    for i, (name, value) in enumerate(REFERENCES.items()):
        ax.axhline(value, color="grey", lw=0.7, ls=[":", "--", "-."][i % 3])
        ax.text(ax.get_xlim()[1], value, f" {name} ({value:.3g})", fontsize=6, va="center", color="grey")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=6, loc="lower left")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    print(f"plot: {path}")


#: The most runs (or samplings) at once: each is a process with its own model.
MAX_PARALLEL = 64


def build_parser() -> argparse.ArgumentParser:
    from arena.rank.exploitability import MAX_SAMPLE

    p = OneLineParser(prog="bench/kuhn_learning.py", description=__doc__.split("\n")[0])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS))
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--every", type=int, default=4)
    p.add_argument("--parallel", type=int, default=2, help="runs at once (each gets cores / parallel threads; "
                   f"1 to {MAX_PARALLEL})")
    p.add_argument("--out", type=Path, default=ROOT / "runs" / "kuhn_bench")
    p.add_argument("--set", dest="extra", action="append", default=[], metavar="KEY=VALUE",
                   help="more overrides for every arm, e.g. learner.lr=1e-4")
    p.add_argument("--report", type=Path, default=None, help="only print the table and plot of this folder's runs")
    p.add_argument("--plot", type=Path, nargs="+", default=None, metavar="FOLDER",
                   help="only plot these folders' runs together (one colour per folder and arm) into --png")
    p.add_argument("--stages", action="store_true", help="with --plot: the folders are run folders, the stages "
                   "of one run in order (each started from the previous one's last checkpoint)")
    p.add_argument("--png", type=Path, default=Path("exploitability.png"), help="where --plot writes")
    p.add_argument("--played", type=int, default=0, metavar="N", help="then sample the played policy of each "
                   "free-generation run's last checkpoint, N replies per information state (arena.eval "
                   f"exploitability --sample N; at most {MAX_SAMPLE}); with --report, for the folder's runs that lack it")
    return p


def check_args(args: argparse.Namespace) -> None:
    """Every flag, the arms' configs with ``--set`` and the folders, before any run starts: one line each."""
    from arena.loop.config import load_config
    from arena.rank.exploitability import MAX_SAMPLE
    from arena.rank.flags import check_image_file

    check_range("--parallel", args.parallel, 1, MAX_PARALLEL)
    check_range("--steps", args.steps, 1)
    check_range("--every", args.every, 1)
    check_range("--played", args.played, 0, MAX_SAMPLE)
    for seed in args.seeds:
        check_range("--seeds", seed, 0)
    for flag, folders in (("--report", [args.report] if args.report else []), ("--plot", args.plot or [])):
        for folder in folders:
            if not folder.is_dir():
                raise ConfigError(f"{flag}: {str(folder)!r} is not a folder of runs")
    if args.plot is not None:
        check_image_file("--png", args.png)
    if args.report is None and args.plot is None:
        blocked = next((p for p in (args.out, *args.out.parents) if p.exists() and not p.is_dir()), None)
        if blocked is not None:  # the folder is created: only a file in its way is wrong
            raise ConfigError(f"--out: {str(args.out)!r}: {str(blocked)!r} is a file, not a folder; give another path")
        for arm in args.arms:  # a bad --set fails here once, not in every run's log
            try:
                load_config(ARMS[arm], args.extra)
            except ConfigError as e:  # it names the arm's config file
                raise ConfigError(f"--set: {e}") from None


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    if args.report is not None:
        if args.played:
            played_sampled(args.report, args.played, args.parallel, worker_threads(args.parallel))
        report(args.report)
        return 0
    if args.plot is not None:
        (plot_stages if args.stages else plot)(args.plot, args.png)
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    threads = worker_threads(args.parallel)
    jobs = [(arm, seed) for seed in args.seeds for arm in args.arms]
    with ThreadPoolExecutor(args.parallel) as pool:
        codes = list(pool.map(lambda j: run_arm(j[0], j[1], args.out, args.steps, args.every, threads, args.extra), jobs))
    failed = [f"{arm.lower()}_seed{seed}" for (arm, seed), rc in zip(jobs, codes, strict=True) if rc]
    if len(failed) == len(jobs):
        raise RunStopped(f"every run failed ({len(jobs)} of {len(jobs)}): {failed[0]}: {last_line(args.out, failed[0])} "
                         f"(logs: {args.out}/<run>.log)")
    for name in failed:
        print(f"warning: {name} failed: {last_line(args.out, name)} (log: {args.out / name}.log)", file=sys.stderr)
    if args.played:
        played_sampled(args.out, args.played, args.parallel, threads)
    report(args.out)
    return 0


def last_line(out: Path, run: str) -> str:
    """The last line a failed run wrote (its one-line error, when arena.train refused the run)."""
    try:
        lines = (out / f"{run}.log").read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "no log"
    return lines[-1] if lines else "no output"


def worker_threads(parallel: int) -> int:
    """Each of the ``parallel`` processes' share of the cores (a user's OMP_NUM_THREADS wins); every process is
    started with OMP_NUM_THREADS set to it, which arena then honours."""
    import os

    from arena.policies.hardware import THREADS_ENV, choose_threads, usable_cores

    threads, why = choose_threads(usable_cores(), parallel, env=os.environ.get(THREADS_ENV))
    print(f"threads: torch intra-op {threads} per run ({why}): {parallel} parallel runs", flush=True)
    return threads


if __name__ == "__main__":
    from arena.cli import run_cli

    run_cli(main)
