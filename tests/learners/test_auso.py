"""AUSO's learner maths against hand values and slow references (arena/learners/auso.py)."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.learners.auso import (
    AusoSchedule,
    action_mean,
    centred_tanh,
    distill_allowed,
    internalisation_weights,
    pass_gate,
    smooth,
    stage_weights,
    topk_jsd,
    topk_tail,
    utilisation_weights,
)
from arena.learners.objectives import jsd
from arena.learners.progress import Progress
from tolerance import approx32, approx64


def test_smooth_hand_values() -> None:
    assert [smooth(x) for x in (-1.0, 0.0, 0.25, 0.5, 1.0, 2.0)] == [0.0, 0.0, 0.15625, 0.5, 1.0, 1.0]


def test_schedule_hand_values() -> None:
    cfg = AusoSchedule()
    at = {s: stage_weights(Progress(s, 101), cfg) for s in (1, 3, 6, 11, 21, 71, 86, 101)}
    assert at[1].w_int == pytest.approx(0.2) and at[3].w_int == pytest.approx(0.6 * (1 - smooth(0.1)))
    assert at[6].w_int == pytest.approx(1 - 0.15625) and at[11].w_int == pytest.approx(0.5)
    assert at[21].w_int == 0.0 and at[21].stage == "grpo" and at[71].w_util == 0.0
    assert at[86].w_util == pytest.approx(0.5) and at[86].stage == "utilise" and at[101].w_util == pytest.approx(1.0)
    assert at[1].stage == "internalise" and at[11].w_util == 0.0


def _split(total: int, cfg: AusoSchedule) -> dict[str, int]:
    counts = {"internalise": 0, "grpo": 0, "utilise": 0}
    for step in range(1, total + 1):
        counts[stage_weights(Progress(step, total), cfg).stage] += 1
    return counts


def test_the_2_5_3_split_over_t_steps() -> None:
    # Without the 0.01 floor the boundaries are exact: p < 0.2 internalises, p > 0.7 utilises.
    assert _split(101, AusoSchedule(floor=0.0)) == {"internalise": 20, "grpo": 51, "utilise": 30}
    # The published 0.01 floor moves each edge a little: w_int < 0.01 once p/0.2 > 0.9411 (p > 0.1882,
    # step 30 of 150); w_util >= 0.01 once (p-0.7)/0.3 >= 0.0589 (p >= 0.7177, step 108). Still about 2:5:3.
    counts = _split(150, AusoSchedule())
    assert counts == {"internalise": 29, "grpo": 78, "utilise": 43}
    assert abs(counts["internalise"] / 150 - 0.2) < 0.02 and abs(counts["utilise"] / 150 - 0.3) < 0.03


def test_each_part_switches_off() -> None:
    total = 50
    none = _split(total, AusoSchedule(internalise=False, utilise=False))
    assert none == {"internalise": 0, "grpo": total, "utilise": 0}
    assert _split(total, AusoSchedule(internalise=False))["internalise"] == 0
    assert _split(total, AusoSchedule(utilise=False))["utilise"] == 0
    first = Progress(1, total)
    assert stage_weights(first, AusoSchedule(ramp_steps=0)).w_int == 1.0  # no ramp
    assert [stage_weights(Progress(s, 101), AusoSchedule(decay="step")).w_int for s in (6, 20, 21)] == [1.0, 1.0, 0.0]
    assert [stage_weights(Progress(s, 101), AusoSchedule(rise="step")).w_util for s in (71, 72)] == [0.0, 1.0]
    assert _split(10, AusoSchedule(boundaries=(0.5, 0.5), floor=0.0)) == {"internalise": 5, "grpo": 0, "utilise": 5}
    with pytest.raises(ValueError, match="boundaries"):
        AusoSchedule(boundaries=(0.7, 0.2))


def _slow_topk_jsd(p: list[float], q: list[float], k: int) -> float:
    """Full-vocabulary reference: bins = q's k likeliest tokens one by one + everything else, in plain floats."""
    order = sorted(range(len(q)), key=lambda i: -q[i])[:k]
    rest = [i for i in range(len(q)) if i not in order]
    pb = [p[i] for i in order] + [sum(p[i] for i in rest)]
    qb = [q[i] for i in order] + [sum(q[i] for i in rest)]
    total = 0.0
    for a, b in zip(pb, qb, strict=True):
        m = (a + b) / 2
        total += 0.5 * (a * math.log(a / m) if a > 0 else 0.0) + 0.5 * (b * math.log(b / m) if b > 0 else 0.0)
    return total


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), vocab=st.integers(3, 12), k=st.integers(1, 12))
def test_topk_jsd_equals_a_slow_full_vocabulary_reference(seed: int, vocab: int, k: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    p = torch.randn(vocab, generator=gen, dtype=torch.float64).mul(2).log_softmax(-1)
    q = torch.randn(vocab, generator=gen, dtype=torch.float64).mul(2).log_softmax(-1)
    k = min(k, vocab - 1)
    got = float(topk_jsd(p, q, k))
    assert got == approx64(_slow_topk_jsd(p.exp().tolist(), q.exp().tolist(), k))
    full = float(jsd(p, q))
    assert got <= full + 1e-12  # merging bins never increases the divergence
    if k == vocab - 1:
        assert got == approx64(full)
    pb, qb = topk_tail(p, q, k)
    assert pb.shape == (k + 1,) and float(pb.exp().sum()) == pytest.approx(1.0) and float(qb.exp().sum()) == pytest.approx(1.0)


def test_topk_jsd_batches_and_is_symmetric_on_the_same_bins() -> None:
    p = torch.tensor([[0.5, 0.3, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]]).log()
    q = torch.tensor([[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1]]).log()
    out = topk_jsd(p, q, 2)
    assert out.shape == (2,)
    assert float(out[0]) == pytest.approx(_slow_topk_jsd([0.5, 0.3, 0.1, 0.1], [0.1, 0.2, 0.3, 0.4], 2))
    assert float(topk_jsd(q, q, 2)[0]) == approx32(0.0)


def test_action_mean_over_the_tokens_of_each_action() -> None:
    values = torch.tensor([[1.0, 3.0, 9.0], [2.0, 0.0, 0.0], [5.0, 5.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert action_mean(values, mask).tolist() == [2.0, 2.0, 0.0]


def test_utilisation_weights_hand_values() -> None:
    # One task, p = 0.5 (gate 1), I = [1, 2, 3]: z = [-1.22, 0, 1.22], tanh symmetric -> m = [-1, 0, 1].
    w = utilisation_weights(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 0]), torch.full((3,), 0.5), w_util=1.0)
    assert w.tolist() == pytest.approx([0.8, 1.0, 1.2])
    # p = 0.25: gate 4 * 0.25 * 0.75 = 0.75; w_util 0.5 -> 1 +- 0.2 * 0.5 * 0.75.
    w = utilisation_weights(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 0]), torch.full((3,), 0.25), w_util=0.5)
    assert w.tolist() == pytest.approx([0.925, 1.0, 1.075])
    assert pass_gate(torch.tensor([0.0, 0.25, 0.5, 1.0])).tolist() == [0.0, 0.75, 1.0, 0.0]


