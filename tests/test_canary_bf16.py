"""The weight-sync canary with a bfloat16 generator and a float32 learner, on every host (issue #28).

A bf16 copy of fp32 weights is their rounding to nearest even. The built-in model is a
dequantised Q4_1 GGUF, and 8.1% of its weights lie exactly halfway between two bf16 values
(bench/RESULTS.md): the first fp32 update, however small, settles each of those ties in the
gradient's direction, so a CORRECT bf16 sync moves about 4% of the weights by a whole bf16 step
while the fp32 learner moved by 1e-6. Compared with the unrounded learner, the correct generator
was 0.40 nats/token away (the canary stopped every bf16 run) and a stale one only 0.04 (it would
have passed). The canary now scores the learner with its weights rounded to the generator's dtype
(``Learner.score(weights_dtype=...)``), which is exactly what a correct sync delivers.

The model here is tests/test_league.py's 2-layer random model with the digit head of
tests/forked_runs.py, every weight moved onto a bf16 tie as the built-in model's 8% are: small
enough that bf16 costs little on an AVX2-only CPU too, so both host kinds run these tests (the
rest of the suite pins ``dtype: auto`` to float32 through ``ARENA_AUTO_DTYPE``, tests/conftest.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from arena.loop.components.canary import HALF_MAX_GAP, sync_gap
from arena.core.types import Sample
from forked_runs import digit_model
from arena.learners.config import LearnerConfig
from arena.learners.update import Learner
from arena.learners.weights import rounded_weights
from test_league import tiny_model  # noqa: F401  (the fixture)

SETS = [
    "policies.learner.sampling.max_new_tokens=4", "policies.learner.dtype=bfloat16", "game.max_bid=10000",
    "train.games_per_step=2", "train.steps=2", "train.checkpoint_every=2", "train.plot=false", "learner.lr=1e-3",
    "train.episodes.save=false",
]


def on_ties(src: Path, dst: Path) -> Path:
    """``src`` with every non-zero weight moved to the midpoint between its two nearest bf16 values."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(src)
    with torch.no_grad():
        for p in model.parameters():
            low = p.to(torch.bfloat16)
            high = torch.nextafter(low, torch.full_like(low, float("inf")))
            p.copy_(torch.where(p != 0, (low.float() + high.float()) / 2, p))
    model.save_pretrained(dst)
    AutoTokenizer.from_pretrained(src).save_pretrained(dst)
    return dst


@pytest.fixture(scope="module")
def ties(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:  # noqa: F811
    tmp = tmp_path_factory.mktemp("ties")
    return on_ties(digit_model(tiny_model, tmp / "digits"), tmp / "model")


def test_rounded_weights_round_inside_and_restore_bit_for_bit() -> None:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 50))
    net[1].weight = net[0].weight  # tied, as SmolLM2's embedding and head are
    half = torch.nn.Linear(4, 4).to(torch.bfloat16)  # already bf16: nothing to round
    net.append(half)
    before = {k: v.clone() for k, v in net.state_dict().items()}
    with rounded_weights(net, "bfloat16"):
        for k, v in net.state_dict().items():
            assert v.dtype == before[k].dtype and torch.equal(v, before[k].to(torch.bfloat16).to(v.dtype)), k
        assert not torch.equal(net[1].bias, before["1.bias"])  # it did round something
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())
    with pytest.raises(RuntimeError, match="boom"), rounded_weights(net, "float16"):
        raise RuntimeError("boom")
    assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())  # restored on the way out too
    with rounded_weights(net, None):
        assert all(torch.equal(v, before[k]) for k, v in net.state_dict().items())


