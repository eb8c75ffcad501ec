"""True bf16 weights with an fp32 master copy (``learner.param_dtype: bfloat16``, torch backend).

Unit tests on a tiny randomly initialised Llama held in memory (fast): the weights are bf16,
AdamW steps fp32 master weights and keeps fp32 state, updates below bf16's resolution still
add up, micro-batches accumulate their gradients in fp32, the update follows the fp32 one, and
the learner's state carries the master for an exact resume. Then real training runs
(examples/sealed_bid.py on the tiny digit model of tests/forked_runs.py): a float32 hf
generator is synced from the bf16 learner and checked by the canary with the half-precision
bound, and a resumed run ends where the straight run does, to the bit.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.core.errors import ConfigError
from arena.core.types import Sample
from arena.loop.config import load_config
from arena.loop.plan import resolve_precision
from arena.loop.trainer import TIMING_KEYS, Trainer, seed_everything
from forked_runs import digit_model
from arena.learners.config import LearnerConfig
from arena.learners.update import Learner
from arena.policies.hardware import fast_bf16
from test_league import tiny_model  # noqa: F401  (the fixture: a 2-layer random model, SmolLM2's tokenizer)
from tolerance import close32

ROOT = Path(__file__).resolve().parents[2]
VOCAB = 64


def llama() -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    return LlamaForCausalLM(cfg).float()


def batch(n: int = 6) -> list[Sample]:
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(n):
        prompt = torch.randint(1, VOCAB, (5 + i % 3,), generator=g).tolist()
        completion = torch.randint(1, VOCAB, (3 + i % 4,), generator=g).tolist()
        out.append(Sample(prompt_ids=prompt, completion_ids=completion, logprobs=[-1.0] * len(completion),
                          advantage=(1.0 if i % 2 else -1.0) * (1 + i / 10)))
    return out


def learner(param_dtype: str = "bfloat16", **kw) -> Learner:
    cfg = LearnerConfig(lr=kw.pop("lr", 1e-3), beta=0.0, param_dtype=param_dtype, **kw)
    return Learner(llama(), cfg, pad_id=0)


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().float().flatten() for t in tensors])


def test_weights_are_bf16_and_adamw_steps_an_fp32_master() -> None:
    lr = learner()
    assert {p.dtype for p in lr.model.parameters()} == {torch.bfloat16}
    assert lr.master is not None and {m.dtype for m in lr.master} == {torch.float32}
    stats = lr.step(batch())
    assert stats["grad_norm"] > 0
    # The model holds the master rounded to bf16, exactly.
    for m, p in zip(lr.master, lr.model.parameters(), strict=True):
        assert torch.equal(m.to(torch.bfloat16), p.detach())
        assert p.grad is None and m.grad is None
    state = lr.optimizer.state[lr.master[0]]
    assert state["exp_avg"].dtype == state["exp_avg_sq"].dtype == torch.float32


def test_updates_below_bf16_resolution_add_up_in_the_master() -> None:
    lr = learner(lr=1e-6, grad_clip=1e9)
    start_master, start_model = flat(lr.master), flat(lr.model.parameters())
    lr.step(batch())
    moved_master = (flat(lr.master) != start_master).float().mean()
    moved_model = (flat(lr.model.parameters()) != start_model).float().mean()
    # Adam's first step moves every weight by about lr; bf16 has 8 bits of mantissa, so most
    # weights (|w| >> 2**8 * 1e-6) cannot show it yet, while the master keeps all of it.
    assert moved_master > 0.95 and moved_model < 0.2, (float(moved_master), float(moved_model))
    plain = learner("float32", lr=1e-6, grad_clip=1e9)
    plain.step(batch())
    close32(flat(lr.master), flat(plain.model.parameters()), msg="the master tracks fp32")


def _master_gradient(token_budget: int) -> torch.Tensor:
    lr = learner(token_budget=token_budget)
    grads: list[torch.Tensor] = []
    lr._optimizer_step = lambda: grads.append(flat(m.grad for m in lr.master)) or 0.0  # type: ignore[method-assign]
    lr.step(batch())
    return grads[0]


def test_micro_batches_accumulate_the_gradient_in_fp32() -> None:
    whole, split = _master_gradient(10_000), _master_gradient(8)
    assert whole.dtype == torch.float32
    # Each micro-batch's bf16 backward differs from the whole batch's by bf16 rounding only.
    rel = float((whole - split).norm() / whole.norm())
    assert 0 < rel < 1e-2, rel  # not 0: the split really ran other bf16 passes


def test_a_backward_pass_outside_the_update_keeps_its_gradients() -> None:
    """learner.whiten's sketches run their own backward passes and read each weight's .grad: with bf16 weights
    those gradients stay on the weights (the sketches are not zero) and never reach the master's."""
    from arena.learners.whiten import WhitenConfig, whitened

    lr = learner()
    _, _, sketcher = whitened(lr.module, batch(), WhitenConfig(), lr.temperature)
    assert sketcher is not None and all(float(v.abs().sum()) > 0 for _, v in sketcher.kept.values())
    assert all(m.grad is None for m in lr.master)


