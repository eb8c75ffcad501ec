"""Reward models as policies: each request's chat in, one score out.

A :class:`RewardModelPolicy` wraps any transformers
``AutoModelForSequenceClassification`` (e.g. Skywork-Reward-V2, or a tiny
head on the built-in model for tests). A request's ``messages`` (typically the
user's query and the assistant's answer) are rendered through the tokenizer's
chat template *without* a generation prompt, the way reward models are trained
to read a finished exchange. The reply is a :class:`~arena.policies.base.Completion`
with ``score`` set and ``text = repr(score)``, a string ``float()`` parses back
exactly, so a game can read a reward model's verdict like any seat's output.

Scores are the logit at ``label_index`` (models with one label: index 0) of
the token transformers pools: the last one that is not the model's pad token.
Chats are scored in batches of similar length, padded on the right with the
model's pad token (its EOS when it has none, written into the model config):
under a causal mask no real token sees the padding, so a batched score equals
the score of the same chat alone. A chat longer than ``max_length`` (capped by
the model's ``max_position_embeddings``) keeps its last ``max_length`` tokens
(:func:`~arena.policies.base.fit_prompt` with no new tokens): the answer being
judged sits at the end; the completion records ``prompt_truncated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from arena.core.models import load_reward_model
from arena.core.types import ChatMessage
from arena.policies.base import Completion, Request, fit_prompt


class RewardModelPolicy:
    """A :class:`~arena.policies.base.Policy` whose completions are reward-model scores."""

    def __init__(
        self,
        model: str | Any,
        tokenizer: Any | None = None,
        dtype: str = "float32",
        device: str = "cpu",
        max_batch_size: int = 16,
        max_length: int = 4096,
        label_index: int = 0,
        name: str = "rm",
    ):
        if isinstance(model, str):
            model, tokenizer = load_reward_model(model, dtype=dtype, device=device)
        elif tokenizer is None:
            raise ValueError("pass the tokenizer together with a model object")
        num_labels = model.config.num_labels
        if not 0 <= label_index < num_labels:
            raise ValueError(f"label_index must be in [0, {num_labels}) for this model, got {label_index}")
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError("the reward model's tokenizer has no chat template to render the messages with")
        if max_batch_size < 1:
            raise ValueError(f"max_batch_size must be at least 1, got {max_batch_size}")
        text_config = model.config.get_text_config()
        if text_config.pad_token_id is None:
            # transformers pools the last non-pad token, and refuses batches without a pad id.
            pad = tokenizer.pad_token_id
            text_config.pad_token_id = pad if pad is not None else tokenizer.eos_token_id
        if text_config.pad_token_id is None:
            raise ValueError("the reward model's tokenizer has neither a pad nor an EOS token to pad with")
        limit = getattr(text_config, "max_position_embeddings", None)
        self.max_length = min(max_length, limit) if limit else max_length
        if self.max_length < 2:
            raise ValueError(f"max_length must be at least 2, got {self.max_length}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.pad_id = int(text_config.pad_token_id)
        self.label_index = label_index
        self.max_batch_size = max_batch_size
        self.name = name
        self.device = next(model.parameters()).device

    def encode(self, messages: Sequence[ChatMessage]) -> tuple[list[int], bool]:
        """The chat's token ids (no generation prompt), cut to ``max_length``; and whether it was cut."""
        ids = self.tokenizer.apply_chat_template(list(messages), add_generation_prompt=False, tokenize=True)
        ids = list(ids["input_ids"] if hasattr(ids, "keys") else ids)
        fitted = fit_prompt(ids, 0, self.max_length, "truncate")
        if fitted is None:  # "truncate" always fits; a None here is a bug in fit_prompt
            raise RuntimeError(f"fit_prompt returned None in truncate mode for {len(ids)} tokens")
        return fitted[0], len(fitted[0]) < len(ids)

    def generate(self, requests: Sequence[Request]) -> list[Completion]:
        encoded = [self.encode(r.messages) for r in requests]
        scores = self.score_ids([ids for ids, _ in encoded])
        return [
            Completion(text=repr(s), score=s, prompt_ids=ids, prompt_truncated=cut, finish_reason="stop")
            for s, (ids, cut) in zip(scores, encoded, strict=True)
        ]

    def score_chats(self, chats: Sequence[Sequence[ChatMessage]]) -> list[float]:
        """One score per chat."""
        return self.score_ids([self.encode(c)[0] for c in chats])

    @torch.inference_mode()
    def score_ids(self, sequences: Sequence[list[int]]) -> list[float]:
        """One score per token sequence, in batches of at most ``max_batch_size`` of similar length."""
        scores: list[float] = [0.0] * len(sequences)
        order = sorted(range(len(sequences)), key=lambda i: len(sequences[i]))
        for start in range(0, len(order), self.max_batch_size):
            chunk = order[start : start + self.max_batch_size]
            width = max(len(sequences[i]) for i in chunk)
            input_ids = torch.full((len(chunk), width), self.pad_id, dtype=torch.long)
            mask = torch.zeros((len(chunk), width), dtype=torch.long)
            for row, i in enumerate(chunk):
                input_ids[row, : len(sequences[i])] = torch.tensor(sequences[i])
                mask[row, : len(sequences[i])] = 1
            logits = self.model(input_ids=input_ids.to(self.device), attention_mask=mask.to(self.device)).logits
            for i, value in zip(chunk, logits[:, self.label_index].float().tolist(), strict=True):
                scores[i] = float(value)
        return scores
