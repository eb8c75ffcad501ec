"""The warm start (arena/loop/components/warm_start.py): config errors, demonstrations, exact resume.

The model is tests/test_league.py's randomly initialised 2-layer model with SmolLM2's real
tokenizer, so the token checks are on the built-in tokenizer and the runs take seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from arena.core.errors import ConfigError
from arena.core.types import Episode, Turn, write_jsonl
from arena.loop.config import load_config
from arena.loop.components.warm_start import batch_indices, demonstrations, episode_turns, play_bots, read_pairs, tokenize
from arena.policies.base import chat_prompt_ids
from test_league import tiny_model  # noqa: F401  (the fixture)

ROOT = Path(__file__).resolve().parents[1]
SPY = ROOT / "arena/games/spy/spy.yaml"
SETS = [
    "policies.learner.backend=hf", "policies.learner.dtype=float32", "policies.learner.sampling.max_new_tokens=256",
    "learner.param_dtype=float32", "runner.num_envs=2", "runner.progress=false", "train.games_per_step=2",
    "train.steps=1", "train.plot=false", "train.loggers=[]", "train.episodes.save=false",
    "train.canary.max_gap=null",
]
BOTS = "train.warm_start={source: bots, games: 3, batch_size: 4, steps: 4, checkpoint_every: 2, lr: 1.0e-3}"


@pytest.mark.parametrize(("value", "says"), [
    ("{source: bot}", "train.warm_start: source: must be one of bots, episodes, pairs (got 'bot')"),
    ("{source: bots, lr: 0}", "train.warm_start: lr: Input should be greater than 0 (got 0)"),
    ("{source: bots, bots: {'*': nope}}", "train.warm_start.bots.*: unknown bot 'nope' for SpyGame"),
    ("{source: bots, phases: [bid]}", "train.warm_start.phases: the game has no phase 'bid'"),
    ("{source: episodes, path: /no/such.jsonl}", "train.warm_start.path: no such file '/no/such.jsonl'"),
    ("{source: pairs}", "train.warm_start: path: Field required"),
    ("{source: bots, gmaes: 3}", "train.warm_start: gmaes: unknown key"),
    ("{source: bots, game: {n_players: 99}}", "train.warm_start.game.n_players: Input should be less than or equal"),
])
def test_config_errors_are_one_line(value: str, says: str) -> None:
    with pytest.raises(ConfigError) as e:
        load_config(SPY, [f"train.warm_start={value}"])
    assert says in str(e.value) and "\n" not in str(e.value)


def test_the_cli_exits_2_with_one_line() -> None:
    out = subprocess.run([sys.executable, "-m", "arena.train", str(SPY), "--set", "train.warm_start={source: bots, epochs: -1}"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().count("\n") == 0, out.stderr
    assert "train.warm_start: epochs: Input should be greater than 0 (got -1)" in out.stderr


def test_the_demonstrations_are_exactly_the_bots_completions(tiny_model: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    cfg = load_config(SPY, [*SETS, BOTS, "seats={'player_0': learner, '*': 'scripted:default'}"])
    samples, stats = demonstrations(cfg, tok, None)
    episodes = play_bots(cfg, cfg.train.warm_start)  # the same seeded games, again
    turns = [t for ep in episodes for t in ep.turns if t.seat == "player_0" and t.valid]  # the learner's seat only
    assert stats["episodes"] == 3 and len(samples) == len(turns) == stats["demos"] > 0
    for s, t in zip(samples, turns, strict=True):
        assert s.completion_ids[-1] == tok.eos_token_id == tok.convert_tokens_to_ids("<|im_end|>")
        assert tok.decode(s.completion_ids[:-1]) == t.completion  # the bot's text, token for token
        assert s.completion_ids[:-1] == tok.encode(t.completion, add_special_tokens=False)
        assert s.prompt_ids == chat_prompt_ids(tok, t.messages)
        assert tok.decode(s.prompt_ids).endswith("<|im_start|>assistant\n")
        assert (s.phase, s.role, s.advantage) == (t.phase, t.role, 1.0)


def test_a_written_start_is_in_the_prompt_and_not_repeated_in_the_completion(tiny_model: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    messages = [{"role": "user", "content": "Write a task."}, {"role": "assistant", "content": '{"task": "', "continue_final": True}]
    prompt, completion = tokenize(tok, messages, '{"task": "Add 2 and 3.", "contract": {"answer": 5}}', True)
    assert tok.decode(prompt).endswith('<|im_start|>assistant\n{"task": "')
    assert tok.decode(completion) == 'Add 2 and 3.", "contract": {"answer": 5}}<|im_end|>'
    _, kept = tokenize(tok, messages, "Here it is.", False)  # a reply that does not repeat the start: as written
    assert tok.decode(kept) == "Here it is."


def _turn(seat: str, role: str, text: str, valid: bool = True, finish: str | None = None) -> Turn:
    return Turn(index=0, seat=seat, role=role, phase="act", messages=[{"role": "user", "content": f"to {seat}"}],
                completion=text, valid=valid, finish_reason=finish)


def test_episodes_are_filtered_by_reward_per_role_or_seat(tmp_path: Path) -> None:
    ep = Episode(episode_id="e", game="g", turns=[_turn("a_0", "solver", "A"), _turn("a_1", "solver", "B"),
                 _turn("p", "proposer", "C"), _turn("a_0", "solver", "bad", valid=False), _turn("q", "other", "D", finish="length")],
                 rewards={"a_0": 1.0, "a_1": 0.0, "p": -1.0, "q": -5.0})
    cfg = load_config(SPY, [f"train.warm_start={{source: bots, min_reward: {{solver: 0.5, 'p*': 0}}}}"])
    got = episode_turns([ep], cfg.train.warm_start, ["*"])
    assert [(c, ends) for _, c, _, _, ends in got] == [("A", True), ("D", False)]  # q matches no threshold: kept
    cfg = load_config(SPY, ["train.warm_start={source: bots, min_reward: -1, valid_only: false}"])
    assert [c for _, c, *_ in episode_turns([ep], cfg.train.warm_start, ["a_*"])] == ["A", "B", "bad"]


def test_pairs_read_messages_or_a_text_prompt(tmp_path: Path) -> None:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}],
                                "completion": "c1"}) + "\n\n" + json.dumps({"prompt": "p", "completion": "c2"}) + "\n")
    rows = read_pairs(str(path))
    assert [(m, c) for m, c, *_ in rows] == [([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}], "c1"),
                                            ([{"role": "user", "content": "p"}], "c2")]
    path.write_text(json.dumps({"prompt": "p"}) + "\n")
    with pytest.raises(ConfigError, match=r"pairs.jsonl:1: expected"):
        read_pairs(str(path))


def test_batches_walk_seeded_permutations_epoch_after_epoch() -> None:
    seen = [i for k in range(1, 6) for i in batch_indices(7, 3, k, seed=0)]  # 15 = two epochs and one more
    assert sorted(seen[:7]) == sorted(seen[7:14]) == list(range(7)) and seen[:7] != seen[7:14]
    assert batch_indices(7, 3, 4, seed=0) == seen[9:12] and batch_indices(7, 3, 4, seed=1) != seen[9:12]


def _weights(run: Path) -> dict[str, torch.Tensor]:
    from transformers import AutoModelForCausalLM

    from arena.loop.checkpoint import find_checkpoint

    return AutoModelForCausalLM.from_pretrained(find_checkpoint(run) / "model").state_dict()


def test_an_interrupted_warm_start_resumes_to_the_same_weights(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    from arena.loop.trainer import Trainer, seed_everything

    sets = [*SETS, BOTS, f"policies.learner.model={tiny_model}"]
    cfg = load_config(SPY, sets)
    seed_everything(0)
    whole = Trainer(cfg, tmp_path / "whole")
    whole.feature("warm_start").run(whole)
    assert whole.feature("warm_start").done and not whole.learner.optimizer.state  # moments cleared for self-play
    rows = [json.loads(r) for r in (tmp_path / "whole/warm_start.jsonl").read_text().splitlines()]
    assert [r["warm_step"] for r in rows] == [1, 2, 3, 4] and rows[-1]["nll"] < rows[0]["nll"]
    seed_everything(0)
    cut = Trainer(cfg, tmp_path / "cut")
    cut.feature("warm_start").run(cut, until=3)  # checkpoint at step 2; step 3 is lost with the process
    del cut
    seed_everything(0)
    resumed = Trainer(cfg, tmp_path / "cut", resume=tmp_path / "cut")
    assert resumed.feature("warm_start").step == 2 and not resumed.feature("warm_start").done
    resumed.feature("warm_start").run(resumed)
    a, b = _weights(tmp_path / "whole"), _weights(tmp_path / "cut")
    assert all(torch.equal(a[k], b[k]) for k in a)
    before = Trainer(cfg, tmp_path / "fresh").learner.module.state_dict()
    assert not all(torch.equal(before[k], a[k]) for k in a)  # the warm start moved the weights
    again = [json.loads(r) for r in (tmp_path / "cut/warm_start.jsonl").read_text().splitlines()]
    assert [r["warm_step"] for r in again] == [1, 2, 3, 4] and again[-1]["nll"] == rows[-1]["nll"]


def test_episodes_written_by_a_run_are_a_source(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    cfg = load_config(SPY, [*SETS, BOTS])
    episodes = play_bots(cfg, cfg.train.warm_start)
    write_jsonl(episodes, tmp_path / "eps.jsonl.gz")
    ecfg = load_config(SPY, [*SETS, f"train.warm_start={{source: episodes, path: {tmp_path / 'eps.jsonl.gz'}}}"])
    tok = AutoTokenizer.from_pretrained(tiny_model)
    from_file, _ = demonstrations(ecfg, tok, None)
    from_bots, _ = demonstrations(cfg, tok, None)
    assert [s.completion_ids for s in from_file] == [s.completion_ids for s in from_bots] and from_file


def test_a_demonstration_the_policy_could_not_write_is_left_out(tiny_model: Path) -> None:  # noqa: F811
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model)
    cfg = load_config(SPY, [*SETS, BOTS])
    kept, stats = demonstrations(cfg, tok, None)
    longest = max(len(s.completion_ids) for s in kept)
    short = load_config(SPY, [*SETS, BOTS, f"policies.learner.sampling.max_new_tokens={longest - 1}"])
    fewer, cut = demonstrations(short, tok, None)
    assert cut["too_long"] == sum(len(s.completion_ids) == longest for s in kept) > 0 == stats["too_long"]
    assert len(fewer) == len(kept) - cut["too_long"]


def test_a_warm_start_alone_from_the_cli_exits_0_with_its_checkpoint(tiny_model: Path, tmp_path: Path) -> None:  # noqa: F811
    """``--max-steps 0`` runs the warm start and stops: no self-play step, so no metrics.jsonl to plot (the
    plot is on by default; it once raised FileNotFoundError here)."""
    import subprocess
    import sys

    sets = [s for s in SETS if s != "train.plot=false"] + [BOTS.replace("steps: 4", "steps: 1"),
                                                           f"policies.learner.model={tiny_model}"]
    argv = [sys.executable, "-m", "arena.train", str(SPY), "--max-steps", "0", "--run-dir", str(tmp_path / "run")]
    for item in sets:
        argv += ["--set", item]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
    assert (tmp_path / "run" / "checkpoints" / "step_000000").is_dir()
    assert not (tmp_path / "run" / "metrics.jsonl").exists()
