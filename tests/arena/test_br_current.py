"""``scripted:br:current`` (arena/games/openspiel/bots.py) and the trainer's responder (arena/loop/respond.py),
issue #34: the bot plays OpenSpiel's exact best response to the policy it is told to follow, the played policy
in free generation; the trainer recomputes it every ``train.respond_every`` steps, a resume meets the same
responder, and training against it lowers a tiny model's exploitability."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from open_spiel.python import policy as os_policy

from arena.core.errors import ConfigError
from arena.games.openspiel import OpenSpielGame
from arena.games.openspiel.bots import BOTS, FOLLOWED
from arena.games.openspiel.env import observe
from arena.games.openspiel.exact import best_response_table, played_policy
from arena.loop.config import load_config
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything

ROOT = Path(__file__).resolve().parents[2]
CONFIG = "games/openspiel/kuhn.br.yaml"
BET = {"0": 0.2, "0p": 0.3, "0b": 0.1, "0pb": 0.0, "1": 0.4, "1p": 0.5, "1b": 0.45, "1pb": 0.6,
       "2": 0.8, "2p": 0.9, "2b": 1.0, "2pb": 1.0}  # a hand-built policy: Bet probability per information state
MASS = 0.3  # the legal mass of the "free generation" policy below: 70% of its replies are invalid


def hand(queries):
    return [[1 - BET[q.observation.info_state], BET[q.observation.info_state]] for q in queries]


class Replies:
    """A free-generation policy: reply log-probabilities ``log(MASS * p_i)``, so the played policy is
    ``MASS * p + (1 - MASS) * uniform``."""

    def reply_logprobs(self, queries):
        return [[math.log(MASS * p) if p > 0 else -math.inf for p in row] for row in hand(queries)]

    def __call__(self, queries):
        return hand(queries)


def table(rows_of) -> os_policy.TabularPolicy:
    env = OpenSpielGame()
    t = os_policy.TabularPolicy(env.config.load())
    for row, state in enumerate(t.states):
        t.action_probability_array[row] = rows_of(state.information_state_string())
    return t


def bot_table(bot) -> np.ndarray:
    t = table(lambda key: [0.5, 0.5])
    for row, state in enumerate(t.states):
        obs = observe("kuhn_poker", state, state.current_player())
        t.action_probability_array[row] = bot.action_probs(obs)
    return t.action_probability_array


def test_br_current_is_the_best_response_to_the_policy_it_follows() -> None:
    env, bot = OpenSpielGame(), BOTS["br"].with_arg("current")
    assert bot.follows and not BOTS["br"].follows
    game = env.config.load()
    bot.follow(env, hand)  # probabilities only: the exact policy is the one played
    exact = table(lambda k: [1 - BET[k], BET[k]])
    assert (bot_table(bot) == best_response_table(game, exact).action_probability_array).all()
    bot.follow(env, Replies())  # free generation: the played policy, invalid replies on the uniform fallback
    played = table(lambda k: played_policy([math.log(MASS * p) if p > 0 else -math.inf for p in (1 - BET[k], BET[k])])[0])
    want = best_response_table(game, played).action_probability_array
    assert (bot_table(bot) == want).all()
    assert not (want == best_response_table(game, exact).action_probability_array).all()  # the two differ here
    saved = json.loads(json.dumps(bot.followed()))  # a checkpoint's responders.json, read back
    bot.follow(env, hand)
    bot.restore(saved)
    assert (bot_table(bot) == want).all()


def test_br_current_with_no_policy_to_follow_is_one_line() -> None:
    FOLLOWED.clear()
    obs = OpenSpielGame()
    obs.reset(seed=0)
    with pytest.raises(ConfigError, match="scripted:br:current responds to the trainable policy"):
        BOTS["br"].with_arg("current").action_probs(obs.observe(obs.agent_selection))
    out = subprocess.run([sys.executable, "-m", "arena.play", CONFIG, "--set", "seats={'*': 'scripted:br:current'}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert out.returncode == 2, out.stderr
    errors = [line for line in out.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and "scripted:br:current responds" in errors[0] and "Traceback" not in out.stderr


def sets(model: Path, *extra: str) -> list[str]:
    return [f"policies.learner.model={model}", "train.games_per_step=8", "runner.num_envs=8", "runner.progress=false",
            "train.plot=false", "train.checkpoint_every=1", "learner.lr=3e-3", *extra]


def make(model: Path, run: Path, *extra: str, resume: bool = False) -> Trainer:
    cfg = load_config(CONFIG, sets(model, *extra))
    seed_everything(cfg.train.seed)
    return Trainer(cfg, run, resume=run if resume else None)


def rows(run: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS}
            for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_training_against_the_current_best_response_lowers_exploitability(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Exploitability descent on a tiny random model: the model's own exact exploitability falls, and the
    responder (recomputed every step) is the best response to the generator's policy of that step."""
    torch.set_num_threads(1)
    trainer = make(tiny_model_dir, tmp_path / "run", "train.steps=6", "train.evals=[{name: x, kind: exact, every: 6}]")
    trainer.run()
    got = rows(tmp_path / "run")
    start, end = got[0]["eval/x/exploitability"], got[-1]["eval/x/exploitability"]
    assert end < start - 0.02, (start, end)
    assert all(r["league/opponent_turns"] > 0 for r in got[1:])  # the responder played in every step
    # the average policy: at step 0 it is the base model alone; at the end, the base's and step 6's average
    assert got[0]["eval/x/exploitability_average"] == pytest.approx(got[0]["eval/x/exploitability_played"], abs=1e-12)
    assert got[-1]["eval/x/exploitability_average"] != pytest.approx(got[-1]["eval/x/exploitability_played"])


def test_resume_meets_the_same_responder(tiny_model_dir: Path, tmp_path: Path) -> None:
    """respond_every 2: step 2 plays the responder computed before step 1; a run resumed after step 1 reads
    it from the checkpoint (responders/responders.json) and logs what the straight run logs."""
    torch.set_num_threads(1)
    extra = ("train.steps=2", "train.respond_every=2", "train.evals=[{name: x, kind: exact, every: 1}]")
    make(tiny_model_dir, tmp_path / "straight", *extra).run()
    make(tiny_model_dir, tmp_path / "resumed", *extra).run(max_steps=1)
    assert (tmp_path / "resumed/checkpoints/step_000001/responders/responders.json").is_file()
    make(tiny_model_dir, tmp_path / "resumed", *extra, resume=True).run()
    assert rows(tmp_path / "straight") == rows(tmp_path / "resumed")
