"""Every registered game passes the conformance kit (PettingZoo api/seed tests + invariants)."""

from __future__ import annotations

import pytest
from hypothesis import given

from arena.core.registry import game_class, registered_games
from arena.testing import check_any_text_is_legal, check_game, completions
from arena.policies.scripted import random_bot


@pytest.mark.parametrize("name", sorted(registered_games()))
def test_registered_game_passes_the_kit(name: str) -> None:
    cls = game_class(name)
    check_game(lambda: cls(), bot=random_bot)


@pytest.mark.parametrize("name", sorted(registered_games()))
@given(texts=completions())
def test_any_completion_is_a_legal_action(name: str, texts: str) -> None:
    cls = game_class(name)
    check_any_text_is_legal(lambda: cls(), [texts])
