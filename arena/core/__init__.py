"""The contracts a game author uses: typed messages and episodes, :class:`LLMGame`, its config and
phases, rule helpers, the game registry, the errors every layer raises; and two leaves every layer
shares: model resolution (models.py) and ranks (distributed.py). Imports nothing else of arena,
nor policies, learners or games (the layers are written down in pyproject.toml,
``[tool.importlinter]``)."""
