"""The run viewer (``python -m arena.view``): its pure parts, and pages driven in a real headless Chromium.

Fast tests use a run folder made by scripted SpyRL rollouts written through the
same :class:`~arena.view.record.EpisodeLog` as training (one seat of one game is
a bot that writes ``<script>alert(1)</script>``). Slow tests (``-m slow``) make a
1-step training run on the built-in model and play a SpyRL game against it in
the browser. Screenshots go to ``runs/screenshots/`` (ignored by git), or to
``$ARENA_SCREENSHOTS``: ``ARENA_SCREENSHOTS=bench/screenshots`` refreshes the committed ones.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from arena.loop.config import load_config
from arena.runner import EpisodeSpec, Runner, SeatMap
from arena.loop.config import resolved_config
from arena.loop.trainer import episode_summary
from arena.core.types import Episode, Sample, Turn
from arena.view import render
from arena.view.record import EpisodeLog, match_samples, step_file
from arena.view.store import RunStore
from arena.policies.scripted import ScriptedPolicy, make_bot

ROOT = Path(__file__).resolve().parents[1]
# Not into the tracked bench/screenshots by default: a test run must leave the tree clean.
SHOTS = Path(os.environ.get("ARENA_SCREENSHOTS", ROOT / "runs" / "screenshots"))
XSS = "<script>alert(1)</script>"
TINY = ["game.n_players=3", "game.task=math", "policies.learner.backend=hf", "runner.progress=false", "policies.learner.sampling.max_new_tokens=8"]


# ---------------------------------------------------------------- a run folder from scripted rollouts
def make_scripted_run(run_dir: Path, steps: int = 3, games: int = 2) -> None:
    """SpyRL with copycat bots; the first game of the last step seats an XSS bot at player_2."""
    cfg = load_config("games/spy/spy.yaml", TINY)
    bot = make_bot(cfg.game.cls, "copycat")
    policies = {"bot": ScriptedPolicy(bot, name="bot"), "evil": ScriptedPolicy(lambda obs, rng: XSS, name="evil")}
    runner = Runner(cfg.game.make_env, policies, SeatMap({"*": "bot"}), num_envs=2, state=cfg.game.make_env().make_state())
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "config.json").write_text(json.dumps(resolved_config(cfg)))
    log = EpisodeLog(run_dir, 10.0, policy="bot")
    with open(run_dir / "metrics.jsonl", "w") as f:
        for step in range(1, steps + 1):
            specs = [EpisodeSpec(seed=100 * step + i) for i in range(games)]
            if step == steps:
                specs[0] = EpisodeSpec(seed=specs[0].seed, seats=SeatMap({"player_2": "evil", "*": "bot"}))
            episodes = runner.play(specs)
            log.write(step, episodes, [])
            f.write(json.dumps({"step": step, **episode_summary(episodes), "loss": 1.0 / step}) + "\n")


# ---------------------------------------------------------------- pure parts
def _turn(index: int, seat: str, phase: str, prompt: list[int], completion: list[int], group: str = "g") -> Turn:
    return Turn(index=index, seat=seat, role="r", phase=phase, messages=[], completion="x", policy="me",
                prompt_ids=prompt, completion_ids=completion, logprobs=[-0.5] * len(completion), group={"episode": group})


def test_samples_are_matched_to_their_turns_even_when_some_are_dropped() -> None:
    a = Episode(episode_id="a", game="g", turns=[_turn(0, "p0", "x", [1], [5, 6], "a"), _turn(1, "p1", "x", [1], [5, 6], "a")])
    b = Episode(episode_id="b", game="g", turns=[_turn(0, "p0", "x", [1], [5, 6], "b"), _turn(1, "p1", "y", [2], [7], "b")])
    # Group 'a' was dropped (zero variance): the sample with the same tokens belongs to episode b.
    s1 = Sample(prompt_ids=[1], completion_ids=[5, 6], advantage=0.7, phase="x", extras={"group": "b"})
    s2 = Sample(prompt_ids=[2], completion_ids=[7], advantage=-1.0, phase="y", extras={"group": "b"}, token_weights=[0.5])
    found = match_samples([a, b], [s1, s2], "me", {"x": ["episode"], "y": ["episode"]})
    assert found == {("b", 0): s1, ("b", 1): s2}
    # Without group keys the first turn with the same tokens takes it.
    assert set(match_samples([a, b], [s1], "me")) == {("a", 0)}


def test_saved_episodes_are_compact_and_carry_advantages(tmp_path: Path) -> None:
    ep = Episode(episode_id="a", game="g", turns=[_turn(0, "p0", "x", [1, 2, 3], [5, 6]), _turn(1, "p1", "x", [1], [9])])
    s = Sample(prompt_ids=[1, 2, 3], completion_ids=[5, 6], advantage=0.123456, phase="x", token_weights=[1.0, 2.0])

    class Tok:  # the one method of a tokenizer the log uses
        @staticmethod
        def batch_decode(ids: list[list[int]]) -> list[str]:
            return [f"<{i[0]}>" for i in ids]

    path = EpisodeLog(tmp_path, 1.0, Tok(), "me").write(3, [ep], [s])
    assert path == step_file(tmp_path, 3)
    (saved,) = [json.loads(line) for line in gzip.open(path, "rt")]
    t0, t1 = saved["turns"]
    assert "prompt_ids" not in t0 and "completion_ids" not in t0
    assert t0["tokens"] == ["<5>", "<6>"] and t0["advantage"] == 0.1235 and t0["token_weights"] == [1.0, 2.0]
    assert t1["advantage"] is None and t1["tokens"] == ["<9>"]


def test_the_disk_cap_stops_saving(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ep = Episode(episode_id="a", game="g", turns=[_turn(0, "p0", "x", [1], [5])])
    log = EpisodeLog(tmp_path, 1e-6, None, "me")
    assert log.write(1, [ep], []) is not None  # the first file always fits an empty folder
    assert log.write(2, [ep], []) is None and not step_file(tmp_path, 2).exists()
    assert "episodes.max_mb" in capsys.readouterr().err


def test_mask_runs_mark_only_the_masked_span() -> None:
    segs = render.mask_runs("a b * * * c *x", "*")
    assert segs == [("a b ", False), ("* * *", True), (" c ", False), ("*", True), ("x", False)]
    ep = {"roles": {"player_0": "spy", "player_1": "civilian"}}
    assert render.spy_mask(ep, "player_1", "* *", {}) == [("* *", False)]
    assert render.spy_mask(ep, "player_0", "x ##", {"game": {"mask_token": "#"}})[1] == ("##", True)


def test_logprob_colours_run_red_to_green() -> None:
    assert render.logprob_colour(0.0) == "hsl(120, 75%, 80%)"
    assert render.logprob_colour(-5.0) == render.logprob_colour(-50.0) == "hsl(0, 75%, 80%)"
    assert render.logprob_colour(None) == "#e5e5e5"


def tournament_json() -> dict[str, Any]:
    return {
        "players": ["base", "step_4", "bot"],
        "ratings": {"base": {"rating": 0.0, "low": -40.0, "high": 40.0},
                    "step_4": {"rating": 55.5, "low": 10.0, "high": 90.0},
                    "bot": {"rating": -20.0, "low": -70.0, "high": 30.0}},
        "payoff": [[0.5, 0.3, 0.6], [0.7, 0.5, 0.4], [0.4, 0.6, 0.5]],
        "cycles": [["base", "bot", "step_4"]],
        "games": 60,
    }


def test_tournament_view_renders_whatever_it_finds() -> None:
    v = render.tournament_view(tournament_json())
    assert [r["player"] for r in v["ratings"]["rows"]] == ["base", "step_4", "bot"]
    assert v["payoff"]["rows"] == ["base", "step_4", "bot"] and v["payoff"]["grid"][1][0][0] == "0.7"
    assert v["cycles"] == ["base → bot → step_4 → base"] and ("games", 60) in v["scalars"]
    per_role = render.tournament_view({"players": ["a", "b"], "ratings": {"a": {"rating": 1}, "_anchor": "a"},
                                       "payoff": {"overall": [[None, 1], [0, None]], "spy": [[None, 0.5], [0.5, None]]}})
    assert [t for t, _ in per_role["payoffs"]] == ["overall", "spy"] and per_role["payoffs"][0][1]["grid"][0][0][0] == ""
    assert [r["player"] for r in per_role["ratings"]["rows"]] == ["a"]
    odd = render.tournament_view({"ratings": [{"player": "a", "elo": 3}], "notes": {"x": {"y": 1}}, "payoff": "?"})
    assert odd["ratings"]["cols"] == ["player", "elo"] and odd["payoff"] is None and odd["tables"][0]["title"] == "notes"
    assert render.tournament_view([1, 2])["raw"]


# ---------------------------------------------------------------- the browser
def _ensure_chromium() -> tuple[str, str]:
    """System Chromium and its driver, installed with apt-get when missing (CI runs as root)."""
    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        if os.geteuid() != 0:
            pytest.skip("chromium/chromium-driver missing and not root to apt-get install them")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], check=True, env=env, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "chromium", "chromium-driver"], check=True, env=env,
                       capture_output=True)
    return shutil.which("chromium") or "", shutil.which("chromedriver") or ""


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = _ensure_chromium()
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1400,1000"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # console messages: CSP violations show there
    driver = webdriver.Chrome(options=opts, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


class Server:
    """The viewer app served by uvicorn in a thread, on a free loopback port."""

    def __init__(self, run_dir: Path, tournaments: list[Path] | None = None, **options: Any):
        import uvicorn

        from arena.view.app import create_app

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.app = create_app(run_dir, tournaments, **options)
        self.server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.thread.start()
        deadline = time.time() + 20
        while not self.server.started and time.time() < deadline:
            time.sleep(0.05)
        assert self.server.started, "the viewer did not start"
        self.url = f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def scripted_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Server]]:
    run = tmp_path_factory.mktemp("view") / "run"
    make_scripted_run(run)
    (run / "tournament.json").write_text(json.dumps(tournament_json()))
    server = Server(run)
    yield run, server
    server.stop()


def _shot(driver: Any, name: str) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SHOTS / name))


def _wait(driver: Any, css: str, timeout: float = 30) -> Any:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(ec.presence_of_element_located((By.CSS_SELECTOR, css)))


def test_the_list_shows_the_episodes_and_filters_them(browser: Any, scripted_site: tuple[Path, Server]) -> None:
    from selenium.webdriver.common.by import By

    run, server = scripted_site
    browser.get(server.url + "/")
    rows = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
    assert len(rows) == 6 and "6 of 6 episodes" in browser.find_element(By.ID, "count").text
    _shot(browser, "episodes.png")
    browser.get(server.url + "/?step=2&role=spy")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")) == 2
    browser.get(server.url + "/?q=alert")  # text search finds the one game with the XSS bot
    (row,) = browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")
    assert row.find_elements(By.TAG_NAME, "td")[1].text == "3"


def test_a_spy_episode_shows_the_masked_view_votes_and_rewards(browser: Any, scripted_site: tuple[Path, Server]) -> None:
    from selenium.webdriver.common.by import By

    run, server = scripted_site
    row, ep = RunStore(run).episode("episodes/step_000001.jsonl.gz/0")  # type: ignore[misc]
    spy = ep["info"]["spy"]
    browser.get(server.url + "/episode/episodes/step_000001.jsonl.gz/0")
    view = browser.find_element(By.ID, f"view-{spy}")
    marks = view.find_elements(By.CSS_SELECTOR, "mark.masked")
    assert len(marks) == 1 and set(marks[0].text.replace(" ", "")) == {"*"}
    assert marks[0].value_of_css_property("background-color") != "rgba(0, 0, 0, 0)"
    civilians = [s for s, r in ep["roles"].items() if r == "civilian"]
    assert all(not browser.find_element(By.ID, f"view-{s}").find_elements(By.CSS_SELECTOR, "mark") for s in civilians)
    actions = browser.find_element(By.ID, "actions").text
    votes = [t["action"] for t in ep["turns"] if t["phase"] == "vote"]
    assert "vote" in actions and all(str(v) in actions for v in votes)
    seats_text = browser.find_element(By.ID, "seats").text
    assert all(f"{v:.3f}" in seats_text for v in ep["rewards"].values())
    prompt = browser.find_element(By.CSS_SELECTOR, "details.prompt")
    assert not prompt.get_attribute("open")  # collapsed until clicked
    _shot(browser, "episode.png")


def test_model_text_is_shown_as_text_and_runs_nothing(browser: Any, scripted_site: tuple[Path, Server]) -> None:
    from selenium.common.exceptions import NoAlertPresentException
    from selenium.webdriver.common.by import By

    run, server = scripted_site
    browser.get(server.url + "/episode/episodes/step_000003.jsonl.gz/0")
    time.sleep(0.5)
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert  # noqa: B018 - the property raises when no alert is open
    completions = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "pre.completion")]
    assert XSS in completions
    assert not browser.find_elements(By.XPATH, "//script[contains(., 'alert')]")
    assert XSS in browser.find_element(By.ID, "actions").text or "invalid" in browser.find_element(By.ID, "actions").text


def test_curves_draw_every_metric_and_follow_the_run(browser: Any, scripted_site: tuple[Path, Server]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    run, server = scripted_site
    browser.get(server.url + "/curves")
    WebDriverWait(browser, 20).until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-steps") == "3")
    names = {c.get_attribute("data-metric") for c in browser.find_elements(By.CSS_SELECTOR, ".chart")}
    assert {"loss", "game/detection_accuracy", "reward/spy"} <= names
    _shot(browser, "curves.png")
    with open(run / "metrics.jsonl", "a") as f:  # the run goes on: the page picks the new step up
        f.write(json.dumps({"step": 4, "loss": 0.2, "new/metric": 1.5}) + "\n")
    WebDriverWait(browser, 20).until(lambda d: d.find_element(By.ID, "charts").get_attribute("data-steps") == "4")
    assert browser.find_elements(By.CSS_SELECTOR, ".chart[data-metric='new/metric']")


def test_tournament_page_shows_ratings_heatmap_and_cycles(browser: Any, scripted_site: tuple[Path, Server]) -> None:
    from selenium.webdriver.common.by import By

    run, server = scripted_site
    browser.get(server.url + "/tournaments")
    ratings = browser.find_element(By.CSS_SELECTOR, "table.ratings").text
    assert "step_4" in ratings and "55.50" in ratings and "90.00" in ratings
    cells = browser.find_elements(By.CSS_SELECTOR, "table.heatmap td")
    assert len(cells) == 9 and cells[3].text == "0.7"
    assert "base → bot → step_4 → base" in browser.find_element(By.CSS_SELECTOR, "ul.cycles").text
    _shot(browser, "tournament.png")


def test_only_the_play_routes_write_and_only_from_the_viewer(scripted_site: tuple[Path, Server]) -> None:
    import urllib.error
    import urllib.request

    run, server = scripted_site
    writers = {r.path for r in server.app.routes if (getattr(r, "methods", None) or set()) - {"GET", "HEAD"}}
    assert writers == {"/play", "/play/{sid}/reply"}
    form = b"config=run&seat=player_0&opponent=scripted%3Acopycat&seed=0"
    req = urllib.request.Request(server.url + "/play", data=form, headers={"Origin": "http://evil.example"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 403 and not server.app.state.host.sessions
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(server.url + "/", data=b"x"), timeout=10)
    assert err.value.code == 405


def test_cli_binds_loopback_and_prints_its_address(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import urllib.request

    from arena.core.errors import ConfigError
    from arena.view.__main__ import build_parser, make_server

    make_scripted_run(tmp_path, steps=1, games=1)
    args = build_parser().parse_args([str(tmp_path), "--port", "0"])
    assert args.host == "127.0.0.1"
    server = make_server(Path(args.run_dir), args.host, args.port)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.time() + 30
        while not server.started and time.time() < deadline:
            time.sleep(0.05)
        line = capsys.readouterr().out
        assert line.startswith("arena view: http://127.0.0.1:"), line
        assert "spy_v1" in urllib.request.urlopen(line.split()[2], timeout=10).read().decode()
    finally:
        server.should_exit = True
        thread.join(timeout=10)
    with pytest.raises(ConfigError, match="run_dir: no such folder"):  # run_cli makes it exit 2 with one line
        make_server(tmp_path / "nope")


# ---------------------------------------------------------------- playing in the browser
def play_to_the_end(browser: Any, url: str, config: str, seat: str, opponent: str, timeout: float = 120) -> str:
    """Start a game on the play page, type every turn of ``seat``, return the saved episode's link."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    browser.get(f"{url}/play?config={config}")
    form = browser.find_element(By.ID, "start")
    Select(form.find_element(By.NAME, "seat")).select_by_value(seat)
    Select(form.find_element(By.NAME, "opponent")).select_by_value(opponent)
    _shot(browser, "play_form.png")
    form.submit()
    typed = 0

    def next_state(d: Any) -> str | bool:
        try:
            if d.find_elements(By.ID, "done"):
                return "done"
            if d.find_elements(By.ID, "error"):
                return "error"
            if d.find_elements(By.ID, "reply"):
                return "you"
        except StaleElementReferenceException:
            pass
        return False

    while True:
        state = WebDriverWait(browser, timeout).until(next_state)
        if state != "you":
            break
        if typed == 0:
            _shot(browser, "play.png")
        box = browser.find_element(By.ID, "reply")
        box.send_keys("I compared everything.\nAnswer: 42\n\\boxed{1}")
        typed += 1
        browser.find_element(By.ID, "send").click()
        WebDriverWait(browser, timeout).until(lambda d: f'data-turns="{typed}"' in d.page_source)
    assert state == "done", browser.find_element(By.ID, "error").text
    assert typed == 2  # SpyRL: the person performs, then votes
    _shot(browser, "play_done.png")
    return browser.find_element(By.ID, "episode-link").get_attribute("href")


