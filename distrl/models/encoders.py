"""What turns observations into features, and the dense layers after them: the conv
encoder for images (Nature DQN's by default), one-hot for Discrete observations, and
the functional MLP helpers both networks use.

Layers run functionally (F.linear / F.conv2d over cached parameter tuples): module-call
overhead is about half the cost of acting with a CartPole-sized net, and the same code
then accepts weights from elsewhere (``forward(obs, params)``, used by
distrl.store.policy_cache).
"""

from __future__ import annotations

import itertools
import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from distrl.models.config import ModelConfig

NATURE_CONV = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""Mnih et al. 2015's encoder: (out_channels, kernel, stride) per layer, for 84x84 frames."""


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


def is_image(space: gym.Space) -> bool:
    """The rule for a conv encoder: a uint8 Box of 2 dims (H, W: one grey frame) or of 3
    dims, channel first (C, H, W) as FrameStackObservation gives ((4, 84, 84) for Atari),
    or channel last (H, W, C) when the last axis has at most 4 entries and the first more
    (an RGB (210, 160, 3) frame, transposed inside the network). Float Boxes of any rank
    are flat features for the MLP (a float grid is as often a board or a feature matrix as
    a picture): give pixels as uint8 to get a conv stack."""
    return (isinstance(space, gym.spaces.Box) and space.dtype == np.uint8
            and len(space.shape) in (2, 3))


def image_layout(shape: tuple[int, ...]) -> tuple[tuple[int, ...], bool]:
    """(C, H, W) the conv stack sees for an image of ``shape``, and whether that image is
    channel last (see is_image)."""
    if len(shape) == 2:
        return (1, *shape), False
    if shape[-1] <= 4 < shape[0]:
        return (shape[2], shape[0], shape[1]), True
    return tuple(shape), False


def conv_out_hw(shape: tuple[int, ...], filters: tuple[tuple[int, int, int], ...]
                ) -> tuple[int, int]:
    """Height and width after the conv stack (no padding); ValueError when too small."""
    (_, h, w), _ = image_layout(shape)
    for i, (_, kernel, stride) in enumerate(filters):
        h, w = (h - kernel) // stride + 1, (w - kernel) // stride + 1
        if min(h, w) < 1:
            raise ValueError(
                f"image observations of shape {shape} are too small for conv_filters "
                f"{filters} (layer {i}'s kernel is larger than its input): set "
                "ModelConfig.conv_filters to smaller kernels and strides, e.g. ((16, 3, 1),), "
                "or give the observations as float32 to feed them flat to the MLP.")
    return h, w


