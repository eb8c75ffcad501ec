"""The switches of issue #51 in ``LearnerConfig`` (arena/learners/config.py): off by default, and a bad value is
one line naming the field, the value and what would do."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from arena.core.errors import format_validation_error
from arena.learners.config import LearnerConfig


def refusal(**cfg: object) -> str:
    with pytest.raises(ValidationError) as err:
        LearnerConfig(**cfg)
    line = format_validation_error(err.value, "learner")
    assert "\n" not in line
    return line


def test_the_defaults_are_off() -> None:
    cfg = LearnerConfig()
    assert cfg.magnet is None and cfg.token_entropy == 0.0 and cfg.choice_entropy == 0.0
    assert (cfg.bound.move, cfg.bound.saturation) == (0.0, 0.0) and (cfg.clip_low, cfg.clip_high) == (0.2, 0.2)
    magnet = LearnerConfig(magnet={"kind": "ema", "coef": 0.1}).magnet
    assert magnet is not None and (magnet.anneal, magnet.every, magnet.mix, magnet.estimator) == ("constant", 1, 0.05, "k3")


@pytest.mark.parametrize(("cfg", "want"), [
    ({"magnet": {"kind": "ema", "coef": -0.1}}, "learner.magnet.coef: Input should be greater than or equal to 0 (got -0.1)"),
    ({"magnet": {"kind": "ema", "coef": float("nan")}}, "learner.magnet.coef: Input should be a finite number (got nan)"),
    ({"magnet": {"kind": "ema", "coef": float("inf")}}, "learner.magnet.coef: Input should be a finite number (got inf)"),
    ({"magnet": {"kind": "reverse", "coef": 0.1}}, "learner.magnet.kind: Input should be 'base', 'previous' or 'ema' (got 'reverse')"),
    ({"magnet": {"kind": "ema"}}, "learner.magnet.coef: Field required"),
    ({"magnet": {"kind": "ema", "coef": 0.1, "mix": 0.0}}, "learner.magnet.mix: Input should be greater than 0 (got 0.0)"),
    ({"magnet": {"kind": "ema", "coef": 0.1, "every": 0}}, "learner.magnet.every: Input should be greater than or equal to 1"),
    ({"magnet": {"kind": "ema", "coef": 0.1, "anneal": "cosine"}}, "anneal: cosine needs coef_end"),
    ({"magnet": {"kind": "ema", "coef": 0.1, "coef_end": 0.0}}, "coef_end is read only by a linear or cosine anneal"),
    ({"magnet": {"kind": "ema", "coef": 0.1, "kl": "k2"}}, "learner.magnet.kl: unknown key"),
    ({"clip_low": 0.0}, "learner.clip_low: must be > 0"),
    ({"clip_high": -0.025}, "learner.clip_high: must be > 0"),
    ({"clip_low": float("nan")}, "learner.clip_low: Input should be a finite number"),
    ({"token_entropy": -0.1}, "learner.token_entropy: Input should be greater than or equal to 0"),
    ({"bound": {"move": 1.0}}, "learner.bound.move: Input should be less than 1"),
    ({"bound": {"saturation": 0.5}}, "learner.bound.saturation: Input should be less than 0.5"),
    ({"bound": {"move": -0.1}}, "learner.bound.move: Input should be greater than or equal to 0"),
    ({"backend": "deepspeed", "magnet": {"kind": "previous", "coef": 0.1}}, "magnet.kind previous keeps its own copy"),
    ({"backend": "deepspeed", "beta": 0.0, "magnet": {"kind": "base", "coef": 0.1}}, "use backend torch, or kind base with beta > 0"),
])
def test_bad_values_are_one_line(cfg: dict, want: str) -> None:
    assert want in refusal(**cfg)


def test_what_is_accepted() -> None:
    LearnerConfig(clip_low=0.025, clip_high=0.025, updates_per_batch=8, token_entropy=0.1, choice_entropy=0.1,
                  bound={"move": 0.05, "saturation": 0.01},
                  magnet={"kind": "previous", "coef": 0.2, "anneal": "linear", "coef_end": 0.0, "every": 50})
    LearnerConfig(backend="deepspeed", beta=0.01, magnet={"kind": "base", "coef": 0.1})  # the reference is the magnet
