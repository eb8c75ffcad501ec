"""Several trainable policies in one run (issue #36): one learner per policy, each trained on its own seats'
turns only, checkpointed and resumed exactly, with one-line errors for what cannot work.

Kuhn poker with ``kuhn.players.yaml`` (one policy per player) on a random 2-layer model with SmolLM2's
tokenizer (``tiny_model_dir``): real games, real updates, seconds per step.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch

import arena.loop.trainer as trainer_module
from arena.core.errors import ConfigError
from arena.loop.config import load_config
from arena.loop.trainer import Trainer, seed_everything

CONFIG = "games/openspiel/kuhn.players.yaml"


def sets(model: Path, *extra: str) -> list[str]:
    out = []
    for name in ("p0", "p1"):
        out += [f"policies.{name}.model={model}", f"policies.{name}.sampling.max_new_tokens=4"]
    return out + ["train.games_per_step=4", "runner.num_envs=4", "runner.progress=false", "train.evals=[]",
                  "train.plot=false", "train.steps=2", "train.checkpoint_every=1", "learner.lr=1e-2", *extra]


def make(model: Path, run: Path, *extra: str, resume: bool = False) -> Trainer:
    cfg = load_config(CONFIG, sets(model, *extra))
    seed_everything(cfg.train.seed)
    return Trainer(cfg, run, resume=run if resume else None)


def weights(trainer: Trainer, name: str) -> dict[str, torch.Tensor]:
    unit = next(u for u in trainer.trained if u.name == name)
    return {k: v.detach().clone() for k, v in unit.learner.module.state_dict().items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def perturbed(episodes: list, policy: str) -> list:
    """The episodes with every turn of ``policy`` changed: other tokens, the opposite reward and return."""
    out = copy.deepcopy(episodes)
    for ep in out:
        for turn in ep.turns:
            if turn.policy == policy:
                turn.completion_ids = [(i + 7) % 1000 for i in turn.completion_ids]
                turn.reward = -turn.reward - 1.0
                ep.rewards[turn.seat] = -ep.rewards[turn.seat] - 1.0
    return out


def step_on(model: Path, run: Path, episodes: list) -> Trainer:
    """A fresh run's first step, trained on ``episodes`` instead of the games it would play."""
    trainer = make(model, run)
    trainer.play_step = lambda step: (episodes, {"gen/tokens": 0.0, "time/play_s": 0.0})  # type: ignore[method-assign]
    trainer.train_step()
    return trainer


def test_each_policy_learns_from_its_own_seats_only(tiny_model_dir: Path, tmp_path: Path, monkeypatch) -> None:
    """Perturbing p1's turns changes p1's update and leaves p0's bit-identical; a planted cross-over (p0's
    samples built from every trainable turn) makes p0 depend on p1's turns, which the same check sees."""
    torch.set_num_threads(1)
    episodes, _ = make(tiny_model_dir, tmp_path / "play").play_step(2)  # step 2's games give both policies samples
    assert {t.policy for ep in episodes for t in ep.turns} == {"p0", "p1"}
    start = weights(make(tiny_model_dir, tmp_path / "start"), "p0")
    a = step_on(tiny_model_dir, tmp_path / "a", episodes)
    b = step_on(tiny_model_dir, tmp_path / "b", perturbed(episodes, "p1"))
    assert not same(weights(a, "p0"), start), "p0 trained nothing: the isolation check would be empty"
    assert same(weights(a, "p0"), weights(b, "p0")), "p0's update depends on p1's turns"
    assert not same(weights(a, "p1"), weights(b, "p1")), "the perturbation did not reach p1's own update"
    assert a.trained[0].learner.module is not a.trained[1].learner.module

    # The planted bug: each policy's samples built from both policies' turns.
    real = trainer_module.build_samples

    def crossed(episodes, phases, cfg, states, policy):
        for ep in episodes:
            for turn in ep.turns:
                turn.policy = policy if turn.policy in ("p0", "p1") else turn.policy
        return real(episodes, phases, cfg, states, policy)

    monkeypatch.setattr(trainer_module, "build_samples", crossed)
    c = step_on(tiny_model_dir, tmp_path / "c", copy.deepcopy(episodes))
    d = step_on(tiny_model_dir, tmp_path / "d", perturbed(episodes, "p1"))
    assert not same(weights(c, "p0"), weights(d, "p0")), "the isolation check misses a cross-over"


