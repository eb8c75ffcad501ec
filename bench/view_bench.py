"""How fast the viewer's episode list loads with 1,000 episodes on one page.

    .venv/bin/python bench/view_bench.py [--episodes 1000] [--players 5] [--repeats 5]

1. Scripted SpyRL games (copycat bots, every seat) are played through the runner
   and saved by :class:`arena.view.record.EpisodeLog`, 50 per step file, into a
   temporary run folder (the format training writes).
2. The viewer serves it on 127.0.0.1; ``/?per_page=N`` lists every episode on one
   page. Timed: the first load (reads and summarises every file), then warm loads
   (files unchanged), both as plain HTTP and, where the system Chromium and
   Selenium are installed, as a browser navigation to the load event.
Target: under 2 s.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from arena.loop.config import load_config  # noqa: E402
from arena.runner import Runner, SeatMap  # noqa: E402
from arena.view.record import EpisodeLog  # noqa: E402
from arena.policies.scripted import ScriptedPolicy, make_bot  # noqa: E402


def make_run(run: Path, n: int, players: int) -> float:
    cfg = load_config("games/spy/spy.yaml", [f"game.n_players={players}", "runner.progress=false"])
    bot = ScriptedPolicy(make_bot(cfg.game.cls, "copycat"), name="bot")
    runner = Runner(cfg.game.make_env, {"bot": bot}, SeatMap({"*": "bot"}), num_envs=8)
    log = EpisodeLog(run, 1000.0, policy="bot")
    from arena.loop.config import resolved_config

    import json

    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(resolved_config(cfg)))
    per_step = 50
    for step in range(1, (n + per_step - 1) // per_step + 1):
        k = min(per_step, n - (step - 1) * per_step)
        log.write(step, runner.play(list(range(step * per_step, step * per_step + k))), [])
    return sum(p.stat().st_size for p in (run / "episodes").iterdir()) / 2**20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--episodes", type=int, default=1000)
    ap.add_argument("--players", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from test_view import Server  # the tests' threaded uvicorn server

    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        mb = make_run(run, args.episodes, args.players)
        print(f"{args.episodes} episodes ({args.players} players) saved in {time.perf_counter() - t0:.1f} s, {mb:.2f} MB")
        server = Server(run)
        url = f"{server.url}/?per_page={args.episodes}"
        try:
            def get() -> float:
                t = time.perf_counter()
                body = urllib.request.urlopen(url, timeout=60).read().decode()
                assert body.count("<tr>") >= args.episodes, "the page does not list every episode"
                return time.perf_counter() - t

            first = get()
            warm = [get() for _ in range(args.repeats)]
            print(f"HTTP, first load (reads every file): {first:.3f} s; warm: median {statistics.median(warm):.3f} s "
                  f"(max {max(warm):.3f}) over {args.repeats}; page {len(urllib.request.urlopen(url).read()) / 2**20:.2f} MB")
            try:
                from test_view import _ensure_chromium  # noqa: F401
                from selenium import webdriver
                from selenium.webdriver.chrome.service import Service
                import shutil

                opts = webdriver.ChromeOptions()
                opts.binary_location = shutil.which("chromium") or ""
                for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
                    opts.add_argument(a)
                driver = webdriver.Chrome(options=opts, service=Service(executable_path=shutil.which("chromedriver") or ""))
            except Exception as e:  # noqa: BLE001 - the browser row is optional
                print(f"browser: skipped ({type(e).__name__}: {e})")
                return
            try:
                times, parts = [], []
                for _ in range(args.repeats):
                    driver.get("about:blank")
                    driver.get(url)
                    t = driver.execute_script(
                        "const t = performance.getEntriesByType('navigation')[0];"
                        "return [t.responseEnd - t.startTime, t.domContentLoadedEventEnd - t.startTime, t.loadEventEnd - t.startTime];")
                    times.append(t[2] / 1000)
                    parts.append(t)
                rows = driver.execute_script("return document.querySelectorAll('#episodes tbody tr').length")
                print(f"Chromium, navigation to load event: median {statistics.median(times):.3f} s "
                      f"(max {max(times):.3f}) over {args.repeats}; {rows} rows; last: response "
                      f"{parts[-1][0] / 1000:.3f} s, DOM ready {parts[-1][1] / 1000:.3f} s")
            finally:
                driver.quit()
        finally:
            server.stop()


if __name__ == "__main__":
    main()
