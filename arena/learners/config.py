"""Configuration of the learner (validated at start-up, before any model loads).

Estimator and objective names are checked against their registries here, and
their options against each one's own options model, so a typo in a YAML file is
one line naming the field. The schedule (``train.schedule``) has its own model,
``ScheduleConfig`` in :mod:`arena.learners.schedule`.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from arena.learners.estimators import get_estimator
from arena.learners.lora import LoraConfig
from arena.learners.objectives import get_objective
from arena.learners.whiten import WhitenConfig


def validate_options(model: type[BaseModel], options: dict[str, Any], what: str) -> dict[str, Any]:
    """``options`` validated by ``model``, defaults filled in; errors name the option."""
    try:
        return model.model_validate(options).model_dump(mode="json")
    except ValidationError as e:
        parts = []
        for err in e.errors():
            name = ".".join(str(p) for p in err["loc"]) or "options"
            if err["type"] == "extra_forbidden":
                parts.append(f"{what}: unknown option {name!r} (known: {', '.join(model.model_fields) or 'none'})")
            else:
                msg = err["msg"].removeprefix("Value error, ")
                parts.append(f"{what} option {name}={err.get('input')!r}: {msg}")
        raise ValueError("; ".join(parts)) from None


class Registered(BaseModel):
    """A config that names a registry entry (``name``) and passes it ``options``.

    Subclasses give ``lookup(name)``, which raises a one-line error for an unknown
    name; the options are validated by the entry's own options model.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    @staticmethod
    def lookup(name: str) -> Any:
        raise TypeError("subclasses name their registry")

    @field_validator("name", check_fields=False)
    @classmethod
    def _known_name(cls, name: str) -> str:
        cls.lookup(name)
        return name

    @field_validator("options", check_fields=False)
    @classmethod
    def _valid_options(cls, options: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        if "name" not in info.data:  # the name's own error is reported
            return options
        return validate_options(cls.lookup(info.data["name"]).options, options, info.data["name"])

    def parsed_options(self) -> BaseModel:
        return self.lookup(self.name).options.model_validate(self.options)  # type: ignore[attr-defined]


class EstimatorConfig(Registered):
    """How one phase's trainable turns become advantages."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(description="Registered estimator: grpo, dr_grpo, rae, lsp_solver, lsp_challenger, ...")
    group_by: list[str] = Field(
        default_factory=lambda: ["episode", "phase"], description="Turn group keys (turn.group) that form one group."
    )
    credit: Literal["turn", "trajectory"] = Field(
        default="turn",
        description="turn: each turn's own reward; trajectory: the seat's total episode return, given to each of "
        "its turns in the phase.",
    )
    trajectory_stats: Literal["attempt", "turn"] = Field(
        default="attempt",
        description="Under trajectory credit, what counts once in a group's statistics (mean, std). attempt: each "
        "seat's attempt (its turns of the phase in one episode), so GRPO is over the G attempts (the paper's "
        "GRPO, AUSO); turn: each turn, so an attempt of 21 turns weighs 21 times (verl-agent's per-step mode). "
        "Either way every turn of an attempt gets its attempt's advantage. Unused under turn credit.",
    )
    loss_weight: float = Field(default=1.0, ge=0.0, description="Scales this phase's samples' loss (Sample.weight).")
    drop_zero_variance: bool | None = Field(
        default=None, description="Drop groups whose rewards are all equal; unset: learner.drop_zero_variance."
    )
    options: dict[str, Any] = Field(
        default_factory=dict, validate_default=True, description="The estimator's own options (e.g. rae: order, alpha)."
    )

    @staticmethod
    def lookup(name: str) -> Any:
        return get_estimator(name)

    @model_validator(mode="after")
    def _per_turn_observations(self) -> EstimatorConfig:
        if "observations_recur" in get_estimator(self.name).requires and self.credit == "trajectory" \
                and self.trajectory_stats == "attempt":
            raise ValueError(f"{self.name} keeps a baseline per observation, and each turn of an attempt is at its "
                             "own observation: with credit trajectory set trajectory_stats: turn")
        return self


class ObjectiveConfig(Registered):
    """An extra loss term (e.g. AUSO's jsd_distill)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(description="Registered objective term, e.g. jsd_distill.")
    coef: float | None = Field(
        default=None, ge=0.0,
        description="Weight of the term in the loss; unset: the term's own default (1.0; auso_distill 0.1, the paper's).",
    )
    options: dict[str, Any] = Field(
        default_factory=dict, validate_default=True, description="The term's own options (jsd_distill: probe, topk)."
    )

    @staticmethod
    def lookup(name: str) -> Any:
        return get_objective(name)


class DeepSpeedConfig(BaseModel):
    """Settings for ``learner.backend: deepspeed``."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    zero_stage: int = Field(default=0, ge=0, le=3, description="ZeRO stage 0-3.")
    bf16: bool = Field(default=False, description="bf16 training with fp32 master weights.")


class ImportanceConfig(BaseModel):
    """Per-token importance correction between the generator's sampling logprobs and the learner's
    (arena/learners/losses.py::importance_weights): needed with async rollouts (train.async), where samples come from
    older weights, and useful where the generator's numerics differ from the learner's."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    mode: Literal["none", "tis", "mis"] = Field(
        default="none", description="none: no correction (the papers' on-policy loss); tis: truncate each token's "
        "ratio at cap (truncated IS); mis: drop tokens whose ratio exceeds cap (masked IS).",
    )
    cap: float = Field(default=2.0, gt=1.0, description="The ratio's cap (truncation point, or mask threshold for mis).")


class MagnetConfig(BaseModel):
    """A reverse-KL pull toward a magnet policy rho: the loss gains ``coef * KL(pi || rho)`` (magnetic mirror
    descent, Sokota et al., 2022, arXiv 2206.05825; R-NaD's regularisation policy; arena/learners/magnet.py)."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    kind: Literal["base", "previous", "ema"] = Field(
        description="rho: base, the frozen reference (learner.beta > 0) or else the weights at the first step, never "
        "moved; previous, the weights reset to the current ones every `every` steps (R-NaD; every 1: the step's "
        "starting policy, PPO's proximal reverse KL); ema, rho <- rho + mix (pi - rho) in the weights every `every` "
        "steps (MMD's rho <- rho^(1-mix) pi^mix, exactly so for a tabular softmax only).")
    coef: float = Field(ge=0.0, description="alpha: the weight of KL(pi || rho) in the loss (at the first step when "
                        "annealed). KL is exact over the legal choices of a chosen reply (action_mode: score) and the "
                        "per-token `estimator` on a generated one.")
    anneal: Literal["constant", "linear", "cosine"] = Field(
        default="constant", description="The coefficient over training (the learning rate's formulas, "
        "arena/learners/progress.py scheduled_lr): constant coef, or linear/cosine from coef to coef_end.")
    coef_end: float | None = Field(default=None, ge=0.0, description="The last step's coefficient under a linear or "
                                   "cosine anneal (the floor); only with one.")
    every: int = Field(default=1, ge=1, description="Learner steps between moves of rho (previous: reset; ema: mix); "
                       "unused by base.")
    mix: float = Field(default=0.05, gt=0.0, le=1.0, description="ema: the share of the current weights in each "
                       "move (MMD's rho^0.95 pi^0.05 is mix 0.05).")
    estimator: Literal["k1", "k3"] = Field(default="k3", description="Per-token KL estimator on generated replies "
                                           "(arena/learners/losses.py kl_penalty); chosen replies use the exact KL.")

    @model_validator(mode="after")
    def _anneal_has_an_end(self) -> MagnetConfig:
        if self.anneal != "constant" and self.coef_end is None:
            raise ValueError(f"anneal: {self.anneal} needs coef_end, the coefficient at the last step (e.g. 0.0)")
        if self.anneal == "constant" and self.coef_end is not None:
            raise ValueError("coef_end is read only by a linear or cosine anneal; set anneal or remove coef_end")
        return self


class BoundConfig(BaseModel):
    """How far one batch's update may push a decision's probability (arena/learners/regularisers.py bound_keep).
    A decision is a chosen reply's choice (action_mode: score) or a generated reply's token."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    move: float = Field(
        default=0.0, ge=0.0, lt=1.0, description="A sample stops pushing (its policy-gradient term is dropped) once "
        "its decision's probability has moved more than this from its value before the step's first epoch, in "
        "the advantage's direction: it acts from the second of updates_per_batch epochs on; one epoch's own move "
        "is bounded by the learning rate alone. 0: off.")
    saturation: float = Field(
        default=0.0, ge=0.0, lt=0.5, description="A positive advantage stops pushing at p >= 1 - saturation, a "
        "negative one at p <= saturation (train.descent.bound's rule, NeuRD's threshold on probabilities, on sampled "
        "rows). 0: off.")


