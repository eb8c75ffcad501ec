"""AUSO's learner maths (arena/learners/auso.py) with asymmetric parameters and hand values.

The schedule with boundaries that are not the published ones, a ramp that is not 5 and
a floor that binds exactly; the top-k bins on a 4-token vocabulary; the per-task weights
against a plain-Python reference with a clip that binds; the length gate at its edges;
and the objective terms' selection and re-weighting without a model.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import torch

from arena.learners.auso import (
    AusoDistill,
    AusoDistillOptions,
    AusoSchedule,
    AusoUtilise,
    AusoUtiliseOptions,
    action_mean,
    centred_tanh,
    distill_allowed,
    internalisation_weights,
    pass_gate,
    probe_bins,
    smooth,
    stage_weights,
    topk_jsd,
    topk_tail,
    union_topk_jsd,
    utilisation_weights,
)
from arena.learners.objectives import ProbeDist, jsd
from arena.learners.progress import Progress
from tolerance import approx32, approx64, close64, within

LOG = torch.log


# ------------------------------------------------------------------ schedule
def test_schedule_with_asymmetric_boundaries_and_ramp() -> None:
    cfg = AusoSchedule(boundaries=(0.25, 0.6), ramp_steps=4, floor=0.05)
    at = {s: stage_weights(Progress(s, 21), cfg) for s in (1, 2, 5, 6, 13, 14, 15, 21)}  # p = (s - 1) / 20
    assert at[1].w_int == pytest.approx(0.25) and at[1].stage == "internalise"  # ramp 1/4, no decay yet
    assert at[2].w_int == pytest.approx(0.5 * (1 - 0.104))  # ramp 2/4, smooth(0.05 / 0.25 = 0.2) = 0.104
    assert at[5].w_int == pytest.approx(0.104)  # ramp 1, smooth(0.8) = 0.896
    assert at[6].w_int == 0.0 and at[6].w_util == 0.0 and at[6].stage == "grpo"  # p = b1
    assert at[13].w_util == 0.0  # p = b2
    assert at[14].w_util == 0.0 and at[14].stage == "grpo"  # smooth(0.125) = 0.043 < floor 0.05
    assert at[15].w_util == pytest.approx(0.15625) and at[15].stage == "utilise"  # smooth(0.25)
    assert at[21].w_util == pytest.approx(1.0) and at[21].w_int == 0.0


def test_schedule_step_shapes_floor_and_switches() -> None:
    steps = AusoSchedule(boundaries=(0.25, 0.6), ramp_steps=0, decay="step", rise="step", floor=0.0)
    assert stage_weights(Progress(1, 21), steps).w_int == 1.0  # no ramp
    assert stage_weights(Progress(5, 21), steps).w_int == 1.0
    assert stage_weights(Progress(6, 21), steps).w_int == 0.0  # p = b1: over
    assert stage_weights(Progress(13, 21), steps).w_util == 0.0  # p = b2: not yet
    assert stage_weights(Progress(14, 21), steps).w_util == 1.0
    # A weight exactly at the floor is kept.
    floor = AusoSchedule(boundaries=(0.5, 0.5), ramp_steps=4, decay="step", floor=0.25)
    assert stage_weights(Progress(1, 5), floor).w_int == 0.25
    assert stage_weights(Progress(4, 5), AusoSchedule(boundaries=(0.5, 0.5), floor=0.5)).w_util == 0.5
    off = stage_weights(Progress(1, 21), AusoSchedule(internalise=False, ramp_steps=1))
    assert (off.w_int, off.w_util, off.stage) == (0.0, 0.0, "grpo")
    late = stage_weights(Progress(21, 21), AusoSchedule(utilise=False))
    assert (late.w_int, late.w_util, late.stage) == (0.0, 0.0, "grpo")
    both = stage_weights(Progress(1, 1), AusoSchedule(boundaries=(0.5, 0.5), decay="step", ramp_steps=1))
    assert (both.w_int, both.w_util, both.stage) == (0.0, 1.0, "utilise")  # p = 1 with one step
    assert smooth(0.3) == pytest.approx(0.09 * 2.4) and smooth(1.5) == 1.0 and smooth(-0.5) == 0.0


# ------------------------------------------------------------------ top-k bins and JSD
Q = LOG(torch.tensor([0.4, 0.3, 0.2, 0.1], dtype=torch.float64))
P = LOG(torch.tensor([0.1, 0.2, 0.3, 0.4], dtype=torch.float64))


def test_topk_tail_hand_values() -> None:
    p, q = topk_tail(P, Q, 2)  # q's top 2 are tokens 0 and 1
    assert q.exp().tolist() == approx64([0.4, 0.3, 0.3])
    assert p.exp().tolist() == approx64([0.1, 0.2, 0.7])
    p, q = topk_tail(Q, P, 1)  # now P's top token is 3
    assert q.exp().tolist() == approx64([0.4, 0.6])
    assert p.exp().tolist() == approx64([0.1, 0.9])
    p, q = topk_tail(P, Q, 10)  # k is cut to V - 1 = 3: a tail bin holding the last token
    assert p.shape == (4,)
    assert p.exp().tolist() == approx64([0.1, 0.2, 0.3, 0.4])
    batch_p, batch_q = topk_tail(torch.stack([P, Q]), torch.stack([Q, P]), 2)
    assert batch_p.shape == (2, 3)
    assert batch_q[1].exp().tolist() == approx64([0.4, 0.3, 0.3])
    assert batch_p[1].exp().tolist() == approx64([0.1, 0.2, 0.7])


def test_topk_jsd_values_and_default_k() -> None:
    bins = jsd(LOG(torch.tensor([0.1, 0.2, 0.7], dtype=torch.float64)), LOG(torch.tensor([0.4, 0.3, 0.3], dtype=torch.float64)))
    assert topk_jsd(P, Q, 2) == pytest.approx(float(bins))
    assert topk_jsd(P, Q, 3) == pytest.approx(float(jsd(P, Q)))
    g = torch.Generator().manual_seed(0)
    a = torch.randn(100, generator=g, dtype=torch.float64).log_softmax(-1)
    b = torch.randn(100, generator=g, dtype=torch.float64).log_softmax(-1)
    assert float(topk_jsd(a, b)) == float(topk_jsd(a, b, 64)) != float(topk_jsd(a, b, 65))


def test_action_mean_hand_values() -> None:
    values = torch.tensor([[1.0, 2.0, 6.0], [5.0, 7.0, 9.0], [3.0, 3.0, 3.0]])
    mask = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 0.0]])
    assert action_mean(values, mask).tolist() == [3.5, 7.0, 0.0]


# ------------------------------------------------------------------ action weights
def _reference_centred_tanh(x: list[float], groups: list[int], clip: float | None) -> list[float]:
    out = [0.0] * len(x)
    for g in set(groups):
        idx = [i for i, h in enumerate(groups) if h == g]
        vals = [x[i] for i in idx]
        mean = sum(vals) / len(vals)
        std = math.sqrt(sum((v - mean) ** 2 for v in vals) / len(vals))
        if std <= 1e-8:
            continue
        z = [(v - mean) / std for v in vals]
        m = [math.tanh(max(-clip, min(clip, t)) if clip is not None else t) for t in z]
        centre = sum(m) / len(m)
        m = [t - centre for t in m]
        top = max(abs(t) for t in m)
        for i, t in zip(idx, m, strict=True):
            out[i] = t / top
    return out


X = [1.0, 2.0, 4.0, 3.0, 3.0, 0.5, 10.0, 0.0, 0.0, 0.0]
big_values = [0.0] * 17 + [2.0, 5.0, 100.0]  # the z-score of 100 is 4.3: clips of 3 and 4 differ
GROUPS = [2, 2, 2, 0, 0, 3, 4, 4, 4, 4]  # group 1 is empty, group 3 a single action, group 0 all equal


def test_centred_tanh_against_a_reference_with_a_binding_clip() -> None:
    x, groups = torch.tensor(X, dtype=torch.float64), torch.tensor(GROUPS)
    for clip in (0.5, 1.0, 3.0, None):
        got = centred_tanh(x, groups, clip).tolist()
        assert got == approx32(_reference_centred_tanh(X, GROUPS, clip)), clip
    # group 2: z = (-1.07, -0.27, 1.34), so a clip of 1 binds and changes the weights
    assert centred_tanh(x, groups, 1.0)[0] != pytest.approx(float(centred_tanh(x, groups, 3.0)[0]))
    default = centred_tanh(x, groups)
    assert default.tolist() == approx32(_reference_centred_tanh(X, GROUPS, 3.0))
    assert default[3:6].tolist() == [0.0, 0.0, 0.0]
    assert default[[0, 1, 2]].abs().max() == pytest.approx(1.0) and default[[0, 1, 2]].sum() == pytest.approx(0.0)
    big = torch.tensor([0.0] * 20 + [100.0], dtype=torch.float64)  # z of the outlier is sqrt(20) > 3
    one = torch.zeros(21, dtype=torch.long)
    assert centred_tanh(big, one).tolist() == pytest.approx(_reference_centred_tanh(big.tolist(), [0] * 21, 3.0))
    assert centred_tanh(big, one, None).tolist() == pytest.approx(_reference_centred_tanh(big.tolist(), [0] * 21, None))
    assert centred_tanh(torch.zeros(0, dtype=torch.float64), torch.zeros(0, dtype=torch.long)).shape == (0,)
    tiny = torch.tensor([1.0, 1.0 + 1e-9], dtype=torch.float64)  # spread below eps: all 0
    assert centred_tanh(tiny, torch.zeros(2, dtype=torch.long)).tolist() == [0.0, 0.0]
    small = torch.tensor([0.0, 1.2e-8, 3.6e-8], dtype=torch.float64)  # std 1.5e-8, near eps: z = d / (std + eps)
    d = small - small.mean()
    z = d / (d.pow(2).mean().sqrt() + 1e-8)
    m = torch.tanh(z) - torch.tanh(z).mean()
    assert centred_tanh(small, torch.zeros(3, dtype=torch.long)).tolist() == pytest.approx((m / m.abs().max()).tolist())
    assert centred_tanh(torch.tensor(big_values, dtype=torch.float64), torch.zeros(20, dtype=torch.long)).tolist() == \
        pytest.approx(_reference_centred_tanh(big_values, [0] * 20, 3.0))  # the default clip is 3
    edge = torch.tensor([0.0, 2e-8], dtype=torch.float64)  # std exactly eps = 1e-8: still no spread
    assert centred_tanh(edge, torch.zeros(2, dtype=torch.long)).tolist() == [0.0, 0.0]
    above = torch.tensor([0.0, 2.0000000000000004e-08], dtype=torch.float64)  # one ulp above
    assert centred_tanh(above, torch.zeros(2, dtype=torch.long)).tolist() == [-1.0, 1.0]


def test_pass_gate_and_utilisation_weights() -> None:
    assert pass_gate(torch.tensor([0.25, 0.9, 0.0, 1.0])).tolist() == pytest.approx([0.75, 0.36, 0.0, 0.0])
    x, groups = torch.tensor(X, dtype=torch.float64), torch.tensor(GROUPS)
    rates = torch.tensor([0.25] * 3 + [0.5] * 2 + [0.9] + [0.4] * 4, dtype=torch.float64)
    w = utilisation_weights(x, groups, rates, w_util=0.5, beta=0.3, clip=1.0)
    m = _reference_centred_tanh(X, GROUPS, 1.0)
    expected = [1 + 0.3 * 0.5 * 4 * r * (1 - r) * mi for r, mi in zip(rates.tolist(), m, strict=True)]
    assert w.tolist() == approx32(expected)
    d = utilisation_weights(x, groups, rates, w_util=0.5)  # beta 0.2, clip 3
    m3 = _reference_centred_tanh(X, GROUPS, 3.0)
    assert d.tolist() == approx32([1 + 0.2 * 0.5 * 4 * r * (1 - r) * mi for r, mi in zip(rates.tolist(), m3, strict=True)])


def test_utilisation_default_clip_is_three() -> None:
    values = [0.0] * 17 + [2.0, 5.0, 100.0]  # the z-score of 100 is 4.3: clips of 3 and 4 differ
    w = utilisation_weights(torch.tensor(values, dtype=torch.float64), torch.zeros(20, dtype=torch.long),
                            torch.full((20,), 0.5, dtype=torch.float64), w_util=1.0)  # fmt: skip
    assert w.tolist() == approx64([1 + 0.2 * t for t in _reference_centred_tanh(values, [0] * 20, 3.0)])
    assert w.tolist() != approx64([1 + 0.2 * t for t in _reference_centred_tanh(values, [0] * 20, 4.0)])


def test_internalisation_weights_one_group_no_clip() -> None:
    # three distinct values and a z-score of 4.3 > 3: a clip of 3 would change the weights
    values = [0.0] * 17 + [2.0, 5.0, 100.0]
    jsd_values = torch.tensor(values, dtype=torch.float64, requires_grad=True)
    c = _reference_centred_tanh(values, [0] * 20, None)
    assert c != pytest.approx(_reference_centred_tanh(values, [0] * 20, 3.0))
    w = internalisation_weights(jsd_values, beta=0.1, ramp=0.5)
    assert not w.requires_grad
    assert w.tolist() == pytest.approx([1 + 0.05 * t for t in c])
    assert w.mean().item() == pytest.approx(1.0) and w.max().item() == pytest.approx(1.05)
    d = internalisation_weights(torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64))
    assert d.tolist() == pytest.approx([1 + 0.2 * t for t in _reference_centred_tanh([1.0, 2.0, 4.0], [0] * 3, None)])


def test_distill_allowed_edges() -> None:
    assert not distill_allowed([], 10)
    assert distill_allowed([10] + [1] * 19, 10)  # 1 in 20 capped = 5%: allowed
    assert not distill_allowed([11, 10] + [1] * 18, 10)  # 10%; over the cap counts as capped
    assert distill_allowed([4, 4], 10) and not distill_allowed([4, 5], 10)  # mean 4 = 0.4 cap; 4.5 > 4
    assert distill_allowed([10, 1], 10, max_capped=0.5, max_mean=0.6)  # 50%, mean 5.5 <= 6
    assert not distill_allowed([10, 1], 10, max_capped=0.49, max_mean=1.0)
    assert not distill_allowed([10, 3], 10, max_capped=0.5, max_mean=0.6)  # mean 6.5 > 6
    assert distill_allowed([9, 9], 10, max_mean=1.0) and not distill_allowed([9, 10], 10, max_capped=0.4, max_mean=1.0)


def test_probe_bins_with_and_without_an_index() -> None:
    logp = LOG(torch.tensor([[[0.1, 0.2, 0.3, 0.15, 0.25]]], dtype=torch.float64))  # (b=1, T=1, V=5)
    index = torch.tensor([[[2, 4, 0]]])  # the probe's top 3
    probe = ProbeDist(index=index, logp=LOG(torch.tensor([[[0.5, 0.2, 0.1]]], dtype=torch.float64)),
                      tail=LOG(torch.tensor([[0.2]], dtype=torch.float64)), present=torch.tensor([True]))  # fmt: skip
    p, q = probe_bins(logp, probe, 2)
    close64(q.exp(), torch.tensor([[[0.5, 0.2, 0.3]]], dtype=torch.float64))  # 0.1 + tail 0.2
    close64(p.exp(), torch.tensor([[[0.3, 0.25, 0.45]]], dtype=torch.float64))
    p, q = probe_bins(logp, probe, 3)
    close64(q.exp(), torch.tensor([[[0.5, 0.2, 0.1, 0.2]]], dtype=torch.float64))
    close64(p.exp(), torch.tensor([[[0.3, 0.25, 0.1, 0.35]]], dtype=torch.float64))
    full = ProbeDist(index=None, logp=logp.flip(-1), tail=None, present=torch.tensor([True]))
    p, q = probe_bins(logp, full, 2)
    ref_p, ref_q = topk_tail(logp, logp.flip(-1), 2)
    assert torch.equal(p, ref_p) and torch.equal(q, ref_q)


# ------------------------------------------------------------------ objective terms without a model
def _sample(probes: tuple[str, ...] = ("teacher",), **extras: object) -> SimpleNamespace:
    return SimpleNamespace(probes={k: None for k in probes}, extras=extras, completion_ids=[0] * int(extras.pop("n", 1)))


def test_distill_selection_and_length_gate() -> None:
    term = AusoDistill(AusoDistillOptions(), coef=0.5)
    assert term.probes == ("teacher",) and term.topk == 64 and term.coef == 0.5
    assert AusoDistill(AusoDistillOptions(probe="t2", topk=7), 1.0).probes == ("t2",)
    assert AusoDistill(AusoDistillOptions(probe="t2", topk=7), 1.0).topk == 7
    assert term._selected(_sample(pass_rate=0.0))
    assert not term._selected(_sample(pass_rate=0.5)) and not term._selected(_sample())
    assert not term._selected(_sample(("other",), pass_rate=0.0))
    loose = AusoDistill(AusoDistillOptions(only_failed=False), 1.0)
    assert loose._selected(_sample(pass_rate=0.5)) and not loose._selected(_sample(("x",)))
    assert term._allowed([])
    one_in_20 = [_sample(finish_reason="length")] + [_sample() for _ in range(19)]
    assert term._allowed(one_in_20) and not term._allowed(one_in_20[:10])
    capped = AusoDistill(AusoDistillOptions(length_cap=10, max_capped=0.5), 1.0)
    assert capped._allowed([_sample(n=4), _sample(n=4)]) and not capped._allowed([_sample(n=4), _sample(n=5)])
    assert capped._allowed([_sample(n=10), _sample(n=1)]) is False  # mean 5.5 > 4
    # by length alone a quarter is capped: the finish reasons decide that part, not distill_allowed's 5%
    assert capped._allowed([_sample(n=10), _sample(n=1), _sample(n=1), _sample(n=1)])
    assert AusoDistill(AusoDistillOptions(max_capped=0.5), 1.0)._allowed([_sample(finish_reason="length"), _sample()])
    sched = AusoSchedule(boundaries=(0.25, 0.6))
    on = AusoDistill(AusoDistillOptions(schedule=sched), 1.0)
    assert on.active_at(None) and on.active_at(Progress(1, 21)) and not on.active_at(Progress(6, 21))


def test_utilise_stage_and_weights_without_a_model() -> None:
    opts = AusoUtiliseOptions(schedule=AusoSchedule(boundaries=(0.25, 0.6)), beta=0.3, clip=1.0, probe="bare", topk=9)
    term = AusoUtilise(opts, coef=0.7)
    assert term.probes == ("bare",) and term.topk == 0 and term.reweights and term.coef == 0.7  # union: full probe
    assert AusoUtilise(opts.model_copy(update={"bins": "probe"}), 0.7).topk == 9
    assert term._w_util(None) == 1.0 and term.active_at(None)
    assert term._w_util(Progress(15, 21)) == pytest.approx(0.15625) and term.active_at(Progress(15, 21))
    assert term._w_util(Progress(5, 21)) == 0.0 and not term.active_at(Progress(5, 21))
    assert float(term.loss(SimpleNamespace(logp=torch.zeros(2, 3, 4)))) == 0.0
    samples = [SimpleNamespace(extras={"group": "a", "pass_rate": 0.25}), SimpleNamespace(extras={"group": "a", "pass_rate": 0.25}),
               SimpleNamespace(extras={"group": "a", "pass_rate": 0.25}), SimpleNamespace(extras={"group": "b"}),
               SimpleNamespace(extras={"group": "b", "pass_rate": 0.5}), SimpleNamespace(extras={"group": "a", "pass_rate": 0.25})]  # fmt: skip
    values = torch.tensor([1.0, 2.0, 4.0, 3.0, 7.0, math.nan], dtype=torch.float64)
    w = term.action_weights(samples, values, Progress(15, 21))
    m = _reference_centred_tanh([1.0, 2.0, 4.0, 3.0, 7.0], [0, 0, 0, 1, 1], 1.0)
    gates = [0.75, 0.75, 0.75, 0.0, 1.0]  # a missing pass rate: gate 0
    expected = [1 + 0.3 * 0.15625 * g * mi for g, mi in zip(gates, m, strict=True)] + [1.0]  # NaN: its own group
    assert w.tolist() == approx32(expected)
    assert term.action_weights(samples, values, Progress(5, 21)).tolist() == [1.0] * 6
    whole = term.action_weights(samples[:3], values[:3], None)  # no progress: w_util = 1
    ref = _reference_centred_tanh([1.0, 2.0, 4.0], [0, 0, 0], 1.0)
    assert whole.tolist() == approx32([1 + 0.3 * 0.75 * t for t in ref])
    # pass rates in the values' dtype: 0.3 is not a float32 number, so a float32 gate would be off by ~1e-8
    odd = [SimpleNamespace(extras={"group": "g", "pass_rate": 0.3}) for _ in range(3)]
    got = term.action_weights(odd, torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64), None)
    same = utilisation_weights(torch.tensor([1.0, 2.0, 4.0], dtype=torch.float64), torch.zeros(3, dtype=torch.long),
                               torch.full((3,), 0.3, dtype=torch.float64), 1.0, 0.3, 1.0)  # fmt: skip
    assert got.tolist() == approx64(same.tolist())
    assert got.tolist() == approx32([1 + 0.3 * 4 * 0.3 * 0.7 * t for t in ref])
    nogroup = [SimpleNamespace(extras={"pass_rate": 0.5}), SimpleNamespace(extras={"pass_rate": 0.5})]
    assert term.action_weights(nogroup, torch.tensor([1.0, 3.0], dtype=torch.float64), None).tolist() == pytest.approx([0.7, 1.3])


def test_union_topk_jsd_hand_value() -> None:
    """The audit's point: p = (.5, .3, .1, .1), q = (.1, .6, .2, .1), k = 1. Union bins {0}, {1}, tail:
    JSD((.5, .3, .2), (.1, .6, .3)), either order; q's top-1 only would be JSD((.3, .7), (.6, .4))."""
    p = torch.tensor([0.5, 0.3, 0.1, 0.1], dtype=torch.float64).log()
    q = torch.tensor([0.1, 0.6, 0.2, 0.1], dtype=torch.float64).log()

    def hand(a: list[float], b: list[float]) -> float:
        m = [(x + y) / 2 for x, y in zip(a, b, strict=True)]
        return 0.5 * sum(x * math.log(x / mi) for x, mi in zip(a, m, strict=True)) + 0.5 * sum(
            y * math.log(y / mi) for y, mi in zip(b, m, strict=True))

    want = hand([0.5, 0.3, 0.2], [0.1, 0.6, 0.3])
    assert want == within(0.1032945, 1e-6, "written to 7 decimals")  # (0.0892 + 0.1174) / 2
    assert float(union_topk_jsd(p, q, 1)) == approx64(want)
    assert float(union_topk_jsd(q, p, 1)) == approx64(want)
    assert float(topk_jsd(p, q, 1)) == approx64(hand([0.3, 0.7], [0.6, 0.4]))
    assert float(topk_jsd(q, p, 1)) == approx64(hand([0.5, 0.5], [0.1, 0.9]))  # not symmetric
    # k = 2: union {0, 1, 2} + tail {3}: (.5, .3, .1, .1) vs (.1, .6, .2, .1)
    assert float(union_topk_jsd(p, q, 2)) == approx64(hand([0.5, 0.3, 0.1, 0.1], [0.1, 0.6, 0.2, 0.1]))
    # the union covers the vocabulary: no tail bin, the full JSD
    assert float(union_topk_jsd(p, q, 4)) == approx64(float(jsd(p, q)))


