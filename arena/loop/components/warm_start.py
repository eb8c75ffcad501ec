"""The warm start (``train.warm_start``): supervised fine-tuning on demonstrations before self-play.

A small model may not write a game's format at all (Skill-SP's proposals, household's actions), so
self-play has no signal to learn from. The warm start first fits the trainable policy to
demonstrations by maximum likelihood (arena/learners/sft.py: completion-token NLL, masked like the RL
samples, through the same learner), then self-play begins from those weights.

**Sources** (``source:``):

* ``bots``: the game's scripted bots play ``games`` games through the runner (``bots``: seat pattern
  -> bot, as ``seats:`` takes ``scripted:<bot>``); each turn of a demonstrated seat gives the exact
  chat prompt the LLM policy would see there and the bot's reply.
* ``episodes``: a JSONL (or ``.jsonl.gz``) of saved episodes, the format ``runner.episodes_jsonl``
  and ``python -m arena.eval --episodes`` write; with ``min_reward``, rejection sampling as in expert
  iteration: only seats whose episode return reaches it are demonstrations.
* ``pairs``: a JSONL of ``{"messages": [chat messages], "completion": "..."}`` or
  ``{"prompt": "text", "completion": "..."}`` (a text prompt is one user message, chat-templated).

Which turns of an episode are demonstrations (``bots`` and ``episodes``): those of the ``seats``
patterns (default: the seats the run's ``seats:`` table gives the trainable policy), in ``phases``
(default: all), that parsed and were not retried (``valid_only``), whose seat's episode return is at
least ``min_reward`` (one number, or per role or seat pattern). A reply opened by a written start
(a last assistant message with ``continue_final``, e.g. Skill-SP's ``proposer_prefix``) has that start
in the prompt; a bot's text that begins with it has it removed, so the model learns what follows.

**Tokens.** prompt: ``chat_prompt_ids(tokenizer, messages)``, what the HF policy encodes; completion:
``tokenizer.encode(text, add_special_tokens=False)`` plus the EOS token, the model's end of a reply
(none after a saved turn that stopped at its length limit). A demonstration longer than the model's
context, or whose completion is longer than the policy's ``max_new_tokens`` in its phase (it could
never write it), is left out (counted as ``too_long``).

**Steps.** ``steps`` optimizer steps of ``batch_size`` demonstrations (default: ``epochs`` passes,
``ceil(epochs * demos / batch_size)`` steps); the order is a permutation of the demonstrations per
epoch, seeded by ``train.seed`` and the epoch, so batch ``k`` is the same in every run and a run
resumed from a warm-start checkpoint continues exactly. Checkpoints (``checkpoint_every`` steps and
at the end) are the run's ``checkpoints/step_000000`` with ``warm_start`` in ``state.json``; the
warm start's rows go to ``<run_dir>/warm_start.jsonl``. The learner's optimizer runs at ``lr``
during the warm start and its moments are cleared at the end; the KL reference stays as configured
(``learner.reference``: by default the initial weights).
"""

from __future__ import annotations

import fnmatch
import json
import math
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from arena.core.errors import ConfigError
from arena.core.types import ChatMessage, Episode, Sample
from arena.loop.component import Component

MinReward = float | dict[str, float] | None


class _Common(BaseModel):
    model_config = ConfigDict(extra="forbid")

    epochs: float = Field(default=1.0, gt=0, description="Passes over the demonstrations (when steps is unset).")
    steps: int | None = Field(default=None, ge=1, description="Optimizer steps; unset: ceil(epochs * demos / batch_size).")
    lr: float = Field(default=1e-5, gt=0, description="AdamW learning rate during the warm start (self-play then uses "
                      "learner.lr with fresh optimizer moments).")
    batch_size: int = Field(default=16, ge=1, description="Demonstrations per optimizer step (micro-batched by "
                            "learner.token_budget; the gradient is the full batch's).")
    checkpoint_every: int = Field(default=50, ge=1, description="Warm-start steps between checkpoints (and one at the end).")
    max_demos: int | None = Field(default=None, ge=1, description="Use at most this many demonstrations (the first ones).")


