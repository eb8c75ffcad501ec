"""Everything is in pyproject.toml but one file: ``arena_compat.pth``, which must sit at the top of
site-packages (no package can carry it there), so that the old top-level import paths (``games``,
``policies``, ``learners``) resolve as deprecated aliases even before ``import arena``
(arena/_compat.py). It installs no module, so the wheel's top_level.txt lists ``arena`` alone."""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

PTH = "arena_compat.pth"
LINE = "import arena._compat\n"  # site runs a .pth line that starts with "import"


class BuildPyWithPth(build_py):
    def run(self) -> None:
        super().run()
        target = Path(self.build_lib) / PTH
        target.write_text(LINE, encoding="utf-8")

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        return [*super().get_outputs(include_bytecode), str(Path(self.build_lib) / PTH)]


setup(cmdclass={"build_py": BuildPyWithPth})
