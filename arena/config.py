"""YAML -> validated pydantic config. Every mistake is one line naming the field.

A config file has one section per component. ``game`` names the game and
carries its settings, which the game's own ``config_type`` validates, so a typo
in ``games/spy.yaml`` is reported as ``game.mask_ratio`` with the bad value and
what would be valid, before any model is loaded. ``--set a.b=value`` overrides
any key; the value is parsed as YAML (``--set game.n_players=4``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator

from arena.registry import UnknownName, game_class
from learners.config import LearnerConfig, TrainConfig
from policies.base import SamplingParams


class ConfigError(ValueError):
    """A bad configuration; ``str(err)`` is one line for the user."""


class GameSection(BaseModel):
    """The game to play: its registry name and its validated settings."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    name: str = Field(description="Registered game name ('spy') or 'module:Class'.")
    settings: BaseModel = Field(description="The game's own config model, validated.")

    def make_env(self, **kwargs: Any) -> Any:
        return game_class(self.name)(self.settings, **kwargs)


class PolicySection(BaseModel):
    """The shared trainable policy (and the frozen reference built from the same model)."""

    model_config = ConfigDict(extra="forbid")

    backend: Literal["hf", "vllm", "openai"] = Field(
        default="hf", description="hf: transformers; vllm: in-process vLLM engine; openai: an OpenAI-compatible server."
    )
    model: str = Field(default="smollm2-135m", description="Built-in name, local folder or hub id (server: its model name).")
    dtype: Literal["float32", "bfloat16", "float16"] = Field(
        default="bfloat16", description="Generation dtype (bfloat16 is faster on CPUs with AVX512-BF16)."
    )
    device: str = Field(default="cpu", description="torch device for hf generation.")
    max_batch_size: int = Field(default=64, ge=1, description="hf: most sequences in one forward pass.")
    max_batch_tokens: int = Field(
        default=32768, ge=256, description="hf: most padded tokens (prompt + budget) in one generation batch."
    )
    temperature: float = Field(default=1.0, ge=0.0, description="Sampling temperature; 0 is greedy.")
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_new_tokens: int = Field(default=256, ge=1, description="Token budget of each turn.")
    max_model_len: int = Field(default=2048, ge=128, description="vllm: longest prompt + completion.")
    gpu_memory_utilization: float = Field(
        default=0.5, gt=0.0, le=1.0, description="vllm: share of GPU memory for weights and KV cache."
    )
    tensor_parallel_size: int = Field(default=1, ge=1, description="vllm: GPUs the engine shards over.")
    enable_sleep_mode: bool = Field(default=False, description="vllm (GPU): free engine memory during updates.")
    kv_cache_gb: float = Field(default=2.0, gt=0.0, description="vllm on CPU: KV cache size in GB.")
    seeded_sampling: bool = Field(
        default=True,
        description="vllm: seed every request (reproducible episodes, exact resume; ~10% slower on CPU, measured).",
    )
    base_url: str | None = Field(default=None, description="openai: server URL, e.g. http://127.0.0.1:8000.")
    api: Literal["completions", "chat"] = Field(default="completions", description="openai: endpoint to use.")
    api_key_env: str | None = Field(default=None, description="openai: environment variable holding the API key.")
    timeout_s: float = Field(default=120.0, gt=0.0, description="openai: per-request timeout.")
    retries: int = Field(default=2, ge=0, le=10, description="openai: retries on connection errors and 5xx.")

    @model_validator(mode="after")
    def _backend_settings(self) -> PolicySection:
        if self.backend == "openai" and not self.base_url:
            raise ValueError("backend 'openai' needs base_url (e.g. http://127.0.0.1:8000)")
        if self.enable_sleep_mode and self.backend != "vllm":
            raise ValueError("enable_sleep_mode only applies to backend 'vllm'")
        return self

    def sampling(self) -> SamplingParams:
        return SamplingParams(temperature=self.temperature, top_p=self.top_p, max_new_tokens=self.max_new_tokens)


