"""Networks and action distributions.

Distributions are tiny stateless classes over a tensor of "distribution inputs"
(logits, or mean and log-std), so that batches carry plain tensors and the KL to the
sampling policy can be computed from stored inputs. They skip torch.distributions'
argument validation and object construction: on CartPole-sized nets that overhead
is a large share of a forward pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    """Fully connected actor-critic; RLlib's names where RLlib has one."""

    hiddens: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the policy (and value) MLP."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation between hidden layers."""
    vf_share_layers: bool = False
    """Share the hidden layers between policy and value function (then tune vf_loss_coeff)."""

    def __post_init__(self) -> None:
        if not self.hiddens or any(h <= 0 for h in self.hiddens):
            raise ValueError(f"`hiddens` {self.hiddens} must be non-empty positive sizes, e.g. (64, 64).")


class Categorical:
    """Discrete actions; inputs are logits [B, n]."""

    @staticmethod
    def log_prob(inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(inputs, dim=-1)
        return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    @staticmethod
    def entropy(inputs: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(inputs, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    @staticmethod
    def kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """KL(old || new) per row."""
        old_logp = torch.log_softmax(old, dim=-1)
        return (old_logp.exp() * (old_logp - torch.log_softmax(new, dim=-1))).sum(-1)

    @staticmethod
    def sample(inputs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        # Gumbel-max: one rand + argmax, cheaper than torch.multinomial on small batches.
        u = torch.rand(inputs.shape, generator=generator).clamp_(1e-12, 1.0)
        return torch.argmax(inputs - torch.log(-torch.log(u)), dim=-1)

    @staticmethod
    def greedy(inputs: torch.Tensor) -> torch.Tensor:
        return torch.argmax(inputs, dim=-1)


class DiagGaussian:
    """Continuous actions; inputs are [mean, log_std] concatenated on the last axis."""

    @staticmethod
    def _split(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = torch.chunk(inputs, 2, dim=-1)
        return mean, log_std

    @staticmethod
    def log_prob(inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        mean, log_std = DiagGaussian._split(inputs)
        z = (actions - mean) / log_std.exp()
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    @staticmethod
    def entropy(inputs: torch.Tensor) -> torch.Tensor:
        _, log_std = DiagGaussian._split(inputs)
        return (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)

    @staticmethod
    def kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        m0, s0 = DiagGaussian._split(old)
        m1, s1 = DiagGaussian._split(new)
        var0, var1 = (2 * s0).exp(), (2 * s1).exp()
        return (s1 - s0 + (var0 + (m0 - m1).pow(2)) / (2 * var1) - 0.5).sum(-1)

    @staticmethod
    def sample(inputs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        mean, log_std = DiagGaussian._split(inputs)
        return mean + log_std.exp() * torch.randn(mean.shape, generator=generator)

    @staticmethod
    def greedy(inputs: torch.Tensor) -> torch.Tensor:
        return DiagGaussian._split(inputs)[0]


Distribution = type[Categorical] | type[DiagGaussian]


def check_spaces(obs_space: gym.Space, act_space: gym.Space) -> None:
    """Raise ValueError naming the space distrl cannot handle and what it can."""
    if not isinstance(obs_space, gym.spaces.Box | gym.spaces.Discrete):
        raise ValueError(
            f"observation space {obs_space} is not supported: use a Box or Discrete space "
            "(wrap Dict/Tuple observations with gymnasium.wrappers.FlattenObservation)."
        )
    if isinstance(act_space, gym.spaces.Box) and len(act_space.shape) != 1:
        raise ValueError(
            f"action space {act_space} is not supported: Box actions must be 1-D; "
            "reshape them with a gymnasium ActionWrapper."
        )
    if not isinstance(act_space, gym.spaces.Box | gym.spaces.Discrete):
        raise ValueError(
            f"action space {act_space} is not supported: use Discrete or a 1-D Box."
        )


def _mlp(sizes: list[int], act: type[nn.Module]) -> list[nn.Module]:
    layers: list[nn.Module] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [_init(nn.Linear(a, b), math.sqrt(2)), act()]
    return layers


def _init(layer: nn.Linear, gain: float) -> nn.Linear:
    # Orthogonal init with small policy-head gain: the standard PPO recipe
    # (Andrychowicz et al. 2020, arXiv 2006.05990) that makes early updates stable.
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(nn.Module):
    """Policy head (distribution inputs) and value head over flat observations."""

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: ModelConfig):
        super().__init__()
        check_spaces(obs_space, act_space)
        self.discrete_obs = isinstance(obs_space, gym.spaces.Discrete)
        obs_dim = int(obs_space.n) if self.discrete_obs else int(np.prod(obs_space.shape))
        self.obs_dim = obs_dim
        self.dist: Distribution = (
            Categorical if isinstance(act_space, gym.spaces.Discrete) else DiagGaussian
        )
        n_out = int(act_space.n) if self.dist is Categorical else int(act_space.shape[0])
        act = nn.Tanh if cfg.activation == "tanh" else nn.ReLU
        sizes = [obs_dim, *cfg.hiddens]
        self.shared = nn.Sequential(*_mlp(sizes, act)) if cfg.vf_share_layers else None
        self.pi = nn.Sequential(*([] if self.shared else _mlp(sizes, act)),
                                _init(nn.Linear(sizes[-1], n_out), 0.01))
        self.vf = nn.Sequential(*([] if self.shared else _mlp(sizes, act)),
                                _init(nn.Linear(sizes[-1], 1), 1.0))
        # State-independent log-std, as in the PPO paper's continuous-control setup.
        self.log_std = nn.Parameter(torch.zeros(n_out)) if self.dist is DiagGaussian else None

    def _features(self, obs: torch.Tensor) -> torch.Tensor:
        if self.discrete_obs:
            return nn.functional.one_hot(obs.long().reshape(-1), self.obs_dim).float()
        return obs.reshape(obs.shape[0], -1).float()

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (distribution inputs [B, D], values [B])."""
        x = self._features(obs)
        h = self.shared(x) if self.shared is not None else x
        out = self.pi(h)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out, self.vf(h).squeeze(-1)