def test_utilisation_gate_is_zero_for_all_success_and_all_fail_tasks() -> None:
    sens = torch.tensor([0.1, 0.9, 0.4, 3.0, 0.2, 0.5])
    tasks = torch.tensor([0, 0, 0, 1, 1, 1])
    rate = torch.tensor([0.0, 0.0, 0.0, 1.0, 1.0, 1.0])
    assert utilisation_weights(sens, tasks, rate, w_util=1.0).tolist() == [1.0] * 6


@settings(max_examples=80, deadline=None)
@given(
    data=st.lists(st.tuples(st.floats(0, 5), st.integers(0, 3)), min_size=1, max_size=24),
    rates=st.lists(st.sampled_from([0.0, 0.125, 0.5, 0.875, 1.0]), min_size=4, max_size=4),
    w_util=st.floats(0, 1),
    adv=st.lists(st.floats(-3, 3), min_size=24, max_size=24),
)
def test_utilisation_weights_keep_the_sign_and_mean_one(data, rates, w_util, adv) -> None:
    sens = torch.tensor([d[0] for d in data], dtype=torch.float64)
    tasks = torch.tensor([d[1] for d in data])
    p = torch.tensor(rates, dtype=torch.float64)[tasks]
    w = utilisation_weights(sens, tasks, p, w_util)
    assert bool((w >= 0.8 - 1e-12).all() and (w <= 1.2 + 1e-12).all())
    a = torch.tensor(adv[: len(data)], dtype=torch.float64)
    assert bool(((a * w) * a >= 0).all()), "A_t = A_GRPO * w_t keeps the sign"
    for t in tasks.unique().tolist():
        assert float(w[tasks == t].mean()) == approx64(1.0)


def _slow_centred_tanh(x: list[float], clip: float | None) -> list[float]:
    mean = sum(x) / len(x)
    std = math.sqrt(sum((v - mean) ** 2 for v in x) / len(x))
    z = [(v - mean) / std for v in x]
    m = [math.tanh(max(-clip, min(clip, v)) if clip is not None else v) for v in z]
    mm = sum(m) / len(m)
    c = [v - mm for v in m]
    top = max(abs(v) for v in c)
    return [v / top for v in c]


def test_z_score_is_clipped_at_three() -> None:
    x = [0.0] * 20 + [40.0, 100.0]  # z of the outlier ~ 4.4: clipped to 3
    g = torch.zeros(len(x), dtype=torch.long)
    clipped = centred_tanh(torch.tensor(x, dtype=torch.float64), g, clip=3.0).tolist()
    unclipped = centred_tanh(torch.tensor(x, dtype=torch.float64), g, clip=None).tolist()
    assert clipped == approx32(_slow_centred_tanh(x, 3.0))
    assert unclipped == approx32(_slow_centred_tanh(x, None))
    assert clipped[-2] != approx32(unclipped[-2])


def test_internalisation_weights_mean_exactly_one_and_bounded() -> None:
    assert internalisation_weights(torch.tensor([1.0, 2.0, 3.0])).tolist() == pytest.approx([0.8, 1.0, 1.2])
    w = internalisation_weights(torch.tensor([0.3, 0.01, 0.9, 0.2, 0.25]), beta=0.2, ramp=0.4)
    assert float(w.mean()) == pytest.approx(1.0) and float(w.max()) <= 1.08 + 1e-6 and float(w.min()) >= 0.92 - 1e-6
    assert internalisation_weights(torch.tensor([0.5, 0.5])).tolist() == [1.0, 1.0]


def test_distillation_is_skipped_near_the_length_cap() -> None:
    assert distill_allowed([10, 20, 30], cap=100)
    assert not distill_allowed([100] + [10] * 9, cap=100)  # 10% hit the cap
    assert not distill_allowed([45] * 10, cap=100)  # mean over 0.4 of the cap
    assert distill_allowed([100] + [10] * 19, cap=100) and not distill_allowed([], cap=100)
