"""The household skills' embedding retriever (``skills.retriever: embedding``).

Fast: a tiny random Llama saved with a word-level tokenizer over the library's words, so the
retriever's ranking can be checked against a direct mean-pooling reference. Slow (one test,
the built-in model): k distinct in-domain task skills, the same on a second call. (Whether a
clean task's query ranks a clean skill in the top 3 is not asserted: not yet measured.)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from arena.games.household import HouseholdGame, HouseholdObservation
from arena.games.household import skills as sk
from arena.games.household.types import HouseholdConfig
from tolerance import approx32, close32

ROOT = Path(__file__).resolve().parents[2]
QUERY = "clean some apple and put it in countertop."


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z]+", text.lower())


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A folder with a 2-layer random Llama and a lower-casing word-level tokenizer."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import LlamaConfig, LlamaModel, PreTrainedTokenizerFast

    words = sorted({w for s in sk.load_library() for w in _words(f"{s.title} {s.text}")} | set(_words(QUERY)))
    vocab = {"<unk>": 0} | {w: i + 1 for i, w in enumerate(words)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.normalizer = normalizers.Lowercase()
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace()])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, unk_token="<unk>", pad_token="<unk>")
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256)
    folder = tmp_path_factory.mktemp("encoder")
    LlamaModel(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def _reference(folder: str, text: str) -> torch.Tensor:
    from transformers import AutoModel, AutoTokenizer

    model, tok = AutoModel.from_pretrained(folder), AutoTokenizer.from_pretrained(folder)
    with torch.no_grad():
        hidden = model(**tok(text, return_tensors="pt")).last_hidden_state[0].mean(0)
    return hidden / hidden.norm()


def test_embeddings_are_normalised_mean_pools(tiny_encoder: str) -> None:
    got = sk.embed([QUERY, "Cool: use the fridge"], tiny_encoder)
    assert got.shape == (2, 32)
    torch.testing.assert_close(got.norm(dim=1), torch.ones(2))
    close32(got[0], _reference(tiny_encoder, QUERY))
    torch.testing.assert_close(sk.embed(["Cool: use the fridge"], tiny_encoder)[0], got[1])  # alone = in a batch


def test_retriever_ranks_by_cosine_deterministically_with_cached_skill_embeddings(tiny_encoder: str) -> None:
    r = sk.retriever(None, "embedding", tiny_encoder)
    task = [s for s in sk.load_library() if s.kind == "task"]
    q = _reference(tiny_encoder, QUERY)
    want = [round(float(_reference(tiny_encoder, f"{s.title} {s.text}") @ q), 6) for s in task]
    assert r.scores(QUERY) == approx32(want)
    top = r.top(QUERY, 3)
    assert len({s.id for s in top}) == 3 and all(s.kind == "task" for s in top)
    order = sorted(range(len(task)), key=lambda i: (-want[i], i))
    assert [s.id for s in top] == [task[i].id for i in order[:3]]
    before = sk._skill_embeddings.cache_info().misses
    sk.retriever.cache_clear()
    again = sk.retriever(None, "embedding", tiny_encoder)
    assert again is not r and again.top(QUERY, 3) == top  # a new retriever, the same ranking
    assert sk._skill_embeddings.cache_info().misses == before  # the skill embeddings were not recomputed
    assert len(r.top(QUERY, 50)) == len(task)


def test_the_game_uses_the_configured_retriever(tiny_encoder: str) -> None:
    game = HouseholdGame(attempts=1, task_types=["clean"], skills={"retriever": "embedding", "embedding_model": tiny_encoder})
    game.reset(seed=4)
    obs = game.observe(game.agent_selection)
    assert isinstance(obs, HouseholdObservation) and len(obs.skills) == 3
    expected = sk.retriever(None, "embedding", tiny_encoder).top(obs.task, 3)
    assert obs.skills == tuple(s.show() for s in expected)
    bm25 = HouseholdGame(attempts=1, task_types=["clean"])  # the default is unchanged
    bm25.reset(seed=4)
    assert bm25.observe(bm25.agent_selection).skills == sk.student_skills(obs.task, 3)


def test_bad_retriever_or_embedding_model_is_a_config_error(tmp_path: Path) -> None:
    assert HouseholdConfig().skills.retriever == "bm25"
    with pytest.raises(ValueError, match="retriever"):
        HouseholdConfig(skills={"retriever": "tfidf"})
    with pytest.raises(ValueError, match="skills.embedding_model: cannot load"):
        HouseholdGame(skills={"retriever": "embedding", "embedding_model": str(tmp_path / "missing")})
    with pytest.raises(ValueError, match="unknown 'tfidf'"):
        sk.retriever(None, "tfidf")
    from arena.core.errors import ConfigError
    from arena.loop.config import load_config  # what the CLIs print as one line, exit 2 (arena/cli.py)

    with pytest.raises(ConfigError) as err:
        load_config(ROOT / "arena/games/household/household.yaml", ["game.skills.retriever=tfidf"])
    assert "retriever" in str(err.value) and len(str(err.value).strip().splitlines()) == 1, str(err.value)


@pytest.mark.slow
def test_built_in_model_retrieves_distinct_in_domain_skills_deterministically() -> None:
    from arena.games.household.tasks import make_task

    r = sk.retriever(None, "embedding", "smollm2-135m")
    task, _ = make_task(0, ("clean",), (6, 12), (6, 12))
    top = r.top(task.description, 3)
    assert len({s.id for s in top}) == 3
    assert all(s.kind == "task" and s.task_type in ("pick_and_place", "clean", "cool") for s in top)
    assert r.top(task.description, 3) == top  # deterministic