class LearnerConfig(BaseModel):
    """The policy update."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    backend: Literal["torch", "deepspeed"] = Field(default="torch", description="torch optimizer or a DeepSpeed engine.")
    device: str = Field(default="cpu", description="Device of the learner's weights (cuda on GPU machines).")
    lr: float = Field(default=1e-6, gt=0.0, description="AdamW learning rate.")
    lr_schedule: Literal["constant", "linear", "cosine", "inverse_sqrt"] = Field(
        default="constant", description="The learning rate over training (arena/learners/progress.py scheduled_lr): "
        "constant lr; linear, cosine or inverse_sqrt (lr / sqrt(1 + c f), OpenSpiel's decaying rate for descent) "
        "from lr at the first step to lr_end at the last.")
    lr_end: float | None = Field(default=None, ge=0.0, description="The last step's learning rate under a linear or "
                                 "cosine lr_schedule; null: lr (no decay).")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.")
    loss: Literal["clipped", "reinforce"] = Field(
        default="clipped", description="clipped: GRPO/PPO surrogate; reinforce: LSP's detached-ratio REINFORCE."
    )
    clip_low: float = Field(default=0.2, lt=1.0, description="Lower ratio clip (1 - clip_low); > 0. Small clips "
                            "(0.025, Rudolph et al., 2025) with several updates_per_batch: the ratio is to the "
                            "logprobs before the step's first epoch.")
    clip_high: float = Field(default=0.2, description="Upper ratio clip (1 + clip_high); > 0.")
    beta: float = Field(default=0.001, ge=0.0, description="KL weight to the frozen reference; 0 skips it.")
    kl_estimator: Literal["k1", "k3"] = Field(default="k3", description="Per-token KL estimator.")
    aggregation: Literal["token", "sequence", "constant"] = Field(
        default="token", description="Loss reduction: token mean, sequence mean, or Dr.GRPO's constant."
    )
    aggregate_per_phase: bool = Field(
        default=False,
        description="Reduce each phase's loss over its own tokens (token) or sequences (sequence) in the batch and "
        "add the phases, each scaled by its loss_weight: LSP's L = L_sol + alpha_ch * L_ch (LSP's training "
        "default). False: one mean over all the batch's tokens, so a phase weighs by its share of them.",
    )
    updates_per_batch: int = Field(default=1, ge=1, description="Optimizer steps on each batch (PPO epochs).")
    token_budget: int = Field(
        default=4096, ge=1, description="Most padded tokens in one micro-batch (a longer sample gets its own)."
    )
    activation_checkpointing: bool = Field(
        default=True, description="Keep each decoder layer's input alone for the backward pass and run the layer "
        "again there (arena/learners/recompute.py): the same gradients, one more forward per micro-batch, and a "
        "micro-batch's activations about 20x smaller (the built-in model: 1.4 MB a token -> 69 KB; issue #54). "
        "false: keep every activation (faster where memory allows).",
    )
    grad_clip: float = Field(default=1.0, gt=0.0, description="Max global grad norm.")
    choice_entropy: float = Field(
        default=0.0, ge=0.0, description="Entropy bonus on replies chosen among a request's choices (a game's "
        "action_mode: score): the loss gains -coef x the mean, over the batch's chosen replies, of the entropy "
        "of softmax(l) over the reply and its alternatives (arena/learners/losses.py choice_entropy). It keeps a "
        "two-way choice from saturating; 0: off (the papers' objectives have none).",
    )
    token_entropy: float = Field(
        default=0.0, ge=0.0, description="Entropy bonus on generated replies (rows without choices): the loss gains "
        "-coef x H_t, the entropy of the policy over the whole vocabulary at each completion position, aggregated as "
        "the policy-gradient loss is (aggregation, Sample.weight; arena/learners/regularisers.py token_entropy). 0: off.",
    )
    magnet: MagnetConfig | None = Field(
        default=None, description="A reverse-KL pull toward a magnet policy (kind: base | previous | ema, coef, anneal, "
        "coef_end, every, mix, estimator; arena/learners/magnet.py); null: none.",
    )
    bound: BoundConfig = Field(
        default_factory=BoundConfig, description="Per-decision bounds on how far an update pushes a probability "
        "(move, saturation); both 0: off.",
    )
    whiten: WhitenConfig | None = Field(
        default=None, description="Advantages whitened by the model's kernel between the batch's decisions, so a step "
        "moves each decision as a table would instead of every private state alike (damping, sketch, max_decisions, "
        "seed; arena/learners/whiten.py); one backward pass per distinct decision; null: off.",
    )
    share_prompt_prefix: bool = Field(
        default=True, description="Run the prompt prefix several samples share (the whole prompt, or its common "
        "opening: a game's rules) once per micro-batch, its KV cache shared by the rows, and each distinct prompt of "
        "the micro-batch once; samples with a common prefix are packed together. The same values and gradients, less "
        "work (arena/learners/prefix.py, batch.py).",
    )
    skip_inert_rows: bool = Field(
        default=True, description="Leave out of the forward and backward passes the rows whose gradient is exactly 0: "
        "advantage 0 or weight 0, while the loss has no term but the policy gradient (beta 0, no entropy bonus, no "
        "magnet, no objective term). Every normalisation still counts them, so the update is the same; the per-token "
        "statistics (clip_frac, logprob_gap, is/*) are over the rows run (arena/learners/plan.py). Descent's "
        "unreachable states, GRPO's equal-reward groups.",
    )
    share_prefix_min_tokens: int = Field(
        default=32, ge=1, description="Share a prefix only when it saves at least this many token positions in a "
        "micro-batch (prefix length x (rows - 1)); below it the second forward call costs more than it saves.",
    )
    param_dtype: Literal["float32", "bfloat16", "auto"] = Field(
        default="float32",
        description="torch backend: dtype of the trained weights. bfloat16: the model's weights are bf16 (forward, "
        "backward and gradients in bf16, half the weight memory) and AdamW updates an fp32 master copy, whose "
        "state it keeps; auto: bfloat16 where bf16 is fast (CUDA, CPUs with AVX512-BF16/AMX), resolved at start-up.",
    )
    autocast_bf16: bool | Literal["auto"] = Field(
        default=False,
        description="torch backend: run forward/backward under bf16 autocast (fp32 master weights); auto: where "
        "bf16 is fast (CUDA, CPUs with AVX512-BF16/AMX) and the weights are not bf16 already, resolved at start-up.",
    )
    drop_zero_variance: bool = Field(
        default=True, description="Default for estimators that leave it unset: drop groups whose rewards are all equal."
    )
    estimators: dict[str, EstimatorConfig] = Field(
        default_factory=dict, description="Phase -> advantage estimator; phases not listed are not trained."
    )
    objectives: list[ObjectiveConfig] = Field(
        default_factory=list, description="Extra loss terms added to the policy-gradient loss (e.g. jsd_distill)."
    )
    reference: str = Field(
        default="auto",
        description="Policy whose frozen weights are the KL reference: 'auto' (a frozen policy on the trainable model "
        "if there is one, else a float32 copy of the initial weights) or a policy name",
    )
    deepspeed: DeepSpeedConfig = Field(default_factory=DeepSpeedConfig)
    importance: ImportanceConfig = Field(
        default_factory=ImportanceConfig, description="Importance correction for generator/learner mismatch "
        "(tis | mis; off by default). The ratios are logged as is/* either way.",
    )
    lora: LoraConfig | None = Field(
        default=None, description="Train LoRA adapters only (arena/learners/lora.py), with either backend; null: every "
        "weight. Checkpoints then hold the adapter, which loads over its base model wherever a model path goes.",
    )

    @field_validator("clip_low", "clip_high")
    @classmethod
    def _positive_clip(cls, v: float) -> float:
        if not v > 0 or not math.isfinite(v):
            raise ValueError("must be > 0: a clip of 0 stops every push once the ratio leaves 1 (a small trust "
                             "region is e.g. 0.025)")
        return v

    @model_validator(mode="after")
    def _inverse_sqrt_has_an_end(self) -> LearnerConfig:
        if self.lr_schedule == "inverse_sqrt" and not (self.lr_end or 0) > 0:
            raise ValueError(f"lr_schedule inverse_sqrt decays lr to lr_end: give lr_end > 0 (got {self.lr_end})")
        return self

    @model_validator(mode="after")
    def _magnet_weights_are_saved(self) -> LearnerConfig:
        own = self.magnet is not None and (self.magnet.kind != "base" or self.beta == 0)
        if own and self.backend == "deepspeed":
            raise ValueError(f"magnet.kind {self.magnet.kind} keeps its own copy of the trained weights "  # type: ignore[union-attr]
                             "(base does too without a reference, beta 0), which backend deepspeed does "
                             "not checkpoint; use backend torch, or kind base with beta > 0")
        return self

    @field_validator("param_dtype")
    @classmethod
    def _param_dtype_backend(cls, v: str, info: ValidationInfo) -> str:
        if v == "bfloat16" and info.data.get("backend") == "deepspeed":
            raise ValueError("bfloat16 weights with the deepspeed backend come from learner.deepspeed.bf16: true; "
                             "leave param_dtype at float32")
        return v

    @field_validator("autocast_bf16")
    @classmethod
    def _autocast_needs_fp32_weights(cls, v: bool | str, info: ValidationInfo) -> bool | str:
        if v is True and info.data.get("param_dtype") == "bfloat16":
            raise ValueError("autocast over weights that are bf16 already does nothing; set it false or auto")
        return v


# AUSO's estimator and objective term register themselves on import (arena/learners/auso.py).
import arena.learners.auso  # noqa: E402, F401
