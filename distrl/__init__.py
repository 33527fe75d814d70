"""distrl: distributed reinforcement learning on Ray.

The public API is imported lazily so that ``import distrl`` stays light and never
imports Ray.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "PPO": "distrl.agent",
    "APPO": "distrl.agent",
    "DDPPO": "distrl.agent",
    "Apex": "distrl.agent",
    "League": "distrl.agent",
    "AlphaZero": "distrl.agent",
    "AlphaZeroConfig": "distrl.alphazero.config",
    "train_alphazero": "distrl.alphazero.train",
    "ApexConfig": "distrl.apex.config",
    "APPOConfig": "distrl.appo.config",
    "train_appo": "distrl.appo.train",
    "Callbacks": "distrl.core.callbacks",
    "train_apex": "distrl.apex.train",
    "PPOConfig": "distrl.ppo.config",
    "DDPPOConfig": "distrl.ddppo.config",
    "LeagueConfig": "distrl.league.config",
    "LeagueRules": "distrl.league.rules",
    "Magnet": "distrl.league.config",
    "train_league": "distrl.league.train",
    "train_ddppo": "distrl.ddppo.train",
    "ModelConfig": "distrl.models.config",
    "RunConfig": "distrl.core.config",
    "train_ppo": "distrl.ppo.train",
    "evaluate": "distrl.games.scoring",
    "load_policy": "distrl.policy",
}
__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'distrl' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