@pytest.mark.parametrize(("dtype", "lr"), [("bfloat16", 1e-6), ("float16", 1e-3)])
def test_a_correct_half_sync_reads_as_rounding_and_a_stale_one_does_not(ties: Path, dtype: str, lr: float) -> None:
    """bf16 at the learner's default lr 1e-6, where the ties decide; float16 has 3 more mantissa bits, no
    ties here, and a 1e-6 update moves its logprobs by 3e-4 nats/token (stale and fresh are then alike:
    nothing to catch), so it is tried at 1e-3."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from arena.policies.hf import HFPolicy

    tok = AutoTokenizer.from_pretrained(ties)
    digits = tok.convert_tokens_to_ids([str(d) for d in range(10)])
    rng = torch.Generator().manual_seed(1)
    samples = [
        Sample(prompt_ids=torch.randint(0, 1000, (12,), generator=rng).tolist(),
               completion_ids=[digits[int(i)] for i in torch.randint(0, 10, (6,), generator=rng)],
               advantage=1.0 if k % 2 else -1.0)
        for k in range(4)
    ]
    gen = HFPolicy(str(ties), dtype=dtype, name="gen")
    learner = Learner(AutoModelForCausalLM.from_pretrained(ties, dtype=torch.float32),
                      LearnerConfig(lr=lr, beta=0.0), tok.pad_token_id)
    fresh = sync_gap(gen, learner, samples, dtype)  # half-precision arithmetic alone
    learner.step(samples)
    stale = sync_gap(gen, learner, samples, dtype)
    stale_fp32_rule = sync_gap(gen, learner, samples)
    with torch.no_grad():
        gen.model.load_state_dict(learner.module.state_dict())
    synced = sync_gap(gen, learner, samples, dtype)
    synced_fp32_rule = sync_gap(gen, learner, samples)
    print(f"\n{dtype} on bf16 ties, lr {lr:g}: fresh {fresh:.3g}, synced {synced:.3g} (fp32 rule {synced_fp32_rule:.3g}), "
          f"stale {stale:.3g} (fp32 rule {stale_fp32_rule:.3g})")
    assert synced < 2 * fresh + 0.02 and synced < HALF_MAX_GAP / 2  # a correct sync: rounding only
    assert stale > 2 * HALF_MAX_GAP  # one missed update: caught with room to spare
    if dtype == "bfloat16":  # what the fp32 rule did here: it stopped the correct sync and passed the stale one
        assert synced_fp32_rule > HALF_MAX_GAP > stale_fp32_rule


def _argv(model: Path, run: Path) -> list[str]:
    sets = [a for item in [f"policies.learner.model={model}", *SETS] for a in ("--set", item)]
    return ["examples/sealed_bid.yaml", *sets, "--run-dir", str(run)]


def _gaps(run: Path) -> list[float]:
    return [json.loads(line)["sync/canary_gap"] for line in (run / "metrics.jsonl").read_text().splitlines()]


def test_a_bf16_run_passes_a_correct_sync_and_stops_a_stale_one(ties: Path, tmp_path: Path, zygote) -> None:
    """Real ``arena.train`` runs: a bf16 hf generator beside the float32 learner, the default bound. At
    lr 1e-3 a missed update moves the sealed-bid turns the canary scores by nats (at 1e-6, the ties alone
    moved them by 0.02 here: the scored turns are not the ones the random samples above train on)."""
    rc = zygote.run(_argv(ties, tmp_path / "synced"), tmp_path / "synced.log")
    log = (tmp_path / "synced.log").read_text()
    assert rc == 0, log[-3000:]
    assert "precision: policies.learner bfloat16 on cpu (set in the config); learner float32 weights on cpu" in log
    gaps = _gaps(tmp_path / "synced")
    assert len(gaps) == 2 and all(g <= HALF_MAX_GAP / 2 for g in gaps), gaps

    rc = zygote.run(_argv(ties, tmp_path / "stale"), tmp_path / "stale.log", stale=True)
    err = (tmp_path / "stale.log").read_text()
    assert rc == 1 and "Traceback" not in err, err[-3000:]
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "weight-sync canary" in errors[0] and f"canary.max_gap {HALF_MAX_GAP:g}" in errors[0]
    *before, gap = _gaps(tmp_path / "stale")
    assert all(g <= HALF_MAX_GAP for g in before) and gap > 2 * HALF_MAX_GAP
    print(f"\nbf16 run: correct sync {', '.join(f'{g:.2g}' for g in gaps)}, stale {gap:.3g} (bound {HALF_MAX_GAP})")


def test_the_logged_stats_on_hand_values() -> None:
    from arena.loop.components.canary import canary_stats

    gen, after, before = [[-1.0, -2.0], [-3.0]], [[-1.1, -2.0], [-2.9]], [[-1.5, -2.3], [-3.0]]
    stats = canary_stats(gen, after, before)
    assert stats["sync/canary_gap"] == pytest.approx(0.2 / 3)  # |0.1| + 0 + |0.1|
    assert stats["sync/canary_gap_before"] == pytest.approx(0.8 / 3)  # 0.5 + 0.3 + 0
    assert stats["sync/canary_update"] == pytest.approx(0.8 / 3)  # 0.4 + 0.3 + 0.1
