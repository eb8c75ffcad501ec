"""Several trainable policies as LoRA adapters on ONE base (``learner.lora.shared_base``, issue #36): one base
in memory for the learners and the generators, one named adapter per policy, each trained on its own
seats' turns, generating with its own adapter, checkpointed and resumed exactly.

Kuhn poker with ``kuhn.players.yaml`` (p0 and p1 on the same base) on a random 2-layer model with SmolLM2's
tokenizer (``tiny_model_dir``): real games, real updates, seconds per step.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from arena.core.errors import ConfigError
from arena.core.types import Sample
from arena.learners.adapters import PolicyAdapter
from arena.learners.lora import adapter_state_dict
from arena.loop.config import load_config
from arena.loop.trainer import Trainer
import test_several_policies as several
from test_several_policies import perturbed
from tolerance import LOGITS, apart, close32

CONFIG = "games/openspiel/kuhn.players.yaml"
LORA = "learner.lora={r: 4, alpha: 8.0}"


def sets(model: Path, *extra: str) -> list[str]:
    """tests/test_several_policies.py's run, with LoRA adapters and a larger learning rate."""
    return several.sets(model, "learner.lr=5e-2", LORA, *extra)


def make(model: Path, run: Path, *extra: str, resume: bool = False) -> Trainer:
    return several.make(model, run, "learner.lr=5e-2", LORA, *extra, resume=resume)


def unit(trainer: Trainer, name: str):
    return next(u for u in trainer.trained if u.name == name)


def adapter(trainer: Trainer, name: str) -> dict[str, torch.Tensor]:
    """Policy ``name``'s adapter weights (peft's names without the adapter's: equal across runs and layouts)."""
    return {k: v.detach().clone() for k, v in adapter_state_dict(unit(trainer, name).learner.module).items()}


def same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def held_bytes(trainer: Trainer) -> int:
    """Bytes of every distinct parameter the learners and the generators hold (a tensor held twice counts once)."""
    tensors = {}
    for u in trainer.trained:
        for module in (u.learner.module, u.generator.model):
            tensors |= {p.data_ptr(): p.numel() * p.element_size() for p in module.parameters()}
    return sum(tensors.values())


def step_on(model: Path, run: Path, episodes: list, *extra: str) -> Trainer:
    """A fresh run's first step, trained on ``episodes`` instead of the games it would play."""
    trainer = make(model, run, *extra)
    trainer.play_step = lambda step: (episodes, {"gen/tokens": 0.0, "time/play_s": 0.0})  # type: ignore[method-assign]
    trainer.train_step()
    return trainer