class _FromEpisodes(_Common):
    seats: list[str] | None = Field(default=None, description="Seat patterns (fnmatch) whose turns are demonstrations; "
                                    "default: the seats the run's seats: table gives the trainable policy.")
    phases: list[str] | None = Field(default=None, description="Phases whose turns are demonstrations; default: all.")
    min_reward: MinReward = Field(default=None, description="Rejection sampling: keep a seat's turns only if its episode "
                                  "return is at least this; a number, or a mapping of roles or seat patterns to "
                                  "thresholds (seats that match none are kept).")
    valid_only: bool = Field(default=True, description="Only turns that parsed and were not retried.")


class BotsSource(_FromEpisodes):
    """Demonstrations from the game's scripted bots, played through the runner."""

    source: Literal["bots"]
    bots: dict[str, str] = Field(default_factory=lambda: {"*": "default"}, description="Seat pattern -> bot of the game "
                                 "(a name, name:arg, or scripted:<name>); first match wins.")
    games: int = Field(default=64, ge=1, description="Games the bots play.")
    seed: int = Field(default=1_000_000_000, ge=0, description="Seed of the first game (game i: seed + i); apart "
                      "from the training seeds by default.")
    game: dict[str, Any] = Field(default_factory=dict, description="Game settings for the bots' games, over the run's "
                                 "(e.g. {split: train}).")

    @field_validator("bots")
    @classmethod
    def _bot_names(cls, value: dict[str, str]) -> dict[str, str]:
        if not value:
            raise ValueError("name at least one seat pattern, e.g. {'*': default}")
        return {k: v.removeprefix("scripted:") for k, v in value.items()}


class EpisodesSource(_FromEpisodes):
    """Demonstrations from saved episodes (rejection sampling with ``min_reward``)."""

    source: Literal["episodes"]
    path: str = Field(description="JSONL of episodes (.jsonl or .jsonl.gz), as runner.episodes_jsonl writes.")


class PairsSource(_Common):
    """Demonstrations as prompt/completion pairs."""

    source: Literal["pairs"]
    path: str = Field(description='JSONL, one {"messages": [...] or "prompt": "...", "completion": "..."} a line.')


WarmStartConfig = Annotated[BotsSource | EpisodesSource | PairsSource, Field(discriminator="source")]
SOURCES: dict[str, type[_Common]] = {"bots": BotsSource, "episodes": EpisodesSource, "pairs": PairsSource}


def parse_warm_start(value: Any) -> Any:
    """``train.warm_start`` validated by its source's model, so an error names the field itself
    (``lr: ...``), not the union's tag; a missing or unknown source names the valid ones."""
    if value is None or isinstance(value, _Common):
        return value
    if not isinstance(value, dict):
        raise ValueError(f"expected a mapping with source: {' | '.join(SOURCES)}, or null")
    source = value.get("source")
    if source not in SOURCES:
        raise ValueError(f"source: must be one of {', '.join(SOURCES)} (got {source!r})")
    from pydantic import ValidationError

    from arena.core.errors import format_validation_error

    try:
        return SOURCES[source].model_validate(value)
    except ValidationError as e:
        raise ValueError(format_validation_error(e)) from None


def check_warm_start(cfg: Any, origin: str = "config") -> None:
    """Start-up checks of ``train.warm_start`` against the rest of the config (one line each)."""
    ws = cfg.train.warm_start
    if ws is None:
        return
    where = f"{origin}: train.warm_start"
    if cfg.learner.backend != "torch":
        raise ConfigError(f"{where}: needs learner.backend torch (got {cfg.learner.backend!r})")
    if isinstance(ws, EpisodesSource | PairsSource) and not Path(ws.path).is_file():
        raise ConfigError(f"{where}.path: no such file {ws.path!r}")
    if isinstance(ws, PairsSource):  # read once here, so a bad file fails before any model loads
        read_pairs(ws.path)
    elif isinstance(ws, EpisodesSource):
        read_episodes(ws.path)
    if isinstance(ws, BotsSource):
        from arena.policies.scripted import make_bot

        for pattern, bot in ws.bots.items():
            try:
                make_bot(cfg.game.cls, bot)
            except ValueError as e:
                raise ConfigError(f"{where}.bots.{pattern}: {' '.join(str(e).split())}") from None
        if ws.game:
            bots_settings(cfg, ws, origin)


