"""Training against ``scripted:br:current`` (arena/loop/components/respond.py), issue #34: the trainer recomputes the
responder every ``train.respond.every`` steps, a resume meets the same responder (its table is in the
checkpoint), the average policy is logged, and training against the responder lowers a tiny model's
exploitability (``kuhn.br.yaml`` on a random 2-layer model with SmolLM2's tokenizer: seconds a step)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.loop.config import load_config
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything
from tolerance import approx64

CONFIG = "games/openspiel/kuhn.br.yaml"


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
    assert got[0]["eval/x/exploitability_average"] == approx64(got[0]["eval/x/exploitability_played"])
    assert got[-1]["eval/x/exploitability_average"] != pytest.approx(got[-1]["eval/x/exploitability_played"])


def test_resume_meets_the_same_responder(tiny_model_dir: Path, tmp_path: Path) -> None:
    """respond_every 2: step 2 plays the responder computed before step 1; a run resumed after step 1 reads
    it from the checkpoint (responders/responders.json) and logs what the straight run logs."""
    torch.set_num_threads(1)
    extra = ("train.steps=2", "train.respond.every=2", "train.evals=[{name: x, kind: exact, every: 1}]")
    make(tiny_model_dir, tmp_path / "straight", *extra).run()
    make(tiny_model_dir, tmp_path / "resumed", *extra).run(max_steps=1)
    assert (tmp_path / "resumed/checkpoints/step_000001/responders/responders.json").is_file()
    make(tiny_model_dir, tmp_path / "resumed", *extra, resume=True).run()
    assert rows(tmp_path / "straight") == rows(tmp_path / "resumed")


def test_eval_prints_the_played_policy(tiny_model_dir: Path, tmp_path: Path, capsys) -> None:
    """``arena.eval exploitability --policy``: the played policy per information state, whose exploitability
    (OpenSpiel's, recomputed here from the printed table) is the reported exploitability_played."""
    import pyspiel
    from open_spiel.python import policy as os_policy
    from open_spiel.python.algorithms import exploitability

    from arena.rank.exploitability import main

    out = tmp_path / "x.json"
    assert main([CONFIG, "--set", f"policies.learner.model={tiny_model_dir}", "--policy", "--json", str(out)]) == 0
    assert "played policy (information state: action probabilities)" in capsys.readouterr().out
    got = json.loads(out.read_text())
    game = pyspiel.load_game("kuhn_poker")
    table = os_policy.TabularPolicy(game)
    assert sorted(got["played_policy"]) == sorted(table.state_lookup)
    for key, row in table.state_lookup.items():
        table.action_probability_array[row] = [got["played_policy"][key]["Pass"], got["played_policy"][key]["Bet"]]
    assert exploitability.exploitability(game, table) == approx64(got["values"]["exploitability_played"])
