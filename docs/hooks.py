"""mkdocs hooks: fill the configuration reference (from the pydantic models) and the import
contracts (from pyproject.toml) into their pages at build time."""

from __future__ import annotations

import importlib.util
from pathlib import Path

MARKER = "<!-- config-reference -->"


def _gen_config():
    path = Path(__file__).with_name("gen_config.py")
    spec = importlib.util.spec_from_file_location("arena_docs_gen_config", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def on_page_markdown(markdown: str, page, config, files) -> str:
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, _gen_config().render())
    if CONTRACTS in markdown:
        markdown = markdown.replace(CONTRACTS, _contracts())
    return markdown


CONTRACTS = "<!-- import-contracts -->"


def _contracts() -> str:
    import tomllib

    root = Path(__file__).resolve().parents[1]
    linter = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["importlinter"]
    out = [f"Root packages: {', '.join(f'`{p}`' for p in linter['root_packages'])}.", ""]
    for contract in linter["contracts"]:
        out.append(f"### {contract['name']}")
        out.append("")
        out.append(f"Type: `{contract['type']}`.")
        out.append("")
        for key in ("layers", "source_modules", "forbidden_modules", "modules", "ignore_imports"):
            if key in contract:
                out.append(f"- {key.replace('_', ' ')}: " + "; ".join(f"`{m}`" for m in contract[key]))
        out.append("")
    return "\n".join(out)
