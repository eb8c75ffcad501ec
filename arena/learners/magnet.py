"""The magnet policy of ``learner.magnet``: magnetic mirror descent's reverse-KL pull, held by the learner.

Magnetic mirror descent (MMD; Sokota et al., 2022, arXiv 2206.05825) updates a policy at each decision
as ``pi_{t+1} ∝ [pi_t * rho^(alpha eta) * exp(eta q)]^(1 / (1 + alpha eta))``; its deep form, the one
trained here, is a policy-gradient loss plus ``alpha KL(pi || rho)``. Plain descent-ascent (alpha = 0)
cycles in a zero-sum game; with the magnet the last iterate converges to the alpha-regularised
equilibrium (the tabular check: arena/algorithms/mmd.py, tests/learners/test_magnet_mmd.py). The learner's
loss gains ``coef * KL(pi || rho)`` (``Learner.step``; the formulas in arena/learners/regularisers.py):
exact over the legal choices of a chosen reply, the per-token ``k1``/``k3`` estimate of a generated one.

``rho`` (``learner.magnet.kind``):

- ``base``: the frozen reference model when the learner has one (``learner.beta > 0``), else the trained
  weights as they were at the learner's first step (after any warm start), kept and never moved;
- ``previous``: the trained weights at the first step, reset to the current ones every ``every`` steps
  (R-NaD's regularisation policy, reset periodically; with ``every: 1`` the policy at the start of each
  step, the proximal term of PPO with a reverse KL, which acts only from a batch's second epoch on);
- ``ema``: a moving average, ``rho <- rho + mix (pi - rho)`` every ``every`` steps.

**Deviation, documented**: MMD moves its magnet geometrically, ``rho <- rho^(1-mix) pi^mix`` (normalised).
For a softmax policy whose weights ARE its logits (tabular) the EMA of the weights is exactly that
(``softmax((1-m) z_rho + m z_pi) ∝ rho^(1-m) pi^m``, tests/learners/test_magnet.py); for a network the EMA of
the weights is the practical form (as DeepNash's target networks), not the same mixture.

The learner owns the magnet's weights (fp32 copies of its trained parameters: the LoRA adapters only
when it trains adapters, the fp32 master with bf16 weights); to score under ``rho`` they are put into
the model for one no-grad pass a step and the model's own restored bit for bit (:meth:`Magnet.scoring`).
They are moved after the learner's last optimizer step of a step (:meth:`Magnet.after_step`) and saved
in its ``state_dict``, so a resumed run is the straight run.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import torch

from arena.learners.progress import Progress, scheduled_lr

if TYPE_CHECKING:
    from arena.learners.config import MagnetConfig


class Magnet:
    """The magnet ``rho``: a frozen model (the reference) or weights of its own, moved as configured."""

    def __init__(self, cfg: MagnetConfig, ref_model: Any | None):
        self.cfg = cfg
        self.model = ref_model if cfg.kind == "base" else None  # rho is this frozen model
        self.weights: list[torch.Tensor] | None = None  # else rho's trained weights (fp32), from the first step
        self.steps = 0  # learner steps taken: the magnet moves after every ``every``-th

    def coef(self, progress: Progress | None) -> float:
        """The coefficient at this point of training: ``coef``, or annealed from it to ``coef_end``
        (linear or cosine over ``Progress.fraction``, the formula of the learning rate's schedule)."""
        if progress is None or self.cfg.anneal == "constant":
            return self.cfg.coef
        return scheduled_lr(self.cfg.coef, self.cfg.coef_end, self.cfg.anneal, progress.fraction)

    def start(self, source: Sequence[torch.Tensor]) -> None:
        """Take ``rho``'s weights from the trained ones, when it keeps its own and has none yet (a fresh run's
        first step; a resumed run loads them)."""
        if self.model is None and self.weights is None:
            self.weights = [t.detach().float().clone() for t in source]

    @contextlib.contextmanager
    def scoring(self, module: Any, params: Sequence[torch.Tensor]) -> Iterator[Any]:
        """The model that scores under ``rho`` for the block: the frozen model, or ``module`` with ``rho``'s
        weights in its trained ``params`` (rounded to their dtype), restored bit for bit after the block."""
        if self.model is not None:
            yield self.model
            return
        assert self.weights is not None, "Magnet.start comes first"
        saved = [p.detach().clone() for p in params]
        try:
            with torch.no_grad():
                for p, w in zip(params, self.weights, strict=True):
                    p.copy_(w)
            yield module
        finally:
            with torch.no_grad():
                for p, s in zip(params, saved, strict=True):
                    p.copy_(s)

    def after_step(self, source: Sequence[torch.Tensor]) -> None:
        """One learner step is done (its optimizer steps taken; ``source`` the trained weights now): every
        ``every``-th, ``previous`` resets ``rho`` to them and ``ema`` moves it ``mix`` of the way."""
        self.steps += 1
        if self.weights is None or self.cfg.kind == "base" or self.steps % self.cfg.every:
            return
        with torch.no_grad():
            for w, s in zip(self.weights, source, strict=True):
                if self.cfg.kind == "previous":
                    w.copy_(s)
                else:
                    w.lerp_(s.detach().float(), self.cfg.mix)

    def state_dict(self) -> dict[str, Any]:
        return {"steps": self.steps, "weights": None if self.weights is None else [w.clone() for w in self.weights]}

    def load_state_dict(self, state: dict[str, Any] | None, device: torch.device) -> None:
        """Restore :meth:`state_dict`; ``None`` (a checkpoint of a run without this magnet): start afresh, ``rho``
        taken at the next step."""
        state = state or {"steps": 0, "weights": None}
        self.steps = int(state["steps"])
        saved = state["weights"]
        self.weights = None if saved is None or self.model is not None else [w.to(device, torch.float32).clone()
                                                                               for w in saved]