def test_the_bf16_update_follows_the_fp32_update() -> None:
    bf, fp = learner(), learner("float32")
    start = flat(fp.model.parameters())
    bf.step(batch())
    fp.step(batch())
    delta_bf, delta_fp = flat(bf.master) - start, flat(fp.model.parameters()) - start
    assert torch.nn.functional.cosine_similarity(delta_bf, delta_fp, dim=0) > 0.98


def test_the_learner_state_carries_the_master_for_an_exact_resume() -> None:
    straight = learner()
    for _ in range(2):
        straight.step(batch())
    first = learner()
    first.step(batch())
    saved_model = {k: v.clone() for k, v in first.model.state_dict().items()}  # bf16, as save_pretrained writes
    saved = first.state_dict()
    assert [m.dtype for m in saved["master"]] == [torch.float32] * len(first.master)
    # A new process: the checkpoint's (bf16) model loaded in float32, then the learner's state.
    model = llama()
    model.load_state_dict({k: v.float() for k, v in saved_model.items()})
    resumed = Learner(model, straight.cfg, pad_id=0)
    resumed.load_state_dict(saved)
    resumed.step(batch())
    assert torch.equal(flat(resumed.master), flat(straight.master))
    assert torch.equal(flat(resumed.model.parameters()), flat(straight.model.parameters()))


def test_precision_settings_resolve_and_conflicts_are_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ARENA_AUTO_DTYPE", raising=False)  # the hardware's own choice (tests/conftest.py pins it)
    gpu = resolve_precision(LearnerConfig(param_dtype="auto", autocast_bf16="auto", device="cuda"))
    assert (gpu.param_dtype, gpu.autocast_bf16) == ("bfloat16", False)
    cpu = resolve_precision(LearnerConfig(param_dtype="auto", autocast_bf16="auto"))
    assert cpu.param_dtype == ("bfloat16" if fast_bf16("cpu") else "float32") and cpu.autocast_bf16 is False
    fp32_weights = resolve_precision(LearnerConfig(autocast_bf16="auto", device="cuda"))
    assert (fp32_weights.param_dtype, fp32_weights.autocast_bf16) == ("float32", True)
    with pytest.raises(ConfigError, match="learner.param_dtype: .*learner.deepspeed.bf16: true"):
        load_config(ROOT / "examples/sealed_bid.yaml", ["learner.backend=deepspeed", "learner.param_dtype=bfloat16"])
    with pytest.raises(ConfigError, match="learner.autocast_bf16: autocast over weights that are bf16 already"):
        load_config(ROOT / "examples/sealed_bid.yaml", ["learner.param_dtype=bfloat16", "learner.autocast_bf16=true"])
    with pytest.raises(ConfigError, match="learner.param_dtype"):
        load_config(ROOT / "examples/sealed_bid.yaml", ["learner.param_dtype=fp8"])