class ConvEncoder(nn.Module):
    """Conv stack + flatten over images (see is_image). uint8 inputs are scaled to [0, 1]
    inside, so env runners and the replay keep frames as uint8 (4x less memory and
    copying); float inputs are taken as already scaled."""

    def __init__(self, space: gym.spaces.Box, filters: tuple[tuple[int, int, int], ...],
                 activation: str = "relu", ortho: bool = True):
        super().__init__()
        self.in_shape, self.channels_last = image_layout(tuple(space.shape))
        channels, convs = self.in_shape[0], []
        for out, kernel, stride in filters:
            convs.append(init_layer(nn.Conv2d(channels, out, kernel, stride), math.sqrt(2), ortho))
            channels = out
        self.convs = nn.ModuleList(convs)
        self.strides = [stride for _, _, stride in filters]
        self.activation = ACTIVATIONS[activation]
        self.out_dim = channels * math.prod(conv_out_hw(tuple(space.shape), filters))

    def forward(self, obs: torch.Tensor, weights: list | None = None) -> torch.Tensor:
        """Features [B, out_dim]; ``weights``, (weight, bias) per conv layer, replace the
        module's own for this call."""
        x = self.images(obs)
        weights = weights or [(c.weight, c.bias) for c in self.convs]
        for (w, b), stride in zip(weights, self.strides, strict=True):
            x = self.activation(F.conv2d(x, w, b, stride))
        return x.flatten(1)

    def images(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations [B, ...] as the float [B, C, H, W] the first conv reads."""
        x = obs.float() / 255.0 if obs.dtype == torch.uint8 else obs.float()
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        return x.reshape(x.shape[0], *self.in_shape)

    def forward_stacked(self, obs: torch.Tensor, layers: list[list]) -> torch.Tensor:
        """forward() of K networks at once: ``obs`` [K, n, ...], ``layers[k]`` network
        k's (weight, bias) per conv layer; features [K, n, out_dim]. The K networks are
        the groups of one grouped convolution over their images side by side."""
        k, n = obs.shape[:2]
        x = self.images(obs.reshape(k * n, *obs.shape[2:]))
        x = x.view(k, n, *x.shape[1:]).transpose(0, 1).reshape(n, -1, *x.shape[2:])
        for i, stride in enumerate(self.strides):
            w = torch.cat([net[i][0] for net in layers])  # [K * out, in, kh, kw]
            b = torch.cat([net[i][1] for net in layers])
            x = self.activation(F.conv2d(x, w, b, stride, groups=k))
        return x.reshape(n, k, -1).transpose(0, 1)


def discrete_start(space: gym.Space) -> int:
    """The value of index 0 of a Discrete space (gymnasium's ``start``; 0 otherwise):
    networks see index = value - start, envs get value = index + start."""
    return int(space.start) if isinstance(space, gym.spaces.Discrete) else 0


def encoder_for(obs_space: gym.Space, cfg: ModelConfig) -> ConvEncoder | None:
    """A conv stack for image spaces (is_image) and, when conv_filters are given, for
    any Box of 2 or 3 dims (a board's planes); None for flat and Discrete ones."""
    grid = (cfg.conv_filters is not None and isinstance(obs_space, gym.spaces.Box)
            and len(obs_space.shape) in (2, 3))
    if not (is_image(obs_space) or grid):
        return None
    return ConvEncoder(obs_space, cfg.conv_filters or NATURE_CONV, cfg.conv_activation,
                       cfg.ortho_init)


def input_dim(obs_space: gym.Space, encoder: ConvEncoder | None) -> int:
    """Width of what the dense layers see: conv features, a one-hot, or the flat obs."""
    if encoder is not None:
        return encoder.out_dim
    if isinstance(obs_space, gym.spaces.Discrete):
        return int(obs_space.n)
    return int(np.prod(obs_space.shape))


def encode(obs: torch.Tensor, encoder: ConvEncoder | None, discrete: bool, start: int,
           dim: int, conv: list) -> torch.Tensor:
    """Observations -> float features [B, dim] for the dense layers (``conv``: the conv
    layers' (weight, bias) tuples)."""
    if encoder is not None:
        return encoder(obs, conv)
    if discrete:
        # Discrete(n, start) observations take values start..start+n-1; one_hot needs 0..n-1.
        return F.one_hot(obs.long().reshape(-1) - start, dim).float()
    return obs.reshape(obs.shape[0], -1).float()


ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


def init_layer(layer: nn.Linear | nn.Conv2d, gain: float, ortho: bool = True
          ) -> nn.Linear | nn.Conv2d:
    # Orthogonal init with small policy-head gain: the standard PPO recipe
    # (Andrychowicz et al. 2020, arXiv 2006.05990) that makes early updates stable.
    if ortho:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


def linear_layers(sizes: list[int], n_out: int, out_gain: float, ortho: bool = True
            ) -> nn.ModuleList:
    hidden = [init_layer(nn.Linear(a, b), math.sqrt(2), ortho)
              for a, b in itertools.pairwise(sizes)]
    return nn.ModuleList([*hidden, init_layer(nn.Linear(sizes[-1], n_out), out_gain, ortho)])


def named_layers(prefix: str, layers: nn.ModuleList | None) -> dict[str, nn.Module]:
    return {f"{prefix}.{i}": m for i, m in enumerate(layers or [])}


def cached_params(groups: list[dict[str, nn.Module]]) -> tuple[list, list]:
    """Per group of named layers: their (weight, bias) tuples and state_dict names. Plain
    lists, because nn.Module attribute lookup is slow on the hot path."""
    return ([[(m.weight, m.bias) for m in g.values()] for g in groups],
            [[(f"{n}.weight", f"{n}.bias") for n in g] for g in groups])


def lookup_params(keys: list, params: dict[str, torch.Tensor]) -> list:
    """The (weight, bias) tuples of ``keys`` (as _cached gives them) taken from ``params``."""
    return [[(params[w], params[b]) for w, b in g] for g in keys]


def mlp(params: list, x: torch.Tensor, last_act: bool, activation) -> torch.Tensor:
    for i, (w, b) in enumerate(params):
        x = F.linear(x, w, b)
        if last_act or i < len(params) - 1:
            x = activation(x)
    return x


def stacked_mlp(layers: list[list], x: torch.Tensor, last_act: bool, activation
                ) -> torch.Tensor:
    """mlp() of K networks at once: ``layers[k]`` is network k's (weight, bias) list and
    ``x`` [K, n, in] its inputs; each layer one batched matmul over the stacked weights."""
    depth = len(layers[0])
    for i in range(depth):
        w = torch.stack([net[i][0] for net in layers])  # [K, out, in]
        b = torch.stack([net[i][1] for net in layers])  # [K, out]
        x = torch.baddbmm(b.unsqueeze(1), x, w.transpose(1, 2))
        if last_act or i < depth - 1:
            x = activation(x)
    return x

