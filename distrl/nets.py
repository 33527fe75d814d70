"""Networks and action distributions.

Distributions are tiny stateless classes over a tensor of "distribution inputs"
(logits, or mean and log-std), so that batches carry plain tensors and the KL to the
sampling policy can be computed from stored inputs. They skip torch.distributions'
argument validation and object construction: on CartPole-sized nets that overhead
is a large share of a forward pass.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F


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
            raise ValueError(
                f"`hiddens` {self.hiddens} must be non-empty positive sizes, e.g. (64, 64)."
            )


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


def discrete_start(space: gym.Space) -> int:
    """The value of index 0 of a Discrete space (gymnasium's ``start``; 0 otherwise):
    networks see index = value - start, envs get value = index + start."""
    return int(space.start) if isinstance(space, gym.spaces.Discrete) else 0


def _init(layer: nn.Linear, gain: float) -> nn.Linear:
    # Orthogonal init with small policy-head gain: the standard PPO recipe
    # (Andrychowicz et al. 2020, arXiv 2006.05990) that makes early updates stable.
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


def _layers(sizes: list[int], n_out: int, out_gain: float) -> nn.ModuleList:
    hidden = [_init(nn.Linear(a, b), math.sqrt(2)) for a, b in itertools.pairwise(sizes)]
    return nn.ModuleList([*hidden, _init(nn.Linear(sizes[-1], n_out), out_gain)])


class ActorCritic(nn.Module):
    """Policy head (distribution inputs) and value head over flat observations.

    forward() applies the layers with F.linear instead of calling each nn.Module:
    module-call overhead is about half the cost of acting with a CartPole-sized net.
    """

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: ModelConfig):
        super().__init__()
        check_spaces(obs_space, act_space)
        self.discrete_obs = isinstance(obs_space, gym.spaces.Discrete)
        # Discrete(n, start) observations take values start..start+n-1; one_hot needs 0..n-1.
        self.obs_start = discrete_start(obs_space)
        self.obs_dim = int(obs_space.n) if self.discrete_obs else int(np.prod(obs_space.shape))
        self.dist: Distribution = (
            Categorical if isinstance(act_space, gym.spaces.Discrete) else DiagGaussian
        )
        n_out = int(act_space.n) if self.dist is Categorical else int(act_space.shape[0])
        self.activation = torch.tanh if cfg.activation == "tanh" else torch.relu
        sizes = [self.obs_dim, *cfg.hiddens]
        if cfg.vf_share_layers:
            self.shared = _layers(sizes[:-1], sizes[-1], math.sqrt(2))
            sizes = sizes[-1:]
        else:
            self.shared = nn.ModuleList()
        self.pi = _layers(sizes, n_out, 0.01)
        self.vf = _layers(sizes, 1, 1.0)
        # State-independent log-std, as in the PPO paper's continuous-control setup.
        self.log_std = nn.Parameter(torch.zeros(n_out)) if self.dist is DiagGaussian else None
        self._cache_params()

    def _cache_params(self) -> None:
        # Plain lists of (weight, bias): nn.Module attribute lookup is slow on the hot path.
        groups = {"shared": self.shared, "pi": self.pi, "vf": self.vf}
        self._params = [[(m.weight, m.bias) for m in layers] for layers in groups.values()]
        self._keys = [[(f"{g}.{i}.weight", f"{g}.{i}.bias") for i in range(len(layers))]
                      for g, layers in groups.items()]

    def _apply(self, fn, recurse=True):  # .to(), .cuda(), ...: parameters may be new tensors
        out = super()._apply(fn, recurse)
        self._cache_params()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        out = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._cache_params()  # assign=True replaces the parameter objects themselves
        return out

    def _mlp(self, params: list, x: torch.Tensor, last_act: bool) -> torch.Tensor:
        for i, (w, b) in enumerate(params):
            x = F.linear(x, w, b)
            if last_act or i < len(params) - 1:
                x = self.activation(x)
        return x

    def forward(self, obs: torch.Tensor, params: dict[str, torch.Tensor] | None = None
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (distribution inputs [B, D], values [B]).

        ``params`` (state_dict names -> tensors) replaces the module's own parameters for
        this call: one skeleton can then act for many policies whose weights live
        elsewhere, e.g. as views of shared memory (distrl.policy_cache).
        """
        if self.discrete_obs:
            index = obs.long().reshape(-1)
            if self.obs_start:
                index = index - self.obs_start
            x = F.one_hot(index, self.obs_dim).float()
        else:
            x = obs.reshape(obs.shape[0], -1).float()
        if params is None:
            (shared, pi, vf), log_std = self._params, self.log_std
        else:
            shared, pi, vf = ([(params[w], params[b]) for w, b in g] for g in self._keys)
            log_std = params.get("log_std")
        h = self._mlp(shared, x, last_act=True)
        out = self._mlp(pi, h, last_act=False)
        if log_std is not None:
            out = torch.cat([out, log_std.expand_as(out)], dim=-1)
        return out, self._mlp(vf, h, last_act=False).squeeze(-1)

    def act(self, obs: torch.Tensor, generator: torch.Generator | None
            ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Sampled actions and what PPO's post-processing keeps (sampling.Policy)."""
        dist_inputs, values = self(obs)
        actions = self.dist.sample(dist_inputs, generator)
        logp = self.dist.log_prob(dist_inputs, actions)
        return actions, {"logp": logp, "dist_inputs": dist_inputs, "values": values}
