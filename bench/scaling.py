"""Rollout scaling: 1, 4, 16, 64 (and 256) concurrent SpyRL games through arena's Runner, hf and vLLM.

    nice -n 19 flock /tmp/arena-cpu.lock .venv/bin/python bench/scaling.py [--levels 1 4 16 64 256]
        [--backend hf vllm] [--players 3] [--max-new-tokens 16] [--budget-s 840] [--out bench/scaling.png]

For each backend and each level N, the Runner plays N games with ``num_envs=N`` (one wave,
as a training step of N games does) with the built-in model on every seat, and records:

* throughput: env turns/s and generated tokens/s over the wave's wall time;
* memory per game: (peak RSS during the wave - RSS before it) / N, RSS sampled every 10 ms
  (vLLM's KV cache is allocated up front, ``kv_cache_gb``, so its delta is activations only);
* the share of wall time outside generation: 1 - (time inside ``policy.generate``) / wall
  (the runner, prompts, parsing, game rules);
* vLLM: the prefix-cache hit rate, sum of ``RequestOutput.num_cached_tokens`` over the
  prompt tokens of the wave (the cache is reset before each wave, so it starts cold).

The knee is the first level whose turns/s is under 1.2x the level before it (4x the games
buying under 20% more throughput): the backend has saturated there.

Then hf with prefix sharing on vs off (``--share-games`` household games x 8 attempts, 1
step each: the 8 attempts of a world start from the same ~400-token prompt): wall time,
time generating, prefill rows saved, and whether both played the very same tokens. It runs
first, so that a slow box still measures it.

A level whose projected time (the previous level's seconds per game x N) would overrun
``--budget-s`` is skipped and reported as skipped. Writes the plot (``--out``) and prints
markdown tables for bench/RESULTS.md.

The big levels take long on 2 CPU cores, so a backend can be measured in its own run and the
runs put together afterwards (same machine, same settings; each JSON keeps its own)::

    .venv/bin/python bench/scaling.py --backend vllm --share-games 0 --json /tmp/vllm.json
    .venv/bin/python bench/scaling.py --backend hf --levels 1 4 16 64 --json /tmp/hf.json
    .venv/bin/python bench/scaling.py --from /tmp/vllm.json /tmp/hf.json    # table, knees, plot
"""

from __future__ import annotations

import argparse
import os
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from arena.runner import Runner
from arena.policies.base import Completion, Request, SamplingParams
from arena.policies.hardware import resolve_dtype

KNEE_GAIN = 1.2


def rss_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


class PeakRSS:
    """Samples the process's RSS in a thread; ``peak`` is the largest value seen."""

    def __init__(self, every_s: float = 0.01):
        self.every_s, self.peak, self._stop = every_s, rss_bytes(), threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> PeakRSS:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())


class Timed:
    """Wraps a policy: time spent inside ``generate`` and the turns it served."""

    def __init__(self, inner: Any):
        self.inner, self.name, self.seconds, self.turns = inner, inner.name, 0.0, 0

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        start = time.perf_counter()
        out = self.inner.generate(requests)
        self.seconds += time.perf_counter() - start
        self.turns += len(requests)
        return out


class CacheHits:
    """Counts vLLM's prefix-cache hits: wraps ``LLM.generate`` to read each output's counters."""

    def __init__(self, llm: Any):
        self.cached = self.prompt = 0
        inner = llm.generate

        def generate(*args: Any, **kwargs: Any) -> Any:
            outs = inner(*args, **kwargs)
            for o in outs:
                self.cached += o.num_cached_tokens or 0
                self.prompt += len(o.prompt_token_ids)
            return outs

        llm.generate = generate

    def take(self) -> float | None:
        rate = self.cached / self.prompt if self.prompt else None
        self.cached = self.prompt = 0
        return rate


def wave(make_env: Callable[[], Any], policy: Any, params: SamplingParams, n: int, first_seed: int) -> dict[str, Any]:
    """Play n games n at a time; the measures of the module docstring."""
    timed = Timed(policy)
    runner = Runner(make_env, {policy.name: timed}, sampling={policy.name: params}, num_envs=n)
    tokens0, before = policy.tokens_generated, rss_bytes()
    with PeakRSS() as peak:
        start = time.perf_counter()
        episodes = runner.play(list(range(first_seed, first_seed + n)))
        wall = time.perf_counter() - start
    tokens = policy.tokens_generated - tokens0
    return {
        "games": n, "turns": timed.turns, "tokens": tokens, "wall_s": wall, "gen_s": timed.seconds,
        "turns_per_s": timed.turns / wall, "tokens_per_s": tokens / wall,
        "outside_gen": 1.0 - timed.seconds / wall, "mb_per_game": max(0, peak.peak - before) / n / 2**20,
        "episodes": episodes,
    }


def knee(rows: list[dict[str, Any]]) -> int | None:
    for prev, row in zip(rows, rows[1:], strict=False):
        if row["turns_per_s"] < KNEE_GAIN * prev["turns_per_s"]:
            return row["games"]
    return None


