"""Several trainable policies' LoRA adapters on ONE base (``learner.lora.shared_base``, issue #36).

Policies ``p_1 .. p_n`` over the same base weights ``W`` hold one ``peft.PeftModel`` with one adapter
per policy, named after it; policy ``p_k``'s layers compute

    y = W x + (alpha_k / r_k) * B_k (A_k x)

and no other adapter's term: exactly what ``p_k`` alone, as the ``default`` adapter of its own copy of
``W``, computes. Memory: one base plus ``n`` adapters, against ``n`` bases plus ``n`` adapters.

peft runs one adapter at a time, its *active* one, and ``set_adapter`` makes an adapter active and
trainable (``requires_grad``) and every other frozen. A :class:`PolicyAdapter` is a policy's view
of the shared model: every forward first makes its adapter active, so its learner's training,
old-logprob and canary passes run its own adapter, and (with the view's :meth:`PolicyAdapter.activate`
as the hf generator's ``adapter`` hook) so does its generator. Its parameters with ``requires_grad``
after activation are its own adapter's alone: its optimizer holds those. It saves and loads its
own adapter as a one-adapter run's folder (``adapter_config.json``, ``adapter_model.safetensors``).
The KL reference (``beta > 0``) is a separate frozen copy of the base without adapters, as with one policy.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from arena.learners.lora import LoraConfig, adapter_state_dict, apply_lora, peft_config, seeded


class PolicyAdapter(torch.nn.Module):
    """Policy ``adapter``'s view of the shared ``peft`` model (its named adapter active in every forward)."""

    def __init__(self, peft_model: Any, adapter: str):
        super().__init__()
        self.peft = peft_model
        self.adapter = adapter
        self.activate()

    def activate(self) -> None:
        """Make this policy's adapter the one that runs, and the one with ``requires_grad``."""
        if self.peft.active_adapter != self.adapter:
            self.peft.set_adapter(self.adapter)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        self.activate()
        return self.peft(*args, **kwargs)

    @property
    def peft_config(self) -> dict[str, Any]:
        return self.peft.peft_config

    def get_base_model(self) -> Any:
        """The shared transformers model (every policy's adapter layers inside)."""
        return self.peft.get_base_model()

    def save_pretrained(self, folder: str | Path, **_: Any) -> None:
        """This policy's adapter alone, as a one-adapter run saves it (loads with ``load_causal_lm``)."""
        from safetensors.torch import save_file

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.peft.peft_config[self.adapter].save_pretrained(str(folder))
        state = {k: v.detach().contiguous() for k, v in adapter_state_dict(self).items()}
        save_file(state, str(folder / "adapter_model.safetensors"), metadata={"format": "pt"})


def policy_adapter(base: Any, adapter: str, cfg: LoraConfig, shared: dict[int, Any]) -> PolicyAdapter:
    """Policy ``adapter``'s view of ``base`` with its own adapter added (``shared``: the peft model over each
    base so far, by ``id(base)``; the first policy on a base wraps it, the next ones add their adapter)."""
    peft_model = shared.get(id(base))
    if peft_model is None:
        peft_model = shared[id(base)] = apply_lora(base, cfg, adapter)
    else:
        seeded(lambda: peft_model.add_adapter(adapter, peft_config(cfg)))
    return PolicyAdapter(peft_model, adapter)
