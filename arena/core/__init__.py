"""The contracts a game author uses: typed messages and episodes, :class:`LLMGame`, its config and
phases, rule helpers, the game registry, errors. Imports nothing else of arena, nor policies,
learners or games (the layers are written down in pyproject.toml, ``[tool.importlinter]``)."""
