"""QNetwork: Q-values for DQN, dueling or plain."""

from __future__ import annotations

import math

import gymnasium as gym
import torch
from torch import nn
from torch.nn import functional as F

from distrl.models.config import ModelConfig
from distrl.models.encoders import (
    ACTIVATIONS,
    cached_params,
    check_spaces,
    discrete_start,
    encode,
    encoder_for,
    init_layer,
    input_dim,
    linear_layers,
    lookup_params,
    mlp,
    named_layers,
)


class QNetwork(nn.Module):
    """Q-values [B, n_actions] for a Discrete action space: the encoder (conv stack for
    images, one-hot for Discrete observations), dense layers (ModelConfig.hiddens and
    activation) and a Q head, or with ``dueling`` (Wang et al. 2016) a value and an
    advantage head combined as Q = V + A - mean(A). Of ModelConfig it reads hiddens,
    activation, conv_filters, conv_activation and ortho_init. The runtime explores
    (apex.EpsilonGreedy); greedy() is for evaluation."""

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: ModelConfig,
                 dueling: bool = True):
        super().__init__()
        check_spaces(obs_space, act_space)
        if not isinstance(act_space, gym.spaces.Discrete):
            raise ValueError(f"DQN needs a Discrete action space, not {act_space}; use PPO "
                             "(`distrl train ppo`) for Box actions.")
        if cfg.observation_filter != "NoFilter":
            raise ValueError("observation_filter='MeanStdFilter' is PPO's (its runners collect "
                             "the statistics); leave it at 'NoFilter' for a Q-network.")
        self.discrete_obs = isinstance(obs_space, gym.spaces.Discrete)
        self.obs_start = discrete_start(obs_space)
        self.encoder = encoder_for(obs_space, cfg)
        self.obs_dim = input_dim(obs_space, self.encoder)
        self.activation = ACTIVATIONS[cfg.activation]
        sizes, ortho = [self.obs_dim, *cfg.hiddens], cfg.ortho_init
        self.hidden = linear_layers(sizes[:-1], sizes[-1], math.sqrt(2), ortho)
        self.advantage = init_layer(nn.Linear(sizes[-1], int(act_space.n)), 1.0, ortho)
        self.value = init_layer(nn.Linear(sizes[-1], 1), 1.0, ortho) if dueling else None
        self._cache_params()

    def _cache_params(self) -> None:
        heads = {"advantage": self.advantage}
        if self.value is not None:
            heads["value"] = self.value
        self._params, self._keys = cached_params([
            named_layers("encoder.convs", self.encoder.convs if self.encoder is not None else None),
            named_layers("hidden", self.hidden), heads])

    def _apply(self, fn, recurse=True):  # as ActorCritic's: keep the cached tuples current
        out = super()._apply(fn, recurse)
        self._cache_params()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        out = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._cache_params()
        return out

    def forward(self, obs: torch.Tensor, params: dict[str, torch.Tensor] | None = None
                ) -> torch.Tensor:
        """Q-values [B, n_actions]; ``params`` as in ActorCritic.forward."""
        conv, hidden, heads = self._params if params is None else lookup_params(self._keys, params)
        x = encode(obs, self.encoder, self.discrete_obs, self.obs_start, self.obs_dim, conv)
        h = mlp(hidden, x, True, self.activation)
        a = F.linear(h, *heads[0])
        if len(heads) == 1:
            return a
        v = F.linear(h, *heads[1])
        return v + a - a.mean(-1, keepdim=True)

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """The argmax actions (indices into the Discrete space) [B]."""
        return self(obs).argmax(-1)

