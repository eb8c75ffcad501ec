"""Moved (#52): assembly is now two phases, :mod:`arena.loop.plan` (resolve the config once) and
:mod:`arena.loop.build` (make the objects). These names stay importable from here for a release."""

from __future__ import annotations

import warnings

from arena.loop.build import (  # noqa: F401
    AdapterFolders, Built, Trained, build_trained, build_trainer,
)
from arena.loop.components.league import league_member_policy  # noqa: F401
from arena.loop.config import resolved_config  # noqa: F401
from arena.loop.plan import (  # noqa: F401
    adapter_league, check_trainable, engine_groups, portable_model_name, precision_report, report_untrained_phases,
    resolve_precision, shared_bases,
)

TrainerParts = Built

warnings.warn("arena.loop.assemble moved to arena.loop.plan and arena.loop.build (the old path goes in arena 0.3; "
              "see CHANGELOG.md)", DeprecationWarning, stacklevel=2)