def run_levels(name: str, policy: Any, make_env: Callable[[], Any], params: SamplingParams, levels: Sequence[int],
               deadline: float, hits: CacheHits | None = None) -> tuple[list[dict[str, Any]], list[int]]:
    rows: list[dict[str, Any]] = []
    skipped: list[int] = []
    seed = 1000
    for n in levels:
        if rows and time.perf_counter() + rows[-1]["wall_s"] / rows[-1]["games"] * n > deadline:
            skipped.append(n)
            continue
        if hits is not None:
            policy.llm.reset_prefix_cache()
            hits.take()
        row = wave(make_env, policy, params, n, seed)
        seed += n
        row["backend"], row["hit_rate"] = name, hits.take() if hits is not None else None
        rows.append(row)
        hit = f", prefix-cache hits {row['hit_rate']:.0%}" if row["hit_rate"] is not None else ""
        print(f"{name} {n:>4} games: {row['turns']} turns in {row['wall_s']:.1f} s, {row['turns_per_s']:.2f} turns/s, "
              f"{row['tokens_per_s']:.1f} tok/s, {row['outside_gen']:.1%} outside generation, "
              f"{row['mb_per_game']:.1f} MB/game{hit}", flush=True)
    return rows, skipped


def prefix_on_off(policy: Any, games: int, params: SamplingParams) -> list[dict[str, Any]]:
    from arena.games.household import HouseholdGame

    make_env = lambda: HouseholdGame(attempts=8, max_steps=1, task_types="all")  # noqa: E731
    out = []
    for share in (True, False):
        policy.prefix_sharing, saved0 = share, policy.prefill_rows_saved
        row = wave(make_env, policy, params, games, 500)
        row["prefix_sharing"], row["rows_saved"] = share, policy.prefill_rows_saved - saved0
        out.append(row)
        print(f"hf household prefix_sharing={share}: {row['turns']} turns in {row['wall_s']:.1f} s "
              f"({row['gen_s']:.1f} s generating), {row['tokens_per_s']:.1f} tok/s, "
              f"{row['rows_saved']} prefills saved", flush=True)
    policy.prefix_sharing = True
    same = all(a.completion_ids == b.completion_ids for ea, eb in zip(out[0]["episodes"], out[1]["episodes"], strict=True)
               for a, b in zip(ea.turns, eb.turns, strict=True))
    print(f"same tokens with and without sharing: {same}")
    out[0]["same_tokens"] = same
    return out


