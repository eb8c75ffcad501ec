"""Each method against plain GRPO on the same budget and seeds: the capability it trains, on held-out games.

    .venv/bin/python bench/methods.py spy --seeds 0 1                 # train both arms per seed, evaluate, report
    .venv/bin/python bench/methods.py household --seeds 0 1 --parallel 2
    .venv/bin/python bench/methods.py --report                        # bench/METHODS.md's tables from finished runs

A method is a pair of arms (the method, its plain-GRPO counterpart), each an ``arena.train`` config with
overrides, trained with ``train.seed=N`` on the same budget, optionally from a warm-started checkpoint
(``train.warm_start``, made once per method and shared by both arms). Every final checkpoint, the base
model and the warm start play the SAME held-out games (``python -m arena.eval --episodes``: seeds from
``2**40``, which training never reaches). Per eval, the report gives each run's capability metric and
paired 95% bootstrap intervals (``arena/rank/compare.py``: the games resampled jointly) against the base
model, the warm start and the GRPO arm of the same seed; "pooled" pairs every seed's games with the
reference's (the interval then holds game variance, not seed variance: 2 seeds cannot estimate that).

Wall times are logged per run (``<run>.wall``). Runs that exist are not repeated, so an interrupted
benchmark continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "runs" / "methods"
BASE = "smollm2-135m"
sys.path.insert(0, str(ROOT))
from arena.policies.hardware import THREADS_ENV, choose_threads, usable_cores  # noqa: E402

QUIET = ["runner.progress=false", "train.plot=false", "train.loggers=[]", "train.evals=[]"]
EXTRA: list[str] = []  # --set: overrides for every training run, after the method's own


@dataclass(frozen=True)
class Method:
    """One comparison: ``arms`` (name -> (config, overrides)), the first being the method and the second plain GRPO."""

    arms: dict[str, tuple[str, list[str]]]
    train: list[str]
    evals: dict[str, tuple[str, list[str], int]]  # name -> (config, overrides, games)
    metrics: list[str]
    warm: tuple[str, list[str]] | None = None
    eval_metrics: dict[str, list[str]] = field(default_factory=dict)  # per eval, instead of `metrics`
    pairwise: list[str] | None = None  # `python -m arena.eval pairwise` arguments: each run's win rate against the base
    notes: list[str] = field(default_factory=list)


# LSP's held-out games: the scripted `template` challenger asks, the learner's solvers answer, the verifier scores.
LSP_TEMPLATE = ["game.mode=lsp_zero", "game.challenger_prefix=''",
                "seats={'challenger_*': 'scripted:template', 'solver_*': learner}"]
# LSP's training budget: G = 8 solvers per query: at the base's accuracy of about 0.06, a group of 2 has reward
# variance (a learning signal) in about 11% of queries, a group of 8 in about 40%. The first run of this benchmark
# (G = 2, 10 steps, lr 1e-5) moved neither arm's interval clear of the base but LSP-Zero's pooled one
# (bench/METHODS.md).
LSP_TRAIN = ["train.steps=16", "train.games_per_step=4", "train.checkpoint_every=16", "game.n_solvers=8",
             "learner.lr=2.0e-5"]
LSP_EVALS = {"heldout": ("games/lsp/lsp.yaml", [*LSP_TEMPLATE, "game.n_solvers=4"], 40),
             # The paper's evaluation temperature, 0.01: one near-greedy answer to each of 80 queries.
             "heldout_t0.01": ("games/lsp/lsp.yaml", [*LSP_TEMPLATE, "game.n_solvers=1",
                                                      "policies.learner.sampling.temperature=0.01"], 80)}
SPY_GRPO = "learner.estimators.perform={name: grpo, group_by: [phase, role]}"
METHODS: dict[str, Method] = {
    # SpyRL: RAE (role-conditioned baselines) against plain GRPO per role on the perform phase; the
    # vote phase is GRPO in both arms. Capability: detection accuracy among votes that name a player.
    "spy": Method(
        arms={"RAE": ("games/spy/spy.yaml", []), "GRPO": ("games/spy/spy.yaml", [SPY_GRPO])},
        train=["train.steps=8", "train.games_per_step=8", "train.checkpoint_every=8"],
        evals={"heldout": ("games/spy/spy.yaml", [], 32)},
        metrics=["ratio/named_vote_accuracy", "game/detection_accuracy", "game/parseable_vote_rate"],
    ),
    # SpyRL with the one-fact mask (spy.fact.yaml, issue #51): the spy's copy lacks one number of the problem
    # wherever it appears, a difference a voter can check against its own copy. The same arms and capability as
    # spy, at twice the steps (8 of them train the vote), on held-out games of the same variant.
    "spy_fact": Method(
        arms={"RAE": ("games/spy/spy.fact.yaml", []), "GRPO": ("games/spy/spy.fact.yaml", [SPY_GRPO])},
        train=["train.steps=16", "train.games_per_step=8", "train.checkpoint_every=16"],
        evals={"heldout": ("games/spy/spy.fact.yaml", [], 144)},
        metrics=["ratio/named_vote_accuracy", "game/detection_accuracy", "game/parseable_vote_rate"],
    ),
    # LSP against LSP-Zero (the challenger rewarded by the solvers' failure only, no self-judged quality).
    # Capability: the solver's accuracy on held-out verifiable queries a scripted challenger asks (two
    # whole numbers from 1 to 20 and + or -, the training template's family), judged by the verifier.
    "lsp": Method(
        arms={"LSP": ("games/lsp/lsp.yaml", []), "LSP-Zero": ("games/lsp/lsp.yaml", ["game.mode=lsp_zero"])},
        train=LSP_TRAIN, evals=LSP_EVALS, metrics=["game/R", "game/answer_words"],
        # The paper's other yardstick: the win rate against the base model on held-out instructions (the
        # 32 first of arena/games/lsp/data/instructions.jsonl, greedy answers of up to 64 tokens), judged both
        # ways round by the frozen base model (the only judge here; the paper uses GPT-4o).
        pairwise=["games/lsp/lsp.yaml", "--base", "judge", "--judge", "judge", "--limit", "32", "--max-new-tokens", "64"],
    ),
    # Several trainable policies (issue #36): LSP-Zero with the challenger and the solvers as two policies
    # (lsp.roles.yaml: `learner` the solvers, `challenger` the challenger) against the same game with shared
    # weights (lsp.yaml in lsp_zero mode), at lsp's budget and seeds. The checkpoint's model/ is the solver in
    # both, so the solver's capability is measured alike: held-out template queries, as for lsp.
    "lsp_roles": Method(
        arms={"separate": ("games/lsp/lsp.roles.yaml", []), "shared": ("games/lsp/lsp.yaml", ["game.mode=lsp_zero"])},
        train=LSP_TRAIN, evals=LSP_EVALS, metrics=["game/R", "game/answer_words"],
    ),
    # AUSO against trajectory-level GRPO on household, both from the same warm start. Capability: success
    # on held-out worlds, in-domain task types and held-out task types.
    "household": Method(
        # AUSO's probes score full-vocabulary distributions: at household.yaml's token_budget of 4096 one
        # micro-batch's float32 logits are 0.8 GB per copy and a run peaked at 10.9 GB (killed by the OOM
        # killer beside two other jobs). A smaller budget only splits micro-batches (the gradient is the
        # full batch's, tested), so the AUSO arm uses 1024.
        arms={"AUSO": ("games/household/household.auso.yaml", ["learner.token_budget=1024"]),
              "GRPO": ("games/household/household.yaml", [])},
        train=["train.steps=4", "train.games_per_step=2", "train.checkpoint_every=4"],
        evals={"in_domain": ("games/household/household.yaml", ["game.split=eval", "game.task_types=in_domain"], 8),
               "held_out": ("games/household/household.yaml", ["game.split=eval", "game.task_types=held_out"], 8)},
        metrics=["game/success_rate", "game/invalid_rate", "reward/agent"],
        warm=("games/household/household.yaml",
              ["train.warm_start={source: bots, bots: {'*': seeker_action}, games: 64, min_reward: 0.5, "
               "batch_size: 8, steps: 32, lr: 1.0e-4}", "learner.param_dtype=bfloat16"]),
    ),
    # Skill-SP with library evolution (induce and refine with the frozen base) against a frozen seed
    # library, both from the same warm start. Capability: solver accuracy on the project's held-out tasks.
    "skill_sp": Method(
        arms={"evolving": ("games/skill_sp/skill_sp.yaml", []),
              "frozen": ("games/skill_sp/skill_sp.yaml", ["game.evolution.policy=null"])},
        train=["train.steps=4", "train.games_per_step=4", "train.checkpoint_every=4"],
        evals={"heldout": ("games/skill_sp/skill_sp.yaml", ["game.mode=heldout"], 24),
               "proposals": ("games/skill_sp/skill_sp.yaml", [], 16)},
        metrics=["game/solver_accuracy", "reward/solver"],
        eval_metrics={"proposals": ["game/parsed", "game/valid", "game/verified", "game/solver_accuracy"]},
        warm=("games/skill_sp/skill_sp.yaml",
              ["train.warm_start={source: bots, games: 48, phases: [propose], batch_size: 4, steps: 15, lr: 1.0e-4}",
               "learner.param_dtype=bfloat16"]),
    ),
}


def run(argv: list[str], log: Path, threads: int) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    t0 = time.perf_counter()
    with log.open("w") as fh:
        rc = subprocess.run(argv, cwd=ROOT, stdout=fh, stderr=subprocess.STDOUT, env=env).returncode
    wall = time.perf_counter() - t0
    log.with_suffix(".wall").write_text(f"{wall:.1f} {rc}\n")
    if rc != 0:
        raise RuntimeError(f"{' '.join(argv[:6])}... failed (exit {rc}); see {log}")
    return wall


def sets(items: list[str]) -> list[str]:
    return [x for item in items for x in ("--set", item)]


def warm_dir(name: str) -> Path:
    return OUT / name / "warm"


def train(name: str, arm: str, seed: int, threads: int) -> Path:
    m = METHODS[name]
    config, extra = m.arms[arm]
    out = OUT / name / f"{arm}_seed{seed}"
    if (out / "checkpoints").exists() and any((out / "checkpoints").glob("step_*")) and (out / "metrics.jsonl").exists():
        return out
    start = [f"policies.learner.model={warm_dir(name)}"] if m.warm else []
    argv = [sys.executable, "-m", "arena.train", config, "--run-dir", str(out),
            *sets(QUIET + m.train + start + extra + EXTRA + [f"train.seed={seed}"])]
    run(argv, OUT / name / f"{out.name}.log", threads)
    return out


def make_warm(name: str, threads: int) -> None:
    m = METHODS[name]
    if m.warm is None or (warm_dir(name) / "checkpoints").exists():
        return
    config, extra = m.warm
    argv = [sys.executable, "-m", "arena.train", config, "--max-steps", "0", "--run-dir", str(warm_dir(name)),
            *sets(QUIET + extra)]
    run(argv, OUT / name / "warm.log", threads)


def evaluate(name: str, label: str, model: str, threads: int) -> None:
    for ev, (config, extra, games) in METHODS[name].evals.items():
        out = OUT / name / "eval" / ev / f"{label}.jsonl"
        if out.exists():
            continue
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp.jsonl")
        tmp.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "arena.eval", config, "--games", str(games), "--episodes", str(tmp),
                "--json", str(out.with_suffix(".json")), *sets(["runner.progress=false", *extra, f"policies.learner.model={model}"])]
        run(argv, out.with_suffix(".log"), threads)
        tmp.rename(out)


def win_rate(name: str, label: str, model: str, threads: int) -> None:
    m = METHODS[name]
    out = OUT / name / "eval" / "pairwise" / f"{label}.json"
    if m.pairwise is None or out.exists():
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    argv = [sys.executable, "-m", "arena.eval", "pairwise", *m.pairwise, "--set", f"policies.learner.model={model}",
            "--set", "runner.progress=false", "--json", str(out.with_suffix(".tmp"))]
    run(argv, out.with_suffix(".log"), threads)
    out.with_suffix(".tmp").rename(out)


def pairwise_report(name: str) -> list[str]:
    """Win rate against the base per run, and the method minus its GRPO arm per seed (paired over instructions)."""
    import numpy as np

    from arena.rank.compare import _indices

    folder = OUT / name / "eval" / "pairwise"
    got = {p.stem: json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))} if folder.exists() else {}
    if not got:
        return []
    arms = list(METHODS[name].arms)
    lines = [f"\n### {name}, pairwise: win rate against the base model ({int(next(iter(got.values()))['summary']['n'])} "
             "held-out instructions, both orders)\n", f"| run | win rate [95%] | vs {arms[1]} (same seed) |", "|---|---|---|"]
    for label, d in got.items():
        s = d["summary"]
        other = label.replace(arms[0], arms[1], 1) if label.startswith(f"{arms[0]}_") else None
        diff = ""
        if other in got:
            a = np.array([r["score"] for r in d["records"]])
            b = np.array([r["score"] for r in got[other]["records"]])
            boots = (a - b)[_indices(len(a), 0)].mean(axis=1)
            low, high = np.percentile(boots, [2.5, 97.5])
            diff = f"{(a - b).mean():+.3f} [{low:+.3f}, {high:+.3f}]"
        lines.append(f"| {label.replace('_seed', ' seed ')} | {s['win_rate']:.3f} [{s['low']:.3f}, {s['high']:.3f}] | {diff} |")
    return lines


def jobs(name: str, seeds: list[int], threads: int, train_only: bool = False) -> list:
    m = METHODS[name]
    if train_only:
        return [lambda a=arm, s=seed: train(name, a, s, threads) for seed in seeds for arm in m.arms]
    refs = [lambda: evaluate(name, "base", BASE, threads)]
    if m.warm:
        refs.append(lambda: evaluate(name, "warm", str(warm_dir(name)), threads))
    runs = [(arm, seed) for seed in seeds for arm in m.arms]
    def one(arm: str, seed: int) -> None:
        folder = str(train(name, arm, seed, threads))
        evaluate(name, f"{arm}_seed{seed}", folder, threads)
        win_rate(name, f"{arm}_seed{seed}", folder, threads)

    return refs + [lambda a=arm, s=seed: one(a, s) for arm, seed in runs]


def load(path: Path) -> list:
    from arena.core.types import read_jsonl

    return sorted(read_jsonl(path), key=lambda ep: ep.seed) if path.exists() else []


def paired(a: list, b: list, game_cls, metrics: list[str]) -> dict:
    from arena.rank.compare import paired_summary

    if not a or not b:
        return {}
    rows = paired_summary(a, b, game_cls)
    return {k: rows[k] for k in metrics if k in rows}


def cell(row: dict | None) -> str:
    if not row:
        return "n/a"
    return f"{row['diff']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}]"


def _runs(folder: Path, ev: str) -> dict[str, list]:
    return {p.stem: load(p) for p in sorted((folder / "eval" / ev).glob("*.jsonl")) if not p.stem.endswith(".tmp")}


def _value(eps: list, game_cls, metric: str) -> float | None:
    """The metric over the games: a declared ratio pooled (``ratio/<name>``), else the mean of the games that have it."""
    import numpy as np

    from arena.rank.compare import ratio_arrays
    from arena.stats.heldout import per_episode

    if not eps:
        return None
    if metric.startswith("ratio/"):
        num, den, _ = game_cls.eval_ratios[metric.removeprefix("ratio/")]
        n, d = ratio_arrays(eps, num, den)
        return float(n.sum() / d.sum()) if d.sum() > 0 else None
    values = [row[metric] for row in map(per_episode, eps) if metric in row]
    return float(np.mean(values)) if len(values) >= 2 else None


def _compare(a: list, b: list, game_cls, metric: str) -> str:
    return cell(paired(a, b, game_cls, [metric]).get(metric)) if a and b and len(a) == len(b) else ""


def method_rows(name: str, ev: str) -> tuple[list[tuple[str, dict[str, list]]], dict[str, list]] | None:
    """Each run's episodes (with "pooled" per arm: its seeds' games one after another), and the references'."""
    m = METHODS[name]
    eps = _runs(OUT / name, ev)
    if "base" not in eps:
        return None
    arms = list(m.arms)
    seeds = sorted({int(k.rsplit("_seed", 1)[1]) for k in eps if "_seed" in k})
    rows: list[tuple[str, dict[str, list]]] = []
    for arm in arms:
        pooled: dict[str, list] = {"run": [], "base": [], "warm": [], "grpo": []}
        for seed in seeds:
            run = eps.get(f"{arm}_seed{seed}")
            if not run:
                continue
            grpo = eps.get(f"{arms[1]}_seed{seed}", []) if arm != arms[1] else []
            refs = {"run": run, "base": eps["base"], "warm": eps.get("warm", []), "grpo": grpo}
            rows.append((f"{arm} seed {seed}", refs))
            for key, value in refs.items():
                pooled[key] += value
        if len(pooled["run"]) > len(eps["base"]):
            rows.append((f"{arm} pooled", pooled))
    return rows, eps


