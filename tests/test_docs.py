"""The documentation site builds with warnings as errors, offline, and its configuration
reference is generated from the models: every field of ``LearnerConfig`` (and of the other
sections) appears on the page without anyone writing it down."""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from arena.learners.config import LearnerConfig

ROOT = Path(__file__).resolve().parents[1]

pytest.importorskip("mkdocs", reason="the dev extra installs mkdocs")
pytest.importorskip("mkdocstrings")


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    # The tree under test, not an installed copy; no proxy, so a plugin that reached for the
    # network would fail here rather than pass on a connected machine only.
    env = dict(os.environ, PYTHONPATH=str(ROOT), NO_PROXY="*", HTTP_PROXY="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return out


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", page.read_text(encoding="utf-8")))


def test_the_site_builds_strictly(site: Path) -> None:
    for page in ("index.html", "quickstart/index.html", "architecture/index.html", "guides/write-a-game/index.html",
                 "games/spy/index.html", "games/lsp/index.html", "games/skill_sp/index.html",
                 "games/household/index.html", "games/examples/index.html", "reference/api/core/index.html"):
        assert (site / page).is_file(), page


def test_config_reference_lists_every_learner_field(site: Path) -> None:
    page = site / "reference" / "config" / "index.html"
    text = _text(page)
    assert "<!-- config-reference -->" not in page.read_text(encoding="utf-8")
    section = text[text.index("LearnerConfig"):]
    for name, field in LearnerConfig.model_fields.items():
        assert re.search(rf"\b{re.escape(name)}\b", section), f"LearnerConfig.{name} missing from the config reference"
        if field.description:
            first_words = " ".join(field.description.split()[:4])
            assert first_words in text, f"the description of LearnerConfig.{name} is missing"


def test_config_reference_is_generated_from_the_models(site: Path) -> None:
    from arena.core.registry import GAMES, game_class
    from arena.loop.config import ArenaConfig, TrainConfig

    text = _text(site / "reference" / "config" / "index.html")
    for model in (ArenaConfig, TrainConfig, *(game_class(name).config_type for name in GAMES)):
        assert model.__name__ in text
        for name, field in model.model_fields.items():  # as a config file spells it (train.async)
            assert (field.alias or name) in text, f"{model.__name__}.{field.alias or name} missing"


def test_architecture_page_shows_the_import_contracts(site: Path) -> None:
    page = site / "architecture" / "index.html"
    assert "<!-- import-contracts -->" not in page.read_text(encoding="utf-8")
    text = _text(page)
    assert "Plug-ins are independent" in text  # a contract's name, read from pyproject.toml


def test_a_new_field_appears_without_writing_it_down() -> None:
    import importlib.util

    from pydantic import Field

    spec = importlib.util.spec_from_file_location("arena_docs_gen_config", ROOT / "docs" / "gen_config.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)

    class Extended(LearnerConfig):
        brand_new_knob: int = Field(default=3, description="A field added after the docs were written.")

    out: list[str] = []
    gen.model_table(Extended, set(), out)
    row = next(line for line in out if "`brand_new_knob`" in line)
    assert "`int`" in row and "`3`" in row and "A field added after the docs were written." in row