def test_one_base_holds_both_adapters(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Shared: both learners and both generators run on one base module; the parameters held are one base and
    two adapters, against two bases and two adapters with ``shared_base: false``. Each optimizer holds its
    own adapter's weights alone. With ``beta > 0`` the KL reference is the base without adapters: a frozen copy
    apart from the shared one, as with one policy."""
    torch.set_num_threads(1)
    shared = make(tiny_model_dir, tmp_path / "shared")
    copies = make(tiny_model_dir, tmp_path / "copies", "learner.lora.shared_base=false")
    p0, p1 = unit(shared, "p0"), unit(shared, "p1")
    assert isinstance(p0.learner.module, PolicyAdapter) and isinstance(p1.learner.module, PolicyAdapter)
    base = p0.learner.module.get_base_model()
    assert p1.learner.module.get_base_model() is base and p0.generator.model is base and p1.generator.model is base
    assert unit(copies, "p0").learner.module.get_base_model() is not unit(copies, "p1").learner.module.get_base_model()

    base_bytes = sum(p.numel() * p.element_size() for n, p in base.named_parameters() if "lora_" not in n)
    one_adapter = sum(v.numel() * v.element_size() for v in adapter_state_dict(p0.learner.module).values())
    assert one_adapter > 0 and held_bytes(shared) == base_bytes + 2 * one_adapter
    assert held_bytes(copies) == 2 * base_bytes + 2 * one_adapter
    for u in (p0, p1):
        optimized = {id(p) for group in u.learner.optimizer.param_groups for p in group["params"]}
        own = {id(p) for n, p in u.learner.module.peft.named_parameters() if f".{u.name}." in n and "lora_" in n}
        assert optimized == own and len(own) == len(adapter_state_dict(u.learner.module))

    kl = make(tiny_model_dir, tmp_path / "kl", "learner.beta=0.1")
    ref = unit(kl, "p0").learner.ref_model
    assert unit(kl, "p1").learner.ref_model is ref and ref is not unit(kl, "p0").learner.module.get_base_model()
    assert not any("lora_" in n for n, _ in ref.named_parameters())
    assert not any(p.requires_grad for p in ref.parameters())


def test_each_adapter_learns_from_its_own_seats_only(tiny_model_dir: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Perturbing p1's turns leaves p0's adapter bit-identical and changes p1's; p0's adapter moves in a step;
    a shared-base step equals two separate copies' step bit for bit. A planted bug (a learner that does not make
    its adapter active: p1's learner then trains the adapter active when it was built, p0's) makes p0's adapter
    depend on p1's turns, which the same check sees."""
    torch.set_num_threads(1)
    start = adapter(make(tiny_model_dir, tmp_path / "fresh"), "p0")
    episodes, _ = make(tiny_model_dir, tmp_path / "play").play_step(2)  # step 1: no p0 turn with a signal
    assert {t.policy for ep in episodes for t in ep.turns} == {"p0", "p1"}
    a = step_on(tiny_model_dir, tmp_path / "a", episodes)
    b = step_on(tiny_model_dir, tmp_path / "b", perturbed(episodes, "p1"))
    assert same(adapter(a, "p0"), adapter(b, "p0")), "p0's adapter depends on p1's turns"
    assert not same(adapter(a, "p1"), adapter(b, "p1")), "the perturbation did not reach p1's own adapter"
    assert not same(adapter(a, "p0"), start), "p0's adapter did not move in a step"
    copies = step_on(tiny_model_dir, tmp_path / "copies", episodes, "learner.lora.shared_base=false")
    for name in ("p0", "p1"):
        assert same(adapter(a, name), adapter(copies, name)), f"{name}: shared base and separate copies differ"

    monkeypatch.setattr(PolicyAdapter, "activate", lambda self: None)  # the planted bug
    c = step_on(tiny_model_dir, tmp_path / "c", episodes)
    d = step_on(tiny_model_dir, tmp_path / "d", perturbed(episodes, "p1"))
    assert not same(adapter(c, "p0"), adapter(d, "p0")), "the isolation check misses adapters left inactive"


def test_two_adapters_resume_exactly(tiny_model_dir: Path, tmp_path: Path) -> None:
    """Two steps straight equal one step, a kill and a resume: both adapters and both optimizer states, bit for
    bit. The checkpoint holds each policy's adapter alone, under its one-adapter layout (model/ for p0,
    policies/p1/model for p1)."""
    from safetensors.torch import load_file

    torch.set_num_threads(1)
    straight = make(tiny_model_dir, tmp_path / "straight")
    straight.run()
    make(tiny_model_dir, tmp_path / "resumed").run(max_steps=1)
    ckpt = tmp_path / "resumed" / "checkpoints" / "step_000001"
    for folder in (ckpt / "model", ckpt / "policies" / "p1" / "model"):
        keys = set(load_file(str(folder / "adapter_model.safetensors")))
        assert keys == set(adapter(straight, "p0")), folder  # no other policy's adapter, no adapter name in keys
    resumed = make(tiny_model_dir, tmp_path / "resumed", resume=True)
    resumed.run()
    for name in ("p0", "p1"):
        assert same(adapter(straight, name), adapter(resumed, name)), name
        opt_s, opt_r = unit(straight, name).learner.optimizer, unit(resumed, name).learner.optimizer
        assert len(opt_s.state) == len(opt_r.state) > 0
        for x, y in zip(opt_s.state.values(), opt_r.state.values(), strict=True):
            assert all(torch.equal(x[k], y[k]) for k in x), name
    assert not same(adapter(straight, "p0"), adapter(straight, "p1"))


def test_each_generator_runs_its_own_adapter(tiny_model_dir: Path, tmp_path: Path) -> None:
    """After training, p0's and p1's generators score the same turn differently, each as its own learner does
    (one model, the adapter switched per call, in either order); a saved adapter loads as its policy."""
    from arena.core.models import load_causal_lm
    from arena.policies.base import SamplingParams
    from arena.policies.hf import HFPolicy

    torch.set_num_threads(1)
    trainer = make(tiny_model_dir, tmp_path / "run")
    trainer.run()
    turn = next(t for ep in trainer.play_step(3)[0] for t in ep.turns if t.policy == "p0" and t.completion_ids)
    params = SamplingParams(temperature=1.0)
    p0, p1 = unit(trainer, "p0"), unit(trainer, "p1")
    gen = {u.name: u.generator.score(turn.prompt_ids, turn.completion_ids, params) for u in (p1, p0, p1)}
    row = Sample(prompt_ids=turn.prompt_ids, completion_ids=turn.completion_ids, advantage=0.0, phase="move")
    for u in (p0, p1):
        close32(torch.tensor(gen[u.name]), torch.tensor(u.learner.score([row])[0]), scale=LOGITS, msg=u.name)
    assert apart(gen["p0"], gen["p1"], 1e-4)
    saved = tmp_path / "run" / "checkpoints" / "step_000002"
    for name, folder in (("p0", saved / "model"), ("p1", saved / "policies" / "p1" / "model")):
        model, tokenizer = load_causal_lm(str(folder), dtype="float32", device="cpu")
        alone = HFPolicy(model, tokenizer=tokenizer, dtype="float32")
        got = alone.score(turn.prompt_ids, turn.completion_ids, params)
        close32(torch.tensor(got), torch.tensor(gen[name]), scale=LOGITS, msg=name)


def test_shared_base_config_errors_are_one_line(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``shared_base: true`` on adapters over different bases (or one on hf and one on vLLM), or on a generator
    whose dtype is not the learner's weights: one line before any model loads; ``auto`` gives such policies copies."""
    base = sets(tiny_model_dir)
    cfg = load_config(CONFIG, [*base, "learner.lora.shared_base=true", "policies.p1.dtype=bfloat16",
                               "policies.p1.learner={param_dtype: bfloat16}"])
    with pytest.raises(ConfigError, match=r"^learner.lora.shared_base: true asks adapters over different bases .*p0: "
                                          r".* float32 cpu, p1: .* bfloat16 cpu"):
        Trainer(cfg, tmp_path / "bases")
    cfg = load_config(CONFIG, [*base, "learner.lora.shared_base=true", "policies.p1.dtype=bfloat16"])
    with pytest.raises(ConfigError, match=r"^policies.p1: learner.lora.shared_base is true but its generator "
                                          r"\(bfloat16 on cpu\) differs from its learner's weights \(float32 on cpu\)"):
        Trainer(cfg, tmp_path / "dtype")
    cfg = load_config(CONFIG, [*base, "learner.lora.shared_base=true", "policies.p1.backend=vllm"])
    with pytest.raises(ConfigError, match=r"^learner.lora.shared_base: true asks adapters over different bases .*p0: "
                                          r".* float32 cpu, p1: .* float32 cpu vllm"):  # one hf, one vLLM
        Trainer(cfg, tmp_path / "vllm")
    with pytest.raises(ConfigError, match=r"learner.lora.shared_base"):
        load_config(CONFIG, [*base, "learner.lora.shared_base=sometimes"])
    auto = Trainer(load_config(CONFIG, [*base, "policies.p1.dtype=bfloat16"]), tmp_path / "auto")
    assert not isinstance(unit(auto, "p1").learner.module, PolicyAdapter)
    assert not isinstance(unit(auto, "p0").learner.module, PolicyAdapter)  # alone on its base