def report(names: list[str]) -> str:
    from arena.loop.config import load_config

    lines: list[str] = []
    for name in names:
        m = METHODS[name]
        arms = list(m.arms)
        for ev, (config, extra, games) in m.evals.items():
            got = method_rows(name, ev)
            if got is None:
                continue
            rows, eps = got
            game_cls = load_config(config, extra).game.cls
            metric, *others = m.eval_metrics.get(ev, m.metrics)
            warm = "warm" in eps
            head = ["run", f"`{metric}`", "vs base"] + (["vs warm start"] if warm else []) + [f"vs {arms[1]} (same seed)"]
            head += [f"`{o}`" for o in others] + ["wall s"]
            lines += [f"\n### {name}, {ev}: {arms[0]} against {arms[1]} ({games} held-out games)\n",
                      "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
            refs = [("base", "base model")] + ([("warm", "warm start")] if warm else [])
            for key, label in refs:
                wall = _wall(OUT / name / "warm.wall") if key == "warm" else ""
                vs_base = _compare(eps[key], eps["base"], game_cls, metric) if key == "warm" else ""
                cells = [label, _fmt(_value(eps[key], game_cls, metric)), vs_base] + ([""] if warm else []) + [""]
                lines.append("| " + " | ".join(cells + [_fmt(_value(eps[key], game_cls, o)) for o in others] + [wall]) + " |")
            for label, r in rows:
                wall = "" if label.endswith("pooled") else _wall(OUT / name / f"{label.replace(' seed ', '_seed')}.wall")
                cells = [label, _fmt(_value(r["run"], game_cls, metric)), _compare(r["run"], r["base"], game_cls, metric)]
                cells += [_compare(r["run"], r["warm"], game_cls, metric)] if warm else []
                cells += [_compare(r["run"], r["grpo"], game_cls, metric)]
                cells += [_fmt(_value(r["run"], game_cls, o)) for o in others] + [wall]
                lines.append("| " + " | ".join(cells) + " |")
        lines += pairwise_report(name)
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def _wall(path: Path) -> str:
    return path.read_text().split()[0] if path.exists() else ""


def main() -> None:
    global OUT
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("methods", nargs="*", default=[], help=f"any of {', '.join(METHODS)} (default: all)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    p.add_argument("--parallel", type=int, default=2, help="jobs at once (each gets cores / parallel threads)")
    p.add_argument("--threads", type=int, default=None, help="torch threads per job (default: cores / parallel)")
    p.add_argument("--report", action="store_true", help="only print the tables of finished runs")
    p.add_argument("--train-only", action="store_true", help="train the arms, evaluate nothing (timing runs)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for every training run, after the method's (e.g. train.steps=4)")
    p.add_argument("--out", type=Path, default=OUT, help=f"the runs' folder (default {OUT.relative_to(ROOT)})")
    args = p.parse_args()
    OUT = args.out.resolve()
    EXTRA[:] = args.set
    names = args.methods or list(METHODS)
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        p.error(f"unknown method {unknown[0]!r}; valid: {', '.join(METHODS)}")
    if not args.report:
        # Each of the --parallel jobs gets its share of the cores (a user's OMP_NUM_THREADS wins); every
        # job's process is started with OMP_NUM_THREADS set to it, which arena then honours.
        threads, why = (args.threads, "--threads") if args.threads else choose_threads(
            usable_cores(), args.parallel, env=os.environ.get(THREADS_ENV))
        print(f"threads: torch intra-op {threads} per job ({why}): {args.parallel} parallel jobs", flush=True)
        for name in names:
            (OUT / name).mkdir(parents=True, exist_ok=True)
            make_warm(name, threads * args.parallel)
            with ThreadPoolExecutor(args.parallel) as pool:
                for f in [pool.submit(job) for job in jobs(name, args.seeds, threads, args.train_only)]:
                    f.result()
    if args.train_only:
        for name in names:
            for w in sorted((OUT / name).glob("*_seed*.wall")):
                print(f"{name}/{w.stem}: {w.read_text().split()[0]} s", flush=True)
        return
    print(report(names))


if __name__ == "__main__":
    main()