class RunnerSection(BaseModel):
    """How rollouts are played."""

    model_config = ConfigDict(extra="forbid")

    num_envs: int = Field(default=8, ge=1, description="Games played at once; their turns share generate calls.")
    progress: bool = Field(default=True, description="Show a progress bar on long rollouts.")
    episodes_jsonl: str | None = Field(default=None, description="Append finished episodes to this JSONL file.")


SEAT_POLICIES = ("trainable", "reference", "human")


def _check_seat_policy(value: str) -> str:
    if value in SEAT_POLICIES or value.startswith("scripted:"):
        return value
    raise ValueError(f"must be one of {', '.join(SEAT_POLICIES)} or 'scripted:<bot>'")


class PlaySection(BaseModel):
    """Defaults for ``python -m arena.play``."""

    model_config = ConfigDict(extra="forbid")

    episodes: int = Field(default=1, ge=1, description="Games to play.")
    seed: int = Field(default=0, ge=0, description="Seed of the first game; game i uses seed + i.")
    bot: str = Field(default="default", description="Scripted bot for every seat with --policy scripted.")


class ArenaConfig(BaseModel):
    """A whole run: one section per component."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    game: GameSection
    seats: dict[str, Annotated[str, AfterValidator(_check_seat_policy)]] = Field(
        default_factory=lambda: {"*": "trainable"},
        description="Seat-name patterns (fnmatch) -> trainable | reference | human | scripted:<bot>; first match wins.",
    )
    policy: PolicySection = Field(default_factory=PolicySection)
    runner: RunnerSection = Field(default_factory=RunnerSection)
    learner: LearnerConfig = Field(default_factory=LearnerConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    play: PlaySection = Field(default_factory=PlaySection)


def format_validation_error(err: ValidationError, prefix: str = "") -> str:
    """One line: ``field: problem (got value)`` for each error, joined by '; '."""
    parts = []
    for e in err.errors():
        loc = ".".join(str(p) for p in (prefix, *e["loc"]) if p != "")
        if e["type"] == "extra_forbidden":
            parts.append(f"{loc}: unknown key (remove it or check the spelling)")
            continue
        msg = e["msg"].removeprefix("Value error, ")
        parts.append(f"{loc}: {msg} (got {e['input']!r})" if "input" in e else f"{loc}: {msg}")
    return "; ".join(parts)


def _set_path(raw: dict[str, Any], dotted: str, value: Any) -> None:
    keys = dotted.split(".")
    node = raw
    for key in keys[:-1]:
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {dotted}: {key!r} is not a section")
        node = child
    node[keys[-1]] = value


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. game.n_players=4")
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = text
        _set_path(raw, key.strip(), value)
    return raw


def parse_config(raw: Any, origin: str = "config") -> ArenaConfig:
    """Validate a loaded mapping; raises :class:`ConfigError` with one line."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{origin}: expected a mapping of sections, got {type(raw).__name__}")
    raw = dict(raw)
    game_raw = raw.get("game")
    if not isinstance(game_raw, dict) or "name" not in game_raw:
        raise ConfigError(f"{origin}: game.name: missing (e.g. 'game: {{name: spy}}')")
    game_raw = dict(game_raw)
    name = game_raw.pop("name")
    try:
        cls = game_class(str(name))
    except UnknownName as e:
        raise ConfigError(f"{origin}: game.name: {e}") from None
    try:
        settings = cls.config_type.model_validate(game_raw)
    except ValidationError as e:
        raise ConfigError(f"{origin}: {format_validation_error(e, 'game')}") from None
    raw["game"] = GameSection(name=str(name), settings=settings)
    try:
        return ArenaConfig.model_validate(raw)
    except ValidationError as e:
        raise ConfigError(f"{origin}: {format_validation_error(e)}") from None


def load_config(path: str | Path, overrides: list[str] | None = None) -> ArenaConfig:
    """Read a YAML file, apply ``--set`` overrides, validate."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"{path}:{where} not valid YAML ({getattr(e, 'problem', e)})") from None
    raw = raw if raw is not None else {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping of sections, got {type(raw).__name__}")
    return parse_config(apply_overrides(raw, overrides or []), str(path))
