"""The learner's forward passes over a micro-batch: log-probabilities, chosen replies normalised over their
choices, and the no-grad passes a step takes before its update (the old policy, the reference, the magnet).

:class:`ModelPasses` is a base of :class:`arena.learners.update.Learner`; it reads the learner's ``cfg``,
``pad_id``, ``device``, ``temperature``, ``engine`` and ``model``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from arena.core.types import Sample
from arena.learners.batch import MicroBatch, collate, completion_log_softmax, completion_logprobs
from arena.learners.losses import normalise_choices
from arena.learners.regularisers import choice_log_softmax


@dataclass(frozen=True)
class Choices:
    """The choice logits of a micro-batch's chosen replies: ``own (b,)`` each row's summed logprob ``l``,
    ``alt_sums (n_alt,)`` its alternatives', ``owner[a]`` the row of alternative ``a`` (with gradient when
    the pass has one)."""

    own: torch.Tensor
    alt_sums: torch.Tensor
    owner: list[int]

    def table(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``log softmax(l)`` per row as a table, and its valid cells (:func:`~arena.learners.regularisers.choice_log_softmax`)."""
        return choice_log_softmax(self.own, self.alt_sums, self.owner)


@dataclass(frozen=True)
class Scored:
    """A no-grad pass of a micro-batch under another policy: ``logp (b, T)`` its logprobs of the sampled tokens,
    chosen replies normalised over their choices, and its choice table (``None`` without chosen replies)."""

    logp: torch.Tensor
    table: tuple[torch.Tensor, torch.Tensor] | None


class ModelPasses:
    """Forward passes of the learner's model (and of any other policy) over micro-batches."""

    cfg: Any
    pad_id: int
    device: torch.device
    temperature: float
    engine: Any
    model: Any

    def _forward_model(self) -> Any:
        return self.engine if self.engine is not None else self.model

    def _autocast(self) -> bool:
        """bf16 autocast over float32 weights (``learner.autocast_bf16``; DeepSpeed runs its own precision)."""
        return bool(self.cfg.autocast_bf16) and self.engine is None

    def _log_softmax(self, model: Any, mb: MicroBatch) -> torch.Tensor:
        with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16, enabled=self._autocast()):
            return completion_log_softmax(model, mb, self.temperature, self.cfg.share_prompt_prefix)

    def _logprobs(self, model: Any, mb: MicroBatch) -> torch.Tensor:
        """The completion tokens' log-probs ``(b, T)``: without autocast, through the lm head a slice at a time
        where the model allows (:func:`~arena.learners.batch.completion_logprobs`), no ``(b, T, V)`` tensor."""
        if self._autocast():
            return self._log_softmax(model, mb).gather(-1, mb.completion_ids[..., None]).squeeze(-1)
        return completion_logprobs(model, mb, self.temperature, self.cfg.share_prompt_prefix)

    def _normalise_choices(self, model: Any, samples: Sequence[Sample], mb: MicroBatch, logp: torch.Tensor
                           ) -> tuple[torch.Tensor, Choices | None]:
        """``logp`` (b, T) with each chosen reply's likelihood normalised over its sample's ``alternatives``
        (a reply chosen among a request's choices, arena/policies/choices.py): with ``l`` a reply's summed
        completion logprobs under ``model``, the row's last completion token gets
        ``- logsumexp(l_chosen, l_alt_1, ...)``, so the row sums to ``log P(chosen) = log softmax(l)_chosen``.
        An alternative that is itself a row of ``mb`` (the same prompt and completion: exact descent trains
        every legal action of a state, score-mode play often picks both at one state) takes that row's ``l``,
        gradient included; the others run in one more pass (with gradient when enabled). Rows without
        alternatives are unchanged; a micro-batch whose alternatives are all its own rows runs no extra pass.
        Also returns the :class:`Choices` (None when no row has alternatives), from which the choice's entropy
        and KL are taken."""
        where = {(tuple(samples[i].prompt_ids), tuple(samples[i].completion_ids)): r for r, i in enumerate(mb.index)}
        rows, owner, source = [], [], []  # source: the alternative's l in cat(the rows' l, the extra pass's)
        for r, i in enumerate(mb.index):
            for alt in samples[i].alternatives:
                owner.append(r)
                same = where.get((tuple(samples[i].prompt_ids), tuple(alt)))
                if same is not None:
                    source.append(same)
                    continue
                source.append(len(mb.index) + len(rows))
                rows.append(samples[i].model_copy(update={"completion_ids": list(alt), "logprobs": [], "alternatives": [],
                                                          "token_weights": None, "probes": {}}))
        if not owner:
            return logp, None
        own = (logp * mb.completion_mask).sum(-1)  # (b,) each row's l
        sums = own
        if rows:
            alt_mb = collate(rows, list(range(len(rows))), self.pad_id, self.device, self.cfg.share_prefix_min_tokens)
            alt_logp = self._logprobs(model, alt_mb)
            sums = torch.cat([own, (alt_logp * alt_mb.completion_mask).sum(-1)])
        alt_sums = sums[torch.tensor(source, device=sums.device)]  # (n_alt,)
        return normalise_choices(logp, mb.completion_mask, alt_sums, owner), Choices(own, alt_sums, owner)

    def _scored(self, model: Any, samples: Sequence[Sample], micro: Sequence[MicroBatch]) -> list[Scored]:
        """Every micro-batch scored by ``model`` (call under no-grad): its normalised logprobs and choice tables."""
        out = []
        for mb in micro:
            logp, choices = self._normalise_choices(model, samples, mb, self._logprobs(model, mb))
            out.append(Scored(logp, None if choices is None else choices.table()))
        return out