def bots_settings(cfg: Any, ws: BotsSource, origin: str = "config") -> BaseModel:
    from pydantic import ValidationError

    from arena.core.errors import format_validation_error

    raw = cfg.game.settings.model_dump(by_alias=True) | ws.game
    try:
        return cfg.game.cls.config_type.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(f"{origin}: {format_validation_error(e, 'train.warm_start.game')}") from None


# ------------------------------------------------------------------ demonstrations
def threshold(min_reward: MinReward, seat: str, role: str) -> float | None:
    """The return a seat must reach: ``min_reward``, or its entry for the role or the first matching seat pattern."""
    if min_reward is None or isinstance(min_reward, int | float):
        return min_reward
    if role in min_reward:
        return min_reward[role]
    return next((v for k, v in min_reward.items() if fnmatch.fnmatchcase(seat, k)), None)


def episode_turns(episodes: Iterable[Episode], ws: _FromEpisodes, seats: Sequence[str]) -> list[tuple[list[ChatMessage], str, str, str, bool]]:
    """``(messages, completion text, phase, role, ends)`` of each demonstrated turn (see the module)."""
    out = []
    for ep in episodes:
        for t in ep.turns:
            if not any(fnmatch.fnmatchcase(t.seat, p) for p in seats):
                continue
            if ws.phases is not None and t.phase not in ws.phases:
                continue
            if ws.valid_only and (not t.valid or t.retried):
                continue
            bar = threshold(ws.min_reward, t.seat, t.role)
            if bar is not None and ep.rewards.get(t.seat, -math.inf) < bar:
                continue
            out.append((list(t.messages), t.completion, t.phase, t.role, t.finish_reason != "length"))
    return out


def read_episodes(path: str) -> list[Episode]:
    """The episodes of a JSONL (``.gz``: gzip) file; a file that is not one is a one-line ConfigError."""
    import gzip
    import zlib

    from arena.core.types import read_jsonl

    try:
        return list(read_jsonl(path))
    except (ValueError, OSError, EOFError, zlib.error, gzip.BadGzipFile) as e:  # UnicodeDecodeError is a ValueError
        kind = "gzip" if str(path).endswith(".gz") else "text"
        raise ConfigError(f"train.warm_start.path: {path}: not a JSONL of episodes ({kind}: "
                          f"{type(e).__name__}: {' '.join(str(e).split())[:160]})") from None


def read_pairs(path: str) -> list[tuple[list[ChatMessage], str, str, str, bool]]:
    try:
        return _read_pairs(path)
    except (UnicodeDecodeError, OSError) as e:
        raise ConfigError(f"train.warm_start.path: {path}: not a UTF-8 JSONL of pairs ({type(e).__name__}: "
                          f"{' '.join(str(e).split())[:160]})") from None


def _read_pairs(path: str) -> list[tuple[list[ChatMessage], str, str, str, bool]]:
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise ConfigError(f"train.warm_start.path: {path}:{n}: not JSON ({e.msg})") from None
            messages = row.get("messages") if isinstance(row, dict) else None
            if messages is None and isinstance(row, dict) and isinstance(row.get("prompt"), str):
                messages = [{"role": "user", "content": row["prompt"]}]
            ok = (isinstance(messages, list) and messages and isinstance(row.get("completion"), str)
                  and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                          for m in messages))
            if not ok:
                raise ConfigError(f"train.warm_start.path: {path}:{n}: expected {{\"messages\": [{{role, content}}, ...] "
                                  "or \"prompt\": text, \"completion\": text}")
            out.append((messages, row["completion"], str(row.get("phase", "")), str(row.get("role", "")), True))
    return out


