"""Bad input (issue 25): replies no game can choke on, and episodes that can always be written."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.core.registry import game_class, registered_games
from arena.core.types import Episode, read_jsonl, safe_text, write_jsonl
from arena.testing.invariants import play_texts

# any code point, lone surrogates (which UTF-8 cannot encode) included
_ANY_CHAR = st.one_of(st.characters(), st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF))
_ANY_TEXT = st.text(alphabet=_ANY_CHAR, max_size=60)


def test_safe_text_replaces_lone_surrogates_only() -> None:
    assert safe_text("a\ud800b\udfffc") == "a\ufffdb\ufffdc"
    clean = "héllo 🙂 \ufffd"
    assert safe_text(clean) is clean


@pytest.mark.parametrize("name", sorted(registered_games()))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(texts=st.lists(_ANY_TEXT, min_size=1, max_size=4))
def test_episodes_of_any_unicode_can_be_written_and_read_back(name: str, texts: list[str], tmp_path_factory) -> None:
    ep = play_texts(game_class(name)(), 0, texts)
    path = tmp_path_factory.mktemp("eps") / "e.jsonl"
    assert write_jsonl([ep], path) == 1
    (back,) = list(read_jsonl(path))
    assert back == Episode.model_validate_json(ep.model_dump_json())
    for turn in back.turns:
        turn.completion.encode("utf-8")  # raises if a lone surrogate were left