def test_union_topk_jsd_is_symmetric_and_bounded_on_random_cases() -> None:
    """2,000 random pairs (the audit's count): swapping the two distributions never changes the value,
    which lies between the one-sided top-k JSD's smaller bins and the full-vocabulary JSD."""
    gen = torch.Generator().manual_seed(24)
    for _ in range(20):
        v = int(torch.randint(3, 40, (1,), generator=gen))
        k = int(torch.randint(1, v + 1, (1,), generator=gen))
        p = torch.log_softmax(3 * torch.randn(100, v, generator=gen, dtype=torch.float64), -1)
        q = torch.log_softmax(3 * torch.randn(100, v, generator=gen, dtype=torch.float64), -1)
        ab, ba = union_topk_jsd(p, q, k), union_topk_jsd(q, p, k)
        close64(ab, ba)
        assert (ab <= jsd(p, q) + 1e-12).all() and (ab >= topk_jsd(p, q, k) - 1e-12).all()
        # a slow reference: the union's tokens one by one
        for r in range(0, 100, 37):
            keep = sorted(set(p[r].topk(k).indices.tolist()) | set(q[r].topk(k).indices.tolist()))
            rest = [t for t in range(v) if t not in keep]
            a = [p[r, t].exp() for t in keep] + ([p[r, rest].exp().sum()] if rest else [])
            b = [q[r, t].exp() for t in keep] + ([q[r, rest].exp().sum()] if rest else [])
            want = float(jsd(torch.stack(a).log(), torch.stack(b).log()))
            assert float(ab[r]) == approx64(want)