def test_two_policies_resume_exactly(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Two steps straight equal one step, a kill and a resume: both policies' weights, optimizer states and
    logged rows, bit for bit; the checkpoint holds the second policy under policies/p1/."""
    torch.set_num_threads(1)
    straight = make(tiny_model_dir, tmp_path / "straight")
    straight.run()
    make(tiny_model_dir, tmp_path / "resumed").run(max_steps=1)
    ckpt = tmp_path / "resumed" / "checkpoints" / "step_000001"
    assert (ckpt / "policies" / "p1" / "model").is_dir() and (ckpt / "policies" / "p1" / "optimizer.pt").is_file()
    resumed = make(tiny_model_dir, tmp_path / "resumed", resume=True)
    resumed.run()
    for name in ("p0", "p1"):
        assert same(weights(straight, name), weights(resumed, name)), name
        unit_s = next(u for u in straight.trained if u.name == name)
        unit_r = next(u for u in resumed.trained if u.name == name)
        for x, y in zip(unit_s.learner.optimizer.state.values(), unit_r.learner.optimizer.state.values(), strict=True):
            assert all(torch.equal(x[k], y[k]) for k in x), name

    def rows(run: Path) -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if not k.startswith(("time/", "gen/tokens_per_s"))}
                for line in (run / "metrics.jsonl").read_text().splitlines()]

    got, want = rows(tmp_path / "resumed"), rows(tmp_path / "straight")
    assert got == want
    assert {"p0/samples", "p1/samples", "p0/loss", "p1/loss"} <= set(want[-1]) and "loss" not in want[-1]
    assert want[-1]["p0/samples"] > 0 and want[-1]["p1/samples"] > 0


def test_bad_configs_of_several_policies_are_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    base = sets(tiny_model_dir)
    cfg = load_config(CONFIG, [*base, "seats={'*': p0, 'player_1': p1}"])  # a config to evaluate, not to train
    with pytest.raises(ConfigError, match=r"policies.p1: trainable, but no seat plays it .*player_0, player_1"):
        Trainer(cfg, tmp_path / "unseated")
    with pytest.raises(ConfigError, match=r"policies.p1.learner: only a trainable policy has a learner"):
        load_config(CONFIG, [*base, "policies.p1.trainable=false", "policies.p1.learner={lr: 0.1}", "seats={'*': p0}"])
    with pytest.raises(ConfigError, match=r"policies.p1.learner.lrr: not a learner setting"):
        load_config(CONFIG, [*base, "policies.p1.learner={lrr: 0.1}"])
    with pytest.raises(ConfigError, match=r"policies.p1.learner.lr"):
        load_config(CONFIG, [*base, "policies.p1.learner={lr: -1}"])
    cfg = load_config(CONFIG, [*base, "train.league.enabled=true", "learner.lora={r: 4}", "policies.p1.backend=vllm"])
    with pytest.raises(ConfigError, match=r"p0, p1 are all trainable; a league of adapters on vLLM .* supports one "):
        Trainer(cfg, tmp_path / "league")
    bad = tmp_path / "twice.yaml"  # YAML would keep the last of two equal keys: a seat given two policies
    bad.write_text(Path(trainer_module.__file__).parents[1].joinpath("games/openspiel/kuhn.players.yaml").read_text()
                   .replace("  player_1: p1\n", "  player_1: p1\n  player_1: p0\n"))
    with pytest.raises(ConfigError, match=r"line \d+: seats: 'player_1' is given twice"):
        load_config(bad)


def test_a_policy_learns_with_its_own_settings(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``policies.p1.learner: {lr: 0}``-like changes reach p1's learner alone."""
    cfg = load_config(CONFIG, sets(tiny_model_dir, "policies.p1.learner={lr: 1.0e-9, beta: 0.0}"))
    assert cfg.learner_for("p1").lr == 1e-9 and cfg.learner_for("p0").lr == 1e-2
    trainer = Trainer(cfg, tmp_path / "run")
    lrs = {u.name: u.learner.optimizer.param_groups[0]["lr"] for u in trainer.trained}
    assert lrs["p1"] == pytest.approx(1e-9) and lrs["p0"] == pytest.approx(1e-2)


LEAGUE = ["train.league.enabled=true", "train.league.share=0.5", "train.league.sampler=uniform",
          "train.league.pool_size=1", "train.league.eval_every=3", "train.league.eval_games=2",
          "train.league.bootstrap=20", "train.steps=3", "train.keep_checkpoints=1"]


def test_a_league_of_two_policies_draws_each_seats_past_from_its_own_pool(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Each policy's checkpoints join its own pool (league/pool/<policy>/); every game gives one of the two
    trainable seats to a past member of the policy that owns that seat, never trained; the rated match
    seats each member in its own policy's seat; and a kill and --resume replays the league exactly."""
    torch.set_num_threads(1)
    straight = make(tiny_model_dir, tmp_path / "straight", *LEAGUE)
    straight.run()
    league = straight.feature("league")
    names = [m.name for m in league.members]
    assert names == ["p0/base", "p1/base", "p0/step_000003", "p1/step_000003"], names  # pool_size 1: the newest
    pool = tmp_path / "straight" / "league" / "pool"
    assert sorted(p.name for p in pool.iterdir()) == ["p0", "p1"]
    assert [p.name for p in (pool / "p1").iterdir()] == ["step_000003"]  # older members pruned with their checkpoints
    episodes, _ = straight.play_step(4)
    for ep in episodes:
        by_seat = {t.seat: t.policy for t in ep.turns}
        past = {s: p for s, p in by_seat.items() if p.startswith("league/")}
        assert len(past) == 1, by_seat  # share 0.5 of 2 trainable seats
        (seat, policy), = past.items()
        assert policy == {"player_0": "league/p0", "player_1": "league/p1"}[seat]
        assert by_seat[{"player_0": "player_1", "player_1": "player_0"}[seat]] in ("p0", "p1")
    assert {t.policy for ep in episodes for t in ep.turns} >= {"league/p0", "league/p1"}  # both pools drawn
    rows = [json.loads(line) for line in (tmp_path / "straight" / "metrics.jsonl").read_text().splitlines()]
    last = rows[-1]
    assert last["league/p0/opponent_turns"] + last["league/p1/opponent_turns"] > 0
    assert last["league/rated_games"] == 2 * len(names)
    assert last["league/rating_low"] <= last["league/rating"] <= last["league/rating_high"]

    make(tiny_model_dir, tmp_path / "resumed", *LEAGUE).run(max_steps=2)
    resumed = make(tiny_model_dir, tmp_path / "resumed", *LEAGUE, resume=True)
    resumed.run()
    for name in ("p0", "p1"):
        assert same(weights(straight, name), weights(resumed, name)), name

    def state(run: Path) -> dict:
        return json.loads((run / "checkpoints" / "step_000003" / "league" / "state.json").read_text())

    assert state(tmp_path / "resumed") == state(tmp_path / "straight")

    def league_rows(run: Path) -> list[dict]:
        return [{k: v for k, v in json.loads(line).items() if k.startswith("league/")}
                for line in (run / "metrics.jsonl").read_text().splitlines()]

    assert league_rows(tmp_path / "resumed") == league_rows(tmp_path / "straight")