def play_bots(cfg: Any, ws: BotsSource) -> list[Episode]:
    """The bots' games, played through the runner with the game's own cross-episode state."""
    from arena.runner import EpisodeSpec, Runner, SeatMap
    from arena.policies.scripted import ScriptedPolicy, make_bot

    settings = bots_settings(cfg, ws) if ws.game else cfg.game.settings
    make_env = lambda: cfg.game.cls(settings)  # noqa: E731
    policies = {f"scripted:{b}": ScriptedPolicy(make_bot(cfg.game.cls, b), name=f"scripted:{b}") for b in set(ws.bots.values())}
    seats = SeatMap({k: f"scripted:{b}" for k, b in ws.bots.items()})
    state = make_env().make_state()
    runner = Runner(make_env, policies, seats, num_envs=cfg.runner.num_envs, progress=cfg.runner.progress, state=state)
    return runner.play([EpisodeSpec(seed=ws.seed + i) for i in range(ws.games)])


def tokenize(tokenizer: Any, messages: list[ChatMessage], text: str, ends: bool) -> tuple[list[int], list[int]]:
    """Prompt ids as the policy encodes them; the completion's ids (a written start it repeats removed) and EOS."""
    from arena.policies.base import chat_prompt_ids

    last = messages[-1]
    if last["role"] == "assistant" and last.get("continue_final") and text.startswith(last["content"]):
        text = text[len(last["content"]):]
    ids = list(tokenizer.encode(text, add_special_tokens=False))
    return chat_prompt_ids(tokenizer, messages), ids + ([tokenizer.eos_token_id] if ends else [])


def demonstrations(cfg: Any, tokenizer: Any, max_len: int | None) -> tuple[list[Sample], dict[str, float]]:
    """The warm start's samples and counts (``demos``, ``tokens``, ``too_long``, ``episodes``)."""
    from arena.learners.sft import demo_sample

    ws = cfg.train.warm_start
    stats: dict[str, float] = {}
    if isinstance(ws, PairsSource):
        turns = read_pairs(ws.path)
    else:
        if isinstance(ws, BotsSource):
            episodes = play_bots(cfg, ws)
        else:
            episodes = read_episodes(ws.path)
        stats["episodes"] = float(len(episodes))
        seats = ws.seats or [p for p, name in cfg.seat_table().items() if name == cfg.trainable]
        turns = episode_turns(episodes, ws, seats)
    spec = cfg.policies[cfg.trainable]
    samples, too_long = [], 0
    for messages, text, phase, role, ends in turns:
        prompt, completion = tokenize(tokenizer, messages, text, ends)
        budget = spec.params_for(phase).max_new_tokens  # what the policy could write there
        if not completion or len(completion) > budget or (max_len is not None and len(prompt) + len(completion) > max_len):
            too_long += 1
            continue
        samples.append(demo_sample(prompt, completion, phase, role))
        if ws.max_demos is not None and len(samples) >= ws.max_demos:
            break
    stats |= {"demos": float(len(samples)), "tokens": float(sum(len(s.completion_ids) for s in samples)),
              "too_long": float(too_long)}
    return samples, stats


def batch_indices(n: int, batch_size: int, step: int, seed: int) -> list[int]:
    """Demonstrations of warm-start step ``step`` (from 1): positions ``[(step-1)B, step B)`` of the
    concatenated per-epoch permutations (epoch ``e``: ``default_rng([seed, e]).permutation(n)``)."""
    start, out = (step - 1) * batch_size, []
    while len(out) < batch_size and n:
        epoch, offset = divmod(start + len(out), n)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        out.extend(int(i) for i in perm[offset : offset + batch_size - len(out)])
    return out


def total_steps(ws: Any, n: int) -> int:
    return ws.steps if ws.steps is not None else max(1, math.ceil(ws.epochs * n / ws.batch_size))