def test_utilise_action_values_on_the_union_by_default() -> None:
    term = AusoUtilise(AusoUtiliseOptions(probe="bare", topk=1), coef=1.0)
    assert term.options.bins == "union"
    logp = LOG(torch.tensor([[[0.5, 0.3, 0.1, 0.1], [0.25, 0.25, 0.25, 0.25]]], dtype=torch.float64))
    probe_logp = LOG(torch.tensor([[[0.1, 0.6, 0.2, 0.1], [0.7, 0.1, 0.1, 0.1]]], dtype=torch.float64))
    probe = ProbeDist(index=None, logp=probe_logp, tail=None, present=torch.tensor([True]))
    batch = SimpleNamespace(completion_mask=torch.tensor([[1.0, 1.0]], dtype=torch.float64))
    value = term.action_values(batch, logp, {"bare": probe})
    assert value.item() == approx64(float(union_topk_jsd(logp, probe_logp, 1).mean()))
    swapped = term.action_values(batch, probe_logp, {"bare": ProbeDist(None, logp, None, torch.tensor([True]))})
    assert swapped.item() == approx64(value.item())


def test_utilise_action_values_from_the_probe() -> None:
    term = AusoUtilise(AusoUtiliseOptions(probe="bare", topk=2, bins="probe"), coef=1.0)
    logp = LOG(torch.tensor([[[0.1, 0.2, 0.3, 0.4], [0.4, 0.3, 0.2, 0.1]],
                             [[0.25, 0.25, 0.25, 0.25], [0.7, 0.1, 0.1, 0.1]]], dtype=torch.float64))  # fmt: skip
    probe_logp = logp.flip(-1)
    probe = ProbeDist(index=None, logp=probe_logp, tail=None, present=torch.tensor([True, False]))
    batch = SimpleNamespace(completion_mask=torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64))
    values = term.action_values(batch, logp, {"bare": probe})
    per_token = topk_jsd(logp, probe_logp, 2)
    assert values[0].item() == pytest.approx(float(per_token[0].mean())) and math.isnan(values[1].item())
    assert term.action_values(batch, logp, {}).isnan().all() and term.action_values(batch, logp, {}).shape == (2,)
    assert term.action_values(batch, torch.zeros(3, 2, 4), {}).shape == (3,)  # one per row (b), not per token
    wide = AusoUtilise(AusoUtiliseOptions(probe="bare", topk=64, bins="probe"), coef=1.0)  # k cut to V - 1 = 3: full JSD
    assert wide.action_values(batch, logp, {"bare": probe})[0].item() == pytest.approx(float(jsd(logp, probe_logp)[0].mean()))


def test_utilise_with_a_probe_index_covering_the_vocabulary() -> None:
    """A probe that lists every token (V <= topk): k is cut to V - 1 and the last token joins the tail bin."""
    term = AusoUtilise(AusoUtiliseOptions(probe="bare", topk=64, bins="probe"), coef=1.0)
    logp = LOG(torch.tensor([[[0.1, 0.2, 0.3, 0.4]]], dtype=torch.float64))
    probe_p = torch.tensor([[[0.5, 0.3, 0.15, 0.05]]], dtype=torch.float64)
    order = torch.tensor([[[2, 0, 3, 1]]])
    probe = ProbeDist(index=order, logp=LOG(probe_p), tail=torch.full((1, 1), -math.inf, dtype=torch.float64),
                      present=torch.tensor([True]))  # fmt: skip
    batch = SimpleNamespace(completion_mask=torch.ones(1, 1, dtype=torch.float64))
    value = term.action_values(batch, logp, {"bare": probe})
    full_q = torch.zeros(4, dtype=torch.float64).scatter(0, order[0, 0], probe_p[0, 0])  # the probe on token ids
    assert value.item() == pytest.approx(float(jsd(logp[0, 0], LOG(full_q))))