def plot(rows: list[dict[str, Any]], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 4), constrained_layout=True)
    for backend in dict.fromkeys(r["backend"] for r in rows):
        mine = [r for r in rows if r["backend"] == backend]
        x = [r["games"] for r in mine]
        axes[0].plot(x, [r["turns_per_s"] for r in mine], "o-", label=backend)
        axes[1].plot(x, [100 * r["outside_gen"] for r in mine], "o-", label=backend)
        axes[2].plot(x, [r["mb_per_game"] for r in mine], "o-", label=backend)
        k = knee(mine)
        if k is not None:
            axes[0].axvline(k, ls=":", color=axes[0].lines[-1].get_color())
    for ax, label in zip(axes, ("turns/s", "% of wall time outside generation", "peak RSS delta per game (MB)"),
                         strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted({r["games"] for r in rows}), [str(g) for g in sorted({r["games"] for r in rows})])
        ax.set_xlabel("concurrent games")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.savefig(path, dpi=110)


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| backend | games | turns | wall s | turns/s | tokens/s | outside generation | MB/game | prefix-cache hits |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        hit = f"{r['hit_rate']:.0%}" if r["hit_rate"] is not None else "-"
        lines.append(f"| {r['backend']} | {r['games']} | {r['turns']} | {r['wall_s']:.1f} | {r['turns_per_s']:.2f} | "
                     f"{r['tokens_per_s']:.1f} | {r['outside_gen']:.1%} | {r['mb_per_game']:.1f} | {hit} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 64, 256])
    ap.add_argument("--backend", nargs="+", choices=["hf", "vllm"], default=["hf", "vllm"])
    ap.add_argument("--model", default="smollm2-135m")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--players", type=int, default=3)
    ap.add_argument("--max-new-tokens", type=int, default=16)
    ap.add_argument("--share-games", type=int, default=1, help="household games for prefix sharing on/off (0: skip)")
    ap.add_argument("--budget-s", type=float, default=600.0, help="skip levels projected past this much wall time")
    ap.add_argument("--out", default="bench/scaling.png")
    ap.add_argument("--json", default=None, help="also write the rows (and the run's settings) to this file")
    ap.add_argument("--from", dest="sources", nargs="+", default=None, metavar="JSON",
                    help="run nothing: the table, knees and plot of rows saved with --json (later files win)")
    args = ap.parse_args()
    if args.sources:
        report_saved(args.sources, args.out)
        return
    start = time.perf_counter()
    deadline = start + args.budget_s
    dtype = resolve_dtype(args.dtype)
    params = SamplingParams(temperature=1.0, max_new_tokens=args.max_new_tokens)
    from arena.games.spy import SpyGame

    make_env = lambda: SpyGame(n_players=args.players, max_words=40, require_answer_line=False)  # noqa: E731
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; model {args.model} ({dtype}); "
          f"SpyRL {args.players} players, max_new_tokens {args.max_new_tokens}", flush=True)
    rows: list[dict[str, Any]] = []
    skipped: dict[str, list[int]] = {}
    share: list[dict[str, Any]] = []
    backends = list(args.backend)
    for k, backend in enumerate(backends):
        # Each backend gets its share of what is left, the prefix on/off run a slice of hf's.
        own_deadline = time.perf_counter() + (deadline - time.perf_counter()) / (len(backends) - k)
        if backend == "hf":
            from arena.policies.hf import HFPolicy

            policy = HFPolicy(args.model, dtype=dtype, name="model")
            policy.generate([Request(messages=[{"role": "user", "content": "warm up"}], params=params)])
            if args.share_games:
                share = prefix_on_off(policy, args.share_games, params)
            got, skipped["hf"] = run_levels("hf", policy, make_env, params, args.levels, own_deadline)
            rows += got
            del policy
        else:
            from arena.policies.vllm import VLLMPolicy

            policy = VLLMPolicy(args.model, dtype=dtype, name="model")
            hits = CacheHits(policy.llm)
            wave(make_env, policy, params, 1, 10_000)  # warm-up: CPU kernels are built per shape on first use
            got, skipped["vllm"] = run_levels("vllm", policy, make_env, params, args.levels, own_deadline, hits)
            rows += got
            del policy
    load = os.getloadavg()
    print(f"\ntotal {time.perf_counter() - start:.0f} s; load average at the end {load[0]:.1f} / {load[1]:.1f} / {load[2]:.1f}")
    print(table(rows))
    for backend in dict.fromkeys(r["backend"] for r in rows):
        k = knee([r for r in rows if r["backend"] == backend])
        print(f"{backend}: knee at {k if k is not None else 'none within the levels run'} games; "
              f"skipped (time budget): {skipped.get(backend) or 'none'}")
    if share:
        on, off = share
        print(f"\nhf prefix sharing, {args.share_games} household games x 8 attempts, 1 step: "
              f"on {on['wall_s']:.1f} s ({on['gen_s']:.1f} s generating, {on['rows_saved']} prefills saved), "
              f"off {off['wall_s']:.1f} s ({off['gen_s']:.1f} s generating): "
              f"generation x{off['gen_s'] / on['gen_s']:.2f}; same tokens: {on['same_tokens']}")
    title = (f"arena Runner, SpyRL {args.players} players, {args.model} ({dtype}), "
             f"max_new_tokens {args.max_new_tokens}, {os.cpu_count()} CPUs")
    if args.json:
        import json

        saved = [{k: v for k, v in r.items() if k != "episodes"} for r in rows]
        meta = {"title": title, "levels": args.levels, "skipped": skipped, "load_at_end": list(load),
                "when": time.strftime("%Y-%m-%d %H:%M:%S"), "wall_s": time.perf_counter() - start}
        with open(args.json, "w") as f:
            json.dump({"meta": meta, "rows": saved}, f, indent=1)
        print(f"rows: {args.json}")
    if rows:
        plot(rows, args.out, title)
        print(f"plot: {args.out}")


def report_saved(paths: Sequence[str], out: str) -> None:
    """Table, knees and plot of rows saved by earlier runs; a (backend, games) row of a later file wins."""
    import json

    by_key: dict[tuple[str, int], dict[str, Any]] = {}
    titles: list[str] = []
    skipped: dict[str, set[int]] = {}
    for path in paths:
        with open(path) as f:
            run = json.load(f)
        titles.append(run["meta"]["title"])
        print(f"{path}: {run['meta']['when']}, {run['meta']['wall_s']:.0f} s, load at the end {run['meta']['load_at_end'][0]:.1f}")
        for r in run["rows"]:
            by_key[(r["backend"], r["games"])] = r
        for backend, levels in run["meta"]["skipped"].items():
            skipped.setdefault(backend, set()).update(levels)
    if len(set(titles)) > 1:
        raise SystemExit(f"the runs differ in their settings: {sorted(set(titles))}")
    for backend, levels in skipped.items():  # a level skipped in one run but measured in another is not skipped
        skipped[backend] = {n for n in levels if (backend, n) not in by_key}
    rows = [by_key[k] for k in sorted(by_key, key=lambda k: (k[0] != "hf", k[1]))]
    print(table(rows))
    for backend in dict.fromkeys(r["backend"] for r in rows):
        k = knee([r for r in rows if r["backend"] == backend])
        print(f"{backend}: knee at {k if k is not None else 'none within the levels run'} games; "
              f"skipped (time budget): {sorted(skipped.get(backend, ())) or 'none'}")
    plot(rows, out, titles[0])
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
