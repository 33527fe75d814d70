"""The registry of algorithms and one short driver per algorithm (train_ppo,
train_ddppo, ...) on top of distrl.loop.

The CLI's subcommands and the checkpoints' ``algo`` come from ALGORITHMS: adding an
algorithm is one entry here. Driver modules are named after the algorithm, never after
the public function: a public name equal to a submodule's name is shadowed by the
submodule once it is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from distrl.algos.apex import ApexConfig
from distrl.algos.ddppo import DDPPOConfig
from distrl.algos.league import LeagueConfig
from distrl.algos.ppo import PPOConfig


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
    "ppo": Algorithm(PPOConfig, "distrl.train.ppo:train_ppo",
                     "PPO: env runners sample, one learner in the driver updates."),
    "ddppo": Algorithm(DDPPOConfig, "distrl.train.ddppo:train_ddppo",
                       "DD-PPO: every worker samples and trains; gradients are all-reduced."),
    "apex": Algorithm(ApexConfig, "distrl.train.apex:train_apex",
                      "Ape-X DQN: epsilon-ladder actors, sharded prioritized replay, a learner."),
    "league": Algorithm(LeagueConfig, "distrl.train.league:train_league",
                        "League: PPO learners, AlphaStar roles and PFSP on a multi-agent game."),
}
