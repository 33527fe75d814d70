"""Networks by name: what a PolicySpec or a checkpoint's policy.json names as its
``builder`` ("actor_critic", "q_network", "dueling_q_network", or one registered).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
from torch import nn

from distrl.models.q_network import QNetwork
from distrl.models.recurrent import RecurrentActorCritic, actor_critic

Builder = Callable[[gym.Space, gym.Space, Any], nn.Module]


_BUILDERS: dict[str, Builder] = {
    "actor_critic": actor_critic,  # recurrent when the ModelConfig says use_lstm
    "recurrent_actor_critic": RecurrentActorCritic,
    "q_network": functools.partial(QNetwork, dueling=False),
    "dueling_q_network": functools.partial(QNetwork, dueling=True),
}


def register_builder(name: str, fn: Builder) -> None:
    """Let ``PolicySpec(builder=name)`` build its skeleton as ``fn(obs_space, act_space,
    model)``. The module's ``forward(obs, params)`` must take its weights from ``params``
    (state_dict names -> tensors), as ActorCritic's does. The registry is per process:
    register at import of the module defining ``fn``, and import that module in every
    process that builds policies (publishers and env runners)."""
    if _BUILDERS.get(name, fn) is not fn:
        raise ValueError(f"policy builder {name!r} is already registered ({_BUILDERS[name]!r}); "
                         "pick another name.")
    _BUILDERS[name] = fn


def builder_for(name: str) -> Builder:
    """The registered builder; ValueError naming the known ones otherwise."""
    if name not in _BUILDERS:
        raise ValueError(f"unknown policy builder {name!r}; known: {sorted(_BUILDERS)}. Add one "
                         "with register_builder(name, fn), in every process that builds policies.")
    return _BUILDERS[name]