class WarmStart(Component):
    """Runs the warm start inside a :class:`~arena.loop.trainer.Trainer`; its state goes in checkpoints."""

    name = "warm_start"
    section = Annotated[WarmStartConfig | None, BeforeValidator(parse_warm_start)]
    section_doc = ("Supervised fine-tuning on demonstrations before self-play (source: bots | episodes | pairs; "
                   "arena/loop/components/warm_start.py); null: none.")

    def __init__(self, cfg: Any, run_dir: Path):
        self.cfg = cfg
        self.ws = cfg.train.warm_start
        self.step = 0
        self.done = False
        self.path = run_dir / "warm_start.jsonl"

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        check_warm_start(cfg, origin)

    @classmethod
    def build(cls, plan: Any, parts: Any) -> WarmStart | None:
        if plan.cfg.train.warm_start is None:
            return None
        warm = cls(plan.cfg, parts.run_dir)
        if parts.resume is None and parts.dist.main and warm.path.exists():
            warm.path.unlink()
        return warm

    def start(self, loop: Any) -> dict[str, float]:
        if loop.step == 0:
            self.run(loop)
        return {}

    def state_dict(self) -> dict[str, Any]:
        return {"step": self.step, "done": self.done}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        state = state or {"step": 0, "done": True}  # a checkpoint from before any warm start: self-play had begun
        self.step, self.done = int(state["step"]), bool(state["done"])
        if self.path.exists():  # drop rows written after the checkpoint
            rows = [r for r in self.path.read_text().splitlines() if r and json.loads(r).get("warm_step", 0) <= self.step]
            self.path.write_text("".join(r + "\n" for r in rows))

    def run(self, trainer: Any, until: int | None = None) -> None:
        """Warm-start steps up to the last (or ``until``), checkpointing through ``trainer.save``."""
        from arena.learners.sft import reset_optimizer, set_lr, sft_step

        if self.done:
            return
        learner = trainer.learner
        max_len = getattr(getattr(learner.module, "config", None), "max_position_embeddings", None)
        t0 = time.perf_counter()
        samples, stats = demonstrations(self.cfg, trainer.tokenizer, max_len)
        if not samples:
            raise ConfigError(f"train.warm_start: no demonstrations ({', '.join(f'{k}={v:g}' for k, v in stats.items())}); "
                              "check source, seats, phases and min_reward")
        last = total_steps(self.ws, len(samples))
        if trainer.dist.main:
            print(f"warm start: {len(samples)} demonstrations, {stats['tokens']:.0f} completion tokens "
                  f"({', '.join(f'{k}={v:g}' for k, v in stats.items() if k not in ('demos', 'tokens'))}) "
                  f"from {self.ws.source} in {time.perf_counter() - t0:.1f} s; {last} steps of {self.ws.batch_size} "
                  f"at lr {self.ws.lr:g}", file=sys.stderr, flush=True)
        stop = last if until is None else min(last, until)
        bar = None
        if self.cfg.runner.progress and trainer.dist.main:
            from tqdm.auto import tqdm

            bar = tqdm(total=last, initial=self.step, desc="warm start", unit="step")
        set_lr(learner, self.ws.lr)
        try:
            while self.step < stop:
                t1 = time.perf_counter()
                index = batch_indices(len(samples), self.ws.batch_size, self.step + 1, self.cfg.train.seed)
                batch = [samples[i] for i in index]
                local = None
                if trainer.dist.active:
                    local = [i for i in range(len(batch)) if i % trainer.dist.world == trainer.dist.rank]
                row = sft_step(learner, batch, local)
                self.step += 1
                row = {"warm_step": self.step, "epoch": self.step * self.ws.batch_size / len(samples), **row,
                       "lr": self.ws.lr, "time_s": time.perf_counter() - t1}
                if trainer.dist.main:
                    with open(self.path, "a", encoding="utf-8") as f:
                        f.write(json.dumps(row) + "\n")
                if bar is not None:
                    bar.update(1)
                    bar.set_postfix(nll=f"{row['nll']:.3f}")
                if self.step == last:
                    self.done = True
                    reset_optimizer(learner)
                    trainer.sync_weights()
                if self.step % self.ws.checkpoint_every == 0 or self.done:
                    trainer.save()
        finally:
            if bar is not None:
                bar.close()
            if not self.done:
                set_lr(learner, learner.cfg.lr)