def test_a_person_plays_spyrl_against_bots_and_the_game_is_saved(
    browser: Any, scripted_site: tuple[Path, Server]
) -> None:
    from selenium.webdriver.common.by import By

    run, server = scripted_site
    link = play_to_the_end(browser, server.url, "run", "player_1", "scripted:copycat", timeout=30)
    saved = [json.loads(line) for line in (run / "play" / "episodes.jsonl").read_text().splitlines()]
    mine = [t for t in saved[-1]["turns"] if t["seat"] == "player_1"]
    assert [t["policy"] for t in mine] == ["person", "person"] and mine[1]["action"] == "1"
    browser.get(link)
    assert "Answer: 42" in browser.find_element(By.ID, f"turn-{mine[0]['index']}").text
    browser.get(server.url + "/?source=play")
    assert len(browser.find_elements(By.CSS_SELECTOR, "#episodes tbody tr")) == len(saved)


# ---------------------------------------------------------------- a real (tiny) training run
@pytest.fixture(scope="module")
def trained_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Server]]:
    """One training step of SpyRL on the built-in model (3 players, 2 games, 8 new tokens)."""
    run = tmp_path_factory.mktemp("view-train") / "run"
    sets = [*TINY, "runner.num_envs=2", "train.games_per_step=2", "train.steps=1", "train.checkpoint_every=1",
            "train.plot=false", "train.schedule.stages=[[perform, vote]]"]
    cmd = [sys.executable, "-m", "arena.train", "games/spy/spy.yaml", *[a for s in sets for a in ("--set", s)],
           "--run-dir", str(run)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    server = Server(run)
    yield run, server
    server.stop()


@pytest.mark.slow
def test_training_saves_advantages_and_token_logprobs_the_episode_page_shows(
    browser: Any, trained_site: tuple[Path, Server]
) -> None:
    from selenium.webdriver.common.by import By

    run, server = trained_site
    rows = RunStore(run).rows()
    assert len(rows) == 2 and {r.step for r in rows} == {1}
    _, ep = RunStore(run).episode(rows[0].key)  # type: ignore[misc]
    trained = [t for t in ep["turns"] if t["advantage"] is not None]
    assert trained, "no turn carries the learner's advantage"
    assert all(len(t["tokens"]) == len(t["logprobs"]) > 0 for t in ep["turns"])
    browser.get(f"{server.url}/episode/{rows[0].key}")
    tokens = browser.find_elements(By.CSS_SELECTOR, "pre.tokens .tok")
    assert len(tokens) == sum(len(t["tokens"]) for t in ep["turns"])
    assert tokens[0].get_attribute("title").startswith("logprob -") or tokens[0].get_attribute("title") == "logprob 0.000"
    first = browser.find_element(By.ID, f"turn-{trained[0]['index']}").text
    assert f"advantage: {trained[0]['advantage']:.3f}" in first
    _shot(browser, "episode_trained.png")


@pytest.mark.slow
def test_a_person_plays_spyrl_to_the_end_against_the_built_in_model(
    browser: Any, trained_site: tuple[Path, Server]
) -> None:
    run, server = trained_site
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    browser.get(f"{server.url}/play?config=run")
    options = [o.get_attribute("value") for o in Select(browser.find_element(By.NAME, "opponent")).options]
    assert "learner" in options and "checkpoint:step_000001" in options
    play_to_the_end(browser, server.url, "run", "player_0", "learner", timeout=180)
    (saved,) = [json.loads(line) for line in (run / "play" / "episodes.jsonl").read_text().splitlines()]
    policies = {t["seat"]: t["policy"] for t in saved["turns"]}
    assert policies == {"player_0": "person", "player_1": "learner", "player_2": "learner"}
    assert all(t["completion_ids"] for t in saved["turns"] if t["policy"] == "learner")  # the model really generated


def test_token_colours_and_auso_weights_render_escaped(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from arena.view.app import create_app

    turn = _turn(0, "p0", "x", [1], [5, 6]).model_copy(update={"completion": "<b>hi"})
    ep = Episode(episode_id="e", game="g_v0", turns=[turn], roles={"p0": "r"})
    s = Sample(prompt_ids=[1], completion_ids=[5, 6], advantage=0.5, phase="x", token_weights=[0.2, 1.8])

    class Tok:
        @staticmethod
        def batch_decode(ids: list[list[int]]) -> list[str]:
            return [{5: "<b>", 6: "hi"}[i[0]] for i in ids]

    EpisodeLog(tmp_path, 1.0, Tok(), "me").write(1, [ep], [s])
    c = TestClient(create_app(tmp_path), base_url="http://127.0.0.1")
    html = c.get("/episode/episodes/step_000001.jsonl.gz/0").text
    assert 'title="logprob -0.500 · weight 0.200">&lt;b&gt;</span>' in html and "<b>hi" not in html
    assert 'value="w"' in html and "advantage: <b>0.500</b>" in html
