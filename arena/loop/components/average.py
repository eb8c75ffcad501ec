"""``train.average``: an average policy that can play, trained by supervision on the iterates' own moves.

Neural fictitious self-play (Heinrich and Silver, 2016) keeps two networks: the one that learns by
reinforcement, and an *average policy* trained by supervised learning on the actions the first one took.
Fictitious play converges in the average while the iterates cycle (docs/games/nash.md); this component is
that second network for any game and any action mode:

* **the records**: every valid turn of the trainable policy in the step's games, as the learner sees it
  (``prompt_ids``, the chosen ``completion_ids``, and in ``action_mode: score`` the other choices'
  ``alternatives``), joins a reservoir of ``buffer`` records (Vitter's algorithm R, seeded: every record
  of the stream is in it with equal probability ``buffer / seen``). NFSP's reservoir holds the best
  response's actions; in self-play the iterate plays that part, so the reservoir is a uniform sample of
  the iterates' moves over the whole run;
* **the target**: after each step, ``updates`` minibatches of ``batch`` records, drawn from the reservoir
  without replacement, each one supervised step of the average model (its own copy of the starting
  weights, its own AdamW at ``lr``) on ``- sum_r log pi_avg(a_r | s_r)``, token-mean as the warm start's
  NLL; in score mode ``log pi_avg(a | s) = l_a - logsumexp_b l_b`` over the legal replies, the policy that
  plays (arena/learners/losses.py). Its minimiser is, at each state ``s``, the frequency of each move among
  the records at ``s``: the iterates' policies averaged with weights proportional to how often each one
  reached ``s``, which is fictitious play's average (XFP's realisation weights; arena/exact/average.py
  computes the same average exactly, ``average_policy``);
* **playing it**: the average model serves as policy ``average`` (a name of its own) in the run's policy
  table, so an evaluation plays or scores it with ``policy: average`` (``train.evals``, arena/loop/
  components/evals.py), and each checkpoint holds it as ``<checkpoint>/average/model``, a model folder a
  tournament or ``arena.eval`` takes by path (``--players avg=runs/x/checkpoints/step_000010/average/model``);
* **resume**: the checkpoint holds the model, its optimizer and the reservoir with its generator's state, so
  ``--resume`` continues bit for bit.

One trainable policy (several are refused at start-up, one line); the average model is an hf model in
float32 on the learner's device.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from arena.core.types import Sample
from arena.loop.component import Component, StepContext

NAME = "average"


class AverageConfig(BaseModel):
    """``train.average``: the average policy (this module). Present: on; null or absent: off."""

    model_config = ConfigDict(extra="forbid")

    lr: float = Field(default=1e-5, gt=0, description="The average model's AdamW learning rate.")
    buffer: int = Field(default=20_000, ge=1, le=10_000_000, description="Records the reservoir keeps (NFSP: 2e6 "
                        "transitions; a few games' worth is enough for small games).")
    batch: int = Field(default=64, ge=1, description="Records per supervised update.")
    updates: int = Field(default=1, ge=1, le=1000, description="Supervised updates after each training step.")
    seed: int = Field(default=0, ge=0, description="Seeds the reservoir and the minibatch draws.")


def reservoir_add(buffer: list[Any], seen: int, record: Any, capacity: int, rng: random.Random) -> int:
    """Algorithm R (Vitter, 1985): after ``seen`` records, the new one takes a uniformly drawn slot with
    probability ``capacity / (seen + 1)`` (always while the buffer is not full); returns the new count."""
    if len(buffer) < capacity:
        buffer.append(record)
    else:
        slot = rng.randrange(seen + 1)
        if slot < capacity:
            buffer[slot] = record
    return seen + 1


def turn_record(turn: Any) -> dict[str, Any]:
    """What the average policy learns from one turn: the prompt, the move, the moves it was chosen among."""
    return {"prompt_ids": list(turn.prompt_ids), "completion_ids": list(turn.completion_ids),
            "alternatives": [list(a) for a in turn.alternatives]}


def record_sample(record: dict[str, Any]) -> Sample:
    """A record as a supervised sample: advantage 1, so the learner's REINFORCE term with the ratio's
    denominator detached is exactly the NLL ``- log pi(a | s)`` (normalised over ``alternatives``)."""
    return Sample(prompt_ids=record["prompt_ids"], completion_ids=record["completion_ids"], advantage=1.0,
                  alternatives=record["alternatives"])


class AveragePolicy(Component):
    """The average model, its reservoir and its supervised updates (module docstring)."""

    name = "average"
    section = AverageConfig | None
    section_doc = ("An average policy that can play (NFSP's average network, Heinrich and Silver 2016; "
                   "arena/loop/components/average.py): a copy of the model trained by supervision on the iterates' "
                   "moves, served as policy 'average' and saved in each checkpoint; null: off.")

    def __init__(self, section: AverageConfig, trainable: str, learner: Any, policy: Any):
        self.section, self.trainable, self.learner, self.policy = section, trainable, learner, policy
        self.buffer: list[dict[str, Any]] = []
        self.seen = 0
        self.rng = random.Random(section.seed)

    @classmethod
    def check(cls, cfg: Any, env: Any, origin: str) -> None:
        from arena.core.errors import ConfigError

        if cfg.train.average is not None and len(cfg.trainables) != 1:
            raise ConfigError(f"{origin}: train.average: the average policy follows one trainable policy, got "
                              f"{len(cfg.trainables)} ({', '.join(cfg.trainables)}); train one, or turn train.average off")
        if cfg.train.average is not None and NAME in cfg.policies:
            raise ConfigError(f"{origin}: policies.{NAME}: the name is the average policy's (train.average); rename it")

    @classmethod
    def build(cls, plan: Any, parts: Any) -> AveragePolicy | None:
        section = plan.cfg.train.average
        if section is None:
            return None
        from arena.core.models import load_causal_lm
        from arena.learners.config import LearnerConfig
        from arena.learners.update import Learner
        from arena.policies.hf import HFPolicy

        unit = parts.trained[0]
        spec = plan.cfg.policies[unit.name]
        device = unit.learner.cfg.device
        model, tokenizer = load_causal_lm(spec.model, dtype="float32", device=device)
        cfg = LearnerConfig(lr=section.lr, beta=0.0, loss="reinforce", device=device, param_dtype="float32",
                            autocast_bf16=False, token_budget=unit.learner.cfg.token_budget, estimators={})
        learner = Learner(model, cfg, tokenizer.pad_token_id, 1.0, None, parts.dist)
        policy = HFPolicy(model, tokenizer=tokenizer, dtype="float32", device=device, name=NAME)
        parts.policies[NAME] = policy  # evaluations and the runner find it by name
        parts.runner.policies[NAME] = policy
        sampling = parts.sampling  # it samples as the trainable policy does (built before the evaluations take it)
        parts.sampling = parts.runner.sampling = lambda policy, phase: sampling(unit.name if policy == NAME else policy, phase)
        return cls(section, unit.name, learner, policy)

    def after_step(self, ctx: StepContext) -> dict[str, float]:
        """The step's moves join the reservoir; ``updates`` supervised steps on minibatches of it."""
        for ep in ctx.episodes:
            for turn in ep.turns:
                if turn.policy == self.trainable and turn.valid and turn.completion_ids:
                    self.seen = reservoir_add(self.buffer, self.seen, turn_record(turn), self.section.buffer, self.rng)
        if not self.buffer:
            return {"average/records": 0.0}
        norms = []
        with torch.enable_grad():
            for _ in range(self.section.updates):
                picked = self.rng.sample(range(len(self.buffer)), min(self.section.batch, len(self.buffer)))
                norms.append(self.learner.step([record_sample(self.buffer[i]) for i in picked]).get("grad_norm", 0.0))
        return {"average/records": float(len(self.buffer)), "average/seen": float(self.seen),
                "average/grad_norm": float(sum(norms) / len(norms))}

    # ------------------------------------------------------------------ state
    def writer(self) -> Any:
        def write(folder: Path) -> None:
            self.learner.module.save_pretrained(folder / "model")
            self.policy.tokenizer.save_pretrained(folder / "model")
            torch.save(self.learner.state_dict(), folder / "optimizer.pt")
            state = {"seen": self.seen, "rng": self.rng.getstate(), "buffer": self.buffer}
            (folder / "reservoir.json").write_text(json.dumps(state, default=list))
        return write

    def load(self, checkpoint: Path, step: int) -> None:
        from arena.loop.weights import restore_weights

        folder = checkpoint / "average"
        if not folder.is_dir():
            return
        restore_weights(self.learner.module, folder / "model")
        self.learner.load_state_dict(torch.load(folder / "optimizer.pt", weights_only=False))
        state = json.loads((folder / "reservoir.json").read_text())
        self.seen, self.buffer = int(state["seen"]), list(state["buffer"])
        version, internal, gauss = state["rng"]
        self.rng.setstate((version, tuple(internal), gauss))
