"""Configuration of the learner and of the training schedule (validated at start-up)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class EstimatorConfig(BaseModel):
    """Which advantage estimator a phase's turns use."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["grpo", "dr_grpo", "rae"] = Field(description="grpo: group z-score; dr_grpo: no std; rae: role EMA.")
    group_by: list[str] = Field(
        default_factory=lambda: ["episode", "phase"], description="Turn group keys that form a GRPO group."
    )


class RaeConfig(BaseModel):
    """SpyRL's Role-Advantage Estimation."""

    model_config = ConfigDict(extra="forbid")

    order: Literal["paper", "code", "spiral"] = Field(
        default="paper", description="paper: read baseline before update; code: update first + game z-score; spiral."
    )
    alpha: float = Field(default=0.9, gt=0.0, lt=1.0, description="EMA decay (code 0.9, SPIRAL 0.95).")


class DeepSpeedConfig(BaseModel):
    """Settings for ``learner.backend: deepspeed``."""

    model_config = ConfigDict(extra="forbid")

    zero_stage: int = Field(default=0, ge=0, le=3, description="ZeRO stage 0-3.")
    bf16: bool = Field(default=False, description="bf16 training with fp32 master weights.")


class LearnerConfig(BaseModel):
    """The policy update."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["torch", "deepspeed"] = Field(default="torch", description="torch optimizer or a DeepSpeed engine.")
    device: str = Field(default="cpu", description="Device of the learner's weights (cuda on GPU machines).")
    lr: float = Field(default=1e-6, gt=0.0, description="AdamW learning rate (paper 1e-6).")
    weight_decay: float = Field(default=0.0, ge=0.0, description="AdamW weight decay.")
    loss: Literal["clipped", "reinforce"] = Field(
        default="clipped", description="clipped: GRPO/PPO surrogate; reinforce: LSP's detached-ratio REINFORCE."
    )
    clip_low: float = Field(default=0.2, ge=0.0, lt=1.0, description="Lower ratio clip (1 - clip_low).")
    clip_high: float = Field(default=0.2, ge=0.0, description="Upper ratio clip (1 + clip_high).")
    beta: float = Field(default=0.001, ge=0.0, description="KL weight to the frozen reference (paper 0.001); 0 skips it.")
    kl_estimator: Literal["k1", "k3"] = Field(default="k3", description="Per-token KL estimator.")
    aggregation: Literal["token", "sequence", "constant"] = Field(
        default="token", description="Loss reduction: token mean, sequence mean, or Dr.GRPO's constant."
    )
    updates_per_batch: int = Field(default=1, ge=1, description="Optimizer steps on each batch (PPO epochs).")
    token_budget: int = Field(default=4096, ge=1, description="Most padded tokens in one micro-batch (a longer sample gets its own).")
    grad_clip: float = Field(default=1.0, gt=0.0, description="Max global grad norm.")
    share_prompt_prefix: bool = Field(
        default=True, description="Run a prompt shared by several samples once per micro-batch (same result, less work)."
    )
    autocast_bf16: bool = Field(
        default=False, description="torch backend: run forward/backward under bf16 autocast (fp32 master weights)."
    )
    drop_zero_variance: bool = Field(default=True, description="Drop GRPO groups whose rewards are all equal.")
    estimators: dict[str, EstimatorConfig] = Field(
        default_factory=lambda: {"perform": EstimatorConfig(name="rae"), "vote": EstimatorConfig(name="grpo")},
        description="Phase -> advantage estimator; phases not listed are not trained.",
    )
    rae: RaeConfig = Field(default_factory=RaeConfig)
    deepspeed: DeepSpeedConfig = Field(default_factory=DeepSpeedConfig)


class ScheduleConfig(BaseModel):
    """Which phases are trained at each step (SpyRL alternates performing and detection)."""

    model_config = ConfigDict(extra="forbid")

    mode: Literal["hysteresis", "fixed", "joint"] = Field(
        default="hysteresis", description="hysteresis (paper), fixed cycle (public code), joint (ablation)."
    )
    perform_phase: str = Field(default="perform", description="The performing phase's name.")
    detect_phase: str = Field(default="vote", description="The detection phase's name.")
    every: int = Field(default=1, ge=1, description="fixed: steps per stage before switching.")
    min_steps: int = Field(default=5, ge=1, description="hysteresis: at least this many updates per stage.")
    to_perform_acc: float = Field(default=0.9, ge=0.0, le=1.0, description="detect->perform when acc >= this ...")
    to_perform_na: float = Field(default=0.1, ge=0.0, le=1.0, description="... and N/A rate <= this.")
    to_detect_err: float = Field(default=0.4, ge=0.0, le=1.0, description="perform->detect when 1 - acc >= this ...")
    to_detect_na: float = Field(default=0.5, ge=0.0, le=1.0, description="... or N/A rate >= this.")
    ema: float = Field(default=0.9, ge=0.0, lt=1.0, description="EMA decay of accuracy and N/A rate.")


class TrainConfig(BaseModel):
    """The training loop."""

    model_config = ConfigDict(extra="forbid")

    steps: int = Field(default=100, ge=1, description="Training steps (paper: 100 iterations).")
    games_per_step: int = Field(default=128, ge=1, description="Games played per step (paper: 128 sources).")
    seed: int = Field(default=0, ge=0, description="Seeds rollouts, sampling and initialisation.")
    run_dir: str = Field(default="runs/spy", description="Where checkpoints, metrics and plots go.")
    checkpoint_every: int = Field(default=5, ge=1, description="Steps between checkpoints.")
    keep_checkpoints: int = Field(default=2, ge=1, description="Newest checkpoints kept on disk.")
    schedule: ScheduleConfig = Field(default_factory=ScheduleConfig)
    plot: bool = Field(default=True, description="Draw the run's curves to PNG at the end.")
