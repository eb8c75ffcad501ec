"""One game played with the action spaces' first examples, no model: what a game reports (its
metrics, its probes), for the start-up checks of the config and its components."""

from __future__ import annotations

from typing import Any


def example_episode(env: Any, seed: int) -> Any:
    """One game played with the action spaces' first examples (no model): what metrics the game reports;
    None when the game cannot be played here (no sandbox on this machine): the run checks them later."""
    try:
        env.reset(seed=seed)
        for _ in env.agent_iter(max_iter=10_000):
            _, _, term, trunc, _ = env.last()
            examples = env.action_space(env.agent_selection).examples or ("",)
            env.step(None if term or trunc else examples[0])
        return env.episode()
    except Exception:  # noqa: BLE001 - a start-up convenience; the runtime check still stands
        return None
