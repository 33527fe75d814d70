"""distrl: distributed reinforcement learning on Ray.

The public API is imported lazily so that ``import distrl`` stays light and never
imports Ray.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "ApexConfig": "distrl.algos.apex",
    "train_apex": "distrl.train.apex",
    "PPOConfig": "distrl.algos.ppo",
    "DDPPOConfig": "distrl.algos.ddppo",
    "LeagueConfig": "distrl.algos.league",
    "LeagueRules": "distrl.algos.league",
    "Magnet": "distrl.algos.ppo",
    "train_league": "distrl.train.league",
    "train_ddppo": "distrl.train.ddppo",
    "ModelConfig": "distrl.nets",
    "RunConfig": "distrl.config",
    "train_ppo": "distrl.train.ppo",
    "evaluate": "distrl.evaluation",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'distrl' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
