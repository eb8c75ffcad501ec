"""Torch intra-op threads (arena/policies/hardware.py): cores shared out among concurrent jobs, a user's
explicit setting wins, and the choice is said in one line."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from arena.policies import hardware
from arena.policies.hardware import (
    THREADS_ENV,
    VLLM_BIND_ENV,
    choose_threads,
    cpu_ranges,
    set_torch_threads,
    set_vllm_cpu_bind,
    torch_threads_for,
    usable_cores,
    vllm_cpu_bind,
)


@pytest.fixture(autouse=True)
def restore_threads() -> Iterator[None]:
    before, applied = torch.get_num_threads(), list(hardware._applied)
    yield
    torch.set_num_threads(before)
    hardware._applied[:] = applied


def test_cores_are_shared_out_among_the_jobs() -> None:
    assert choose_threads(16) == (16, "16 cores / 1 concurrent job")
    assert choose_threads(16, jobs=2) == (8, "16 cores / 2 concurrent jobs")
    assert choose_threads(16, jobs=3)[0] == 5  # never more than the cores in all
    assert choose_threads(16, jobs=2, reserved=4) == (6, "16 cores less 4 reserved / 2 concurrent jobs")
    assert choose_threads(2, jobs=4)[0] == 1 and choose_threads(2, jobs=1, reserved=8)[0] == 1  # at least one
    assert choose_threads(16, jobs=0)[0] == 16


def test_an_explicit_setting_wins() -> None:
    assert choose_threads(16, jobs=2, env="3") == (3, f"{THREADS_ENV}=3 as set")
    assert choose_threads(16, jobs=2, env=" ", torch_threads=16, torch_default=16)[0] == 8  # blank: unset
    assert choose_threads(16, jobs=2, torch_threads=5, torch_default=16) == (5, "torch.set_num_threads(5) as set")
    assert choose_threads(16, jobs=2, env="4", torch_threads=5, torch_default=16)[0] == 4  # the variable first
    for bad in ("0", "-2", "many"):
        with pytest.raises(ValueError, match=f"{THREADS_ENV}='{bad}' is not a positive integer"):
            choose_threads(16, env=bad)


def test_set_torch_threads_applies_and_says_it(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(hardware, "usable_cores", lambda: 8)
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda _pid: set(range(8)))
    torch.set_num_threads(8)  # torch's default here: every CPU
    hardware._applied.clear()
    assert set_torch_threads(jobs=2, what="rollouts beside the learner") == 4 == torch.get_num_threads()
    assert capsys.readouterr().out == "threads: torch intra-op 4 per job (8 cores / 2 concurrent jobs): rollouts beside the learner\n"
    assert set_torch_threads(jobs=4) == 2  # its own earlier choice is not a user's
    torch.set_num_threads(3)  # a user's call wins over a later choice
    assert set_torch_threads(jobs=2) == 3 == torch.get_num_threads()
    monkeypatch.setenv(THREADS_ENV, "1")
    assert set_torch_threads(jobs=2) == 1 == torch.get_num_threads()
    assert "OMP_NUM_THREADS=1 as set" in capsys.readouterr().out


def test_usable_cores_is_within_the_machine() -> None:
    import os

    assert 1 <= usable_cores() <= (os.cpu_count() or 1)


def test_the_async_pipeline_shares_the_cores_with_the_learner(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from arena.loop.components.rollouts import Pipeline

    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(hardware, "usable_cores", lambda: 4)
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda _pid: set(range(4)))
    torch.set_num_threads(4)
    hardware._applied.clear()
    seen: list[int] = []
    pipe = Pipeline(lambda t: ([], {"t": float(seen.append(torch.get_num_threads()) or t)}), k=1, version=0, last=1)
    assert pipe.take(1) == ([], {"t": 1.0}) and seen == [2] and torch.get_num_threads() == 2
    pipe.close()
    assert torch.get_num_threads() == 4  # restored when the pipeline closes
    assert "threads: torch intra-op 2 per job (4 cores / 2 concurrent jobs): the async rollout thread" in capsys.readouterr().out
    pipe = Pipeline(lambda t: ([], {}), k=0, version=0, last=1)  # k = 0 overlaps nothing: nothing changes
    pipe.take(1)
    pipe.close()
    assert torch.get_num_threads() == 4 and capsys.readouterr().out == ""


def test_settings_hold_after_vllm_cpu_disables_torch_set_num_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    # vllm 0.32's CPUWorker.init_device does exactly this in the learner's process (in-process engine).
    def skip_set_num_threads(x: int) -> None:
        pass

    monkeypatch.delenv(THREADS_ENV, raising=False)
    monkeypatch.setattr(hardware, "usable_cores", lambda: 4)
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda _pid: set(range(4)))
    torch._C.set_num_threads(4)
    hardware._applied.clear()
    monkeypatch.setattr(torch, "set_num_threads", skip_set_num_threads)
    with torch_threads_for(jobs=2, what="the async rollout thread beside the learner") as n:
        assert n == 2 == torch.get_num_threads()  # the engine's generation and the learner: half each
    assert torch.get_num_threads() == 4


def test_cpu_ranges() -> None:
    assert cpu_ranges([0, 1, 2, 5]) == "0-2,5"
    assert cpu_ranges([7, 3, 4, 4]) == "3-4,7"
    assert cpu_ranges([0]) == "0" and cpu_ranges([]) == ""


def test_a_separate_vllm_cpu_engine_gets_the_cores_the_learner_leaves() -> None:
    assert vllm_cpu_bind(range(8), overlapped=True) == ("0-3", "4 of 8 cores for the engine, the rest for the learner")
    assert vllm_cpu_bind([0, 1, 2], overlapped=True)[0] == "0-1"  # the learner takes 3 // 2 = 1
    assert vllm_cpu_bind([0], overlapped=True)[0] == "0"  # one core: both need one
    assert vllm_cpu_bind(range(16), overlapped=True, cores=4)[0] == "0-1"  # a CPU quota of 4 cores
    assert vllm_cpu_bind(range(8), overlapped=False) == (None, "the engine and the learner take turns: vLLM's own binding")
    assert vllm_cpu_bind(range(8), overlapped=True, bind_env="2-5") == (None, f"{VLLM_BIND_ENV}=2-5 as set")
    assert vllm_cpu_bind(range(8), overlapped=True, bind_env=" ")[0] == "0-3"  # blank: unset


@given(st.sets(st.integers(0, 255), min_size=1, max_size=64), st.integers(1, 300))
def test_the_engine_and_the_learner_never_ask_for_more_than_the_cores(ids: set[int], quota: int) -> None:
    bind, _ = vllm_cpu_bind(sorted(ids), overlapped=True, cores=quota)
    assert bind is not None
    engine = {int(x) for part in bind.split(",") for x in range(int(part.split("-")[0]), int(part.split("-")[-1]) + 1)}
    cores = min(len(ids), quota)
    assert engine <= ids and len(engine) >= 1
    learner = choose_threads(cores, jobs=2)[0]  # what the async pipeline gives the learner
    assert len(engine) + learner <= max(cores, 2)  # one core: each needs one


def test_set_vllm_cpu_bind_only_for_an_engine_process_of_its_own(monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.delenv(VLLM_BIND_ENV, raising=False)
    monkeypatch.setattr(hardware, "usable_cores", lambda: 4)
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda _pid: set(range(4)))
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # arena's default: the engine in this process
    assert set_vllm_cpu_bind(overlapped=True) is None and VLLM_BIND_ENV not in hardware.os.environ
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    assert set_vllm_cpu_bind(overlapped=False) is None and VLLM_BIND_ENV not in hardware.os.environ
    if torch.cuda.is_available():
        return
    assert set_vllm_cpu_bind(overlapped=True) == "0-1" == hardware.os.environ[VLLM_BIND_ENV]
    assert capsys.readouterr().out == ("threads: vLLM-cpu engine bound to CPUs 0-1 (2 of 4 cores for the engine, "
                                       "the rest for the learner)\n")
    monkeypatch.setenv(VLLM_BIND_ENV, "3")  # a user's choice wins
    assert set_vllm_cpu_bind(overlapped=True) is None and hardware.os.environ[VLLM_BIND_ENV] == "3"
