"""The registry of algorithms: each one's config class and its driver (train_ppo,
train_ddppo, ..., each in <algo>/train.py on top of distrl.core.loop).

The CLI's subcommands, Tune trainables and the checkpoints' ``algo`` come from
ALGORITHMS: adding an algorithm is one entry here. No public name (train_ppo, ...)
equals a submodule's name: a submodule, once imported, would shadow it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distrl.alphazero.config import AlphaZeroConfig
from distrl.apex.config import ApexConfig
from distrl.appo.config import APPOConfig
from distrl.ddppo.config import DDPPOConfig
from distrl.league.config import LeagueConfig
from distrl.ppo.config import PPOConfig


@dataclass(frozen=True)
class Algorithm:
    """One trainable algorithm."""

    config: type
    """Its hyperparameter dataclass; the CLI's flags come from its fields."""
    driver: str
    """"module:function" of its train_* function, imported only when it runs."""
    doc: str
    """One line for `distrl train --help`."""

    def train(self) -> Callable[..., dict[str, Any]]:
        module, function = self.driver.split(":")
        return getattr(importlib.import_module(module), function)


ALGORITHMS: dict[str, Algorithm] = {
    "ppo": Algorithm(PPOConfig, "distrl.ppo.train:train_ppo",
                     "PPO: env runners sample, one learner in the driver updates."),
    "appo": Algorithm(APPOConfig, "distrl.appo.train:train_appo",
                      "APPO: runners sample without waiting; V-trace corrects the lag."),
    "ddppo": Algorithm(DDPPOConfig, "distrl.ddppo.train:train_ddppo",
                       "DD-PPO: every worker samples and trains; gradients are all-reduced."),
    "apex": Algorithm(ApexConfig, "distrl.apex.train:train_apex",
                      "Ape-X DQN: epsilon-ladder actors, sharded prioritized replay, a learner."),
    "league": Algorithm(LeagueConfig, "distrl.league.train:train_league",
                        "League: PPO learners, AlphaStar roles and PFSP on a multi-agent game."),
    "alphazero": Algorithm(AlphaZeroConfig, "distrl.alphazero.train:train_alphazero",
                           "AlphaZero: self-play with PUCT search on a two-player board game."),
}