# ------------------------------------------------------------------ real training runs
SETS = [
    "policies.learner.sampling.max_new_tokens=4", "policies.learner.backend=hf", "policies.learner.dtype=float32",
    "game.max_bid=10000", "train.games_per_step=2", "train.steps=3", "train.checkpoint_every=1",
    "train.keep_checkpoints=3", "train.plot=false", "learner.lr=1e-3", "runner.progress=false",
    "learner.param_dtype=bfloat16", "train.canary.max_gap=auto",
]


@pytest.fixture(scope="module")
def digits(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    return digit_model(tiny_model, tmp_path_factory.mktemp("digits") / "model")


def train(model: Path, run: Path, max_steps: int | None = None, resume: bool = False) -> Trainer:
    cfg = load_config(ROOT / "examples/sealed_bid.yaml", [f"policies.learner.model={model}", *SETS])
    seed_everything(cfg.train.seed)
    trainer = Trainer(cfg, run, resume=run if resume else None)
    trainer.run(max_steps)
    return trainer


def rows(run: Path) -> list[dict]:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [{k: v for k, v in json.loads(line).items() if k not in TIMING_KEYS} for line in lines]


def test_a_bf16_run_syncs_an_fp32_generator_and_resumes_exactly(digits: Path, tmp_path: Path) -> None:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matmuls run faster on one thread of a shared 2-core box
    try:
        straight = train(digits, tmp_path / "straight")
        train(digits, tmp_path / "resumed", max_steps=1)
        resumed = train(digits, tmp_path / "resumed", resume=True)
    finally:
        torch.set_num_threads(threads)
    assert straight.generator.model is not straight.learner.module  # type: ignore[attr-defined]
    assert next(straight.generator.model.parameters()).dtype == torch.float32  # type: ignore[attr-defined]
    assert next(straight.learner.module.parameters()).dtype == torch.bfloat16
    assert straight.feature("canary").bounds["learner"] == pytest.approx(0.15), "a bf16 side gets the half-precision bound"
    got = rows(tmp_path / "straight")
    assert [r["step"] for r in got] == [1, 2, 3]
    trained = [r for r in got if r["samples"] > 0]
    assert len(trained) >= 2 and all(r["grad_norm"] > 0 for r in trained), got
    # The generator really carries the learner's weights: the canary gap is bf16 rounding, not a stale step.
    gaps = [r["sync/canary_gap"] for r in trained]
    assert all(0 < g < 0.15 for g in gaps), gaps
    for (name, g), b in zip(straight.generator.model.state_dict().items(),  # type: ignore[attr-defined]
                            straight.learner.module.state_dict().values(), strict=True):
        assert torch.equal(g, b.float()), name
    assert rows(tmp_path / "resumed") == got
    assert torch.equal(flat(resumed.learner.master), flat(straight.learner.master))


@pytest.mark.parametrize("tied", [False, True])
def test_gradients_move_into_the_master_during_backward_with_the_same_sums(tied: bool) -> None:
    """Issue #54: each bf16 gradient is added into its fp32 master's as backward makes it (a hook), so the model's
    bf16 gradients are never all held beside the fp32 ones. The master after two steps of three micro-batches is
    the one moving them after backward gives (the hooks removed), to the bit, with a tied embedding too (one
    AccumulateGrad for both of its uses)."""
    def make() -> Learner:
        model = llama()
        if tied:
            model.lm_head.weight = model.model.embed_tokens.weight
        cfg = LearnerConfig(lr=1e-3, beta=0.0, param_dtype="bfloat16", token_budget=24)
        return Learner(model, cfg, pad_id=0)

    hooked, after = make(), make()
    for handle in after._master_hooks:
        handle.remove()
    seen: list[int] = []
    for p in hooked._trained():  # registered after the learner's: sees each bf16 gradient once it has moved
        p.register_post_accumulate_grad_hook(lambda q: seen.append(int(q.grad is not None)))
    for _ in range(2):
        hooked.step(batch())
        after.step(batch())
    assert seen and not any(seen)  # moved and dropped inside backward
    assert torch.equal(flat(hooked.master), flat(after.master))
    assert torch.equal(flat(hooked.model.parameters()), flat(after.model.parameters()))
