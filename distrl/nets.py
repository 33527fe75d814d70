"""Networks and action distributions.

Distributions are tiny stateless classes over a tensor of "distribution inputs"
(logits, or mean and log-std), so that batches carry plain tensors and the KL to the
sampling policy can be computed from stored inputs. They skip torch.distributions'
argument validation and object construction: on CartPole-sized nets that overhead
is a large share of a forward pass.

Both networks run their layers functionally (F.linear / F.conv2d over cached parameter
tuples): module-call overhead is about half the cost of acting with a CartPole-sized
net, and the same code then accepts weights from elsewhere (``forward(obs, params)``,
used by distrl.policy_cache).
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

from distrl.filters import RunningStats

NATURE_CONV = ((32, 8, 4), (64, 4, 2), (64, 3, 1))
"""Mnih et al. 2015's encoder: (out_channels, kernel, stride) per layer, for 84x84 frames."""


@dataclass(frozen=True)
class ModelConfig:
    """Networks; RLlib's names where RLlib has one. Image observations (see is_image) go
    through a conv stack first and the dense layers (hiddens) follow it: for Atari,
    ``ModelConfig(hiddens=(512,), activation="relu")`` is Nature DQN's network."""

    hiddens: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the policy (and value) MLP, after the conv stack for images."""
    activation: Literal["tanh", "relu"] = "tanh"
    """Activation between hidden layers."""
    vf_share_layers: bool = False
    """Share the hidden layers between policy and value function (then tune vf_loss_coeff)."""
    conv_filters: tuple[tuple[int, int, int], ...] | None = None
    """Conv layers for image observations as (out_channels, kernel, stride); None: Nature
    DQN's ((32, 8, 4), (64, 4, 2), (64, 3, 1)). Ignored for flat observations."""
    conv_activation: Literal["relu", "tanh"] = "relu"
    """Activation after each conv layer."""
    vf_hiddens: tuple[int, ...] | None = None
    """Hidden sizes of the value MLP (None: hiddens); ignored with vf_share_layers."""
    vf_activation: Literal["tanh", "relu"] | None = None
    """Activation of the value MLP (None: activation)."""
    free_log_std: bool = True
    """Box actions: a state-independent log-std parameter (PPO paper); False: the policy
    head outputs the log-std too."""
    log_std_init: float = 0.0
    """Initial log-std of Box actions (SB3's log_std_init; -0.5 .. -2 suit MuJoCo)."""
    ortho_init: bool = True
    """Orthogonal initialisation (gain sqrt(2), 0.01 for the policy head, 1 for the value
    head) as in SB3/CleanRL; False: torch's default."""
    observation_filter: Literal["NoFilter", "MeanStdFilter"] = "NoFilter"
    """MeanStdFilter: normalize flat observations by running mean/std (clipped to +-10);
    the statistics live in the network's buffers, so checkpoints and eval apply them."""

    def __post_init__(self) -> None:
        if not self.hiddens or any(h <= 0 for h in self.hiddens):
            raise ValueError(
                f"`hiddens` {self.hiddens} must be non-empty positive sizes, e.g. (64, 64)."
            )
        if self.conv_filters is not None and (
                not self.conv_filters or any(len(f) != 3 or min(f) <= 0
                                             for f in self.conv_filters)):
            raise ValueError(f"`conv_filters` {self.conv_filters} must be (out_channels, "
                             "kernel, stride) triples of positive ints, e.g. ((16, 8, 4),).")


MASKED_LOGIT = -1e9
"""Logit of an illegal action: exp() underflows to exactly 0, yet stays finite, so
entropies and KLs see 0 * finite, never 0 * inf = nan."""


def mask_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Logits with illegal actions (mask False) set to MASKED_LOGIT; unchanged without a
    mask. Sampling, the PPO loss and evaluation all apply it, so a masked action is never
    drawn and carries no probability mass in the gradient."""
    return logits if mask is None else logits.masked_fill(~mask.bool(), MASKED_LOGIT)


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
            convs.append(_init(nn.Conv2d(channels, out, kernel, stride), math.sqrt(2), ortho))
            channels = out
        self.convs = nn.ModuleList(convs)
        self.strides = [stride for _, _, stride in filters]
        self.activation = _ACTIVATIONS[activation]
        self.out_dim = channels * math.prod(conv_out_hw(tuple(space.shape), filters))

    def forward(self, obs: torch.Tensor, weights: list | None = None) -> torch.Tensor:
        """Features [B, out_dim]; ``weights``, (weight, bias) per conv layer, replace the
        module's own for this call."""
        x = obs.float() / 255.0 if obs.dtype == torch.uint8 else obs.float()
        if self.channels_last:
            x = x.permute(0, 3, 1, 2)
        x = x.reshape(x.shape[0], *self.in_shape)
        weights = weights or [(c.weight, c.bias) for c in self.convs]
        for (w, b), stride in zip(weights, self.strides, strict=True):
            x = self.activation(F.conv2d(x, w, b, stride))
        return x.flatten(1)


def discrete_start(space: gym.Space) -> int:
    """The value of index 0 of a Discrete space (gymnasium's ``start``; 0 otherwise):
    networks see index = value - start, envs get value = index + start."""
    return int(space.start) if isinstance(space, gym.spaces.Discrete) else 0


def encoder_for(obs_space: gym.Space, cfg: ModelConfig) -> ConvEncoder | None:
    """A conv stack for image spaces (is_image), None for flat and Discrete ones."""
    if not is_image(obs_space):
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


_ACTIVATIONS = {"tanh": torch.tanh, "relu": torch.relu}


def check_filterable(obs_space: gym.Space, encoder: ConvEncoder | None) -> None:
    if encoder is not None or isinstance(obs_space, gym.spaces.Discrete):
        raise ValueError(f"observation_filter='MeanStdFilter' normalizes flat Box "
                         f"observations, not {obs_space}; leave it at 'NoFilter'.")


def _init(layer: nn.Linear | nn.Conv2d, gain: float, ortho: bool = True
          ) -> nn.Linear | nn.Conv2d:
    # Orthogonal init with small policy-head gain: the standard PPO recipe
    # (Andrychowicz et al. 2020, arXiv 2006.05990) that makes early updates stable.
    if ortho:
        nn.init.orthogonal_(layer.weight, gain)
        nn.init.zeros_(layer.bias)
    return layer


def _layers(sizes: list[int], n_out: int, out_gain: float, ortho: bool = True
            ) -> nn.ModuleList:
    hidden = [_init(nn.Linear(a, b), math.sqrt(2), ortho) for a, b in itertools.pairwise(sizes)]
    return nn.ModuleList([*hidden, _init(nn.Linear(sizes[-1], n_out), out_gain, ortho)])


def _named(prefix: str, layers: nn.ModuleList | None) -> dict[str, nn.Module]:
    return {f"{prefix}.{i}": m for i, m in enumerate(layers or [])}


def _cached(groups: list[dict[str, nn.Module]]) -> tuple[list, list]:
    """Per group of named layers: their (weight, bias) tuples and state_dict names. Plain
    lists, because nn.Module attribute lookup is slow on the hot path."""
    return ([[(m.weight, m.bias) for m in g.values()] for g in groups],
            [[(f"{n}.weight", f"{n}.bias") for n in g] for g in groups])


def _lookup(keys: list, params: dict[str, torch.Tensor]) -> list:
    """The (weight, bias) tuples of ``keys`` (as _cached gives them) taken from ``params``."""
    return [[(params[w], params[b]) for w, b in g] for g in keys]


def _mlp(params: list, x: torch.Tensor, last_act: bool, activation) -> torch.Tensor:
    for i, (w, b) in enumerate(params):
        x = F.linear(x, w, b)
        if last_act or i < len(params) - 1:
            x = activation(x)
    return x


OBS_CLIP = 10.0  # RLlib's MeanStdFilter and SB3's VecNormalize clip normalized obs here


class ActorCritic(nn.Module):
    """Policy head (distribution inputs) and value head over the observation's features:
    a conv stack shared by both heads for images, the flat observation otherwise."""

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: ModelConfig):
        super().__init__()
        check_spaces(obs_space, act_space)
        self.discrete_obs = isinstance(obs_space, gym.spaces.Discrete)
        self.obs_start = discrete_start(obs_space)
        self.encoder = encoder_for(obs_space, cfg)
        self.obs_dim = input_dim(obs_space, self.encoder)
        self.dist: Distribution = (
            Categorical if isinstance(act_space, gym.spaces.Discrete) else DiagGaussian
        )
        n_out = int(act_space.n) if self.dist is Categorical else int(act_space.shape[0])
        self.activation = _ACTIVATIONS[cfg.activation]
        self.vf_activation = _ACTIVATIONS[cfg.vf_activation or cfg.activation]
        init = cfg.ortho_init
        sizes = [self.obs_dim, *cfg.hiddens]
        vf_sizes = [self.obs_dim, *(cfg.vf_hiddens or cfg.hiddens)]
        if cfg.vf_share_layers:
            self.shared = _layers(sizes[:-1], sizes[-1], math.sqrt(2), init)
            sizes = vf_sizes = sizes[-1:]
        else:
            self.shared = nn.ModuleList()
        head_log_std = self.dist is DiagGaussian and not cfg.free_log_std
        self.pi = _layers(sizes, 2 * n_out if head_log_std else n_out, 0.01, init)
        self.vf = _layers(vf_sizes, 1, 1.0, init)
        if head_log_std:  # the head's log-std half starts at log_std_init
            nn.init.constant_(self.pi[-1].bias[n_out:], cfg.log_std_init)
        # State-independent log-std, as in the PPO paper's continuous-control setup.
        self.log_std = (nn.Parameter(torch.full((n_out,), cfg.log_std_init))
                        if self.dist is DiagGaussian and cfg.free_log_std else None)
        self.filtered = cfg.observation_filter == "MeanStdFilter"
        if self.filtered:
            check_filterable(obs_space, self.encoder)
            self.register_buffer("obs_mean", torch.zeros(self.obs_dim))
            self.register_buffer("obs_var", torch.ones(self.obs_dim))
            self.register_buffer("obs_count", torch.zeros(()))
        self._cache_params()

    def _cache_params(self) -> None:
        self._params, self._keys = _cached([
            _named("encoder.convs", self.encoder.convs if self.encoder is not None else None),
            _named("shared", self.shared), _named("pi", self.pi), _named("vf", self.vf)])

    def _apply(self, fn, recurse=True):  # .to(), .cuda(), ...: parameters may be new tensors
        out = super()._apply(fn, recurse)
        self._cache_params()
        return out

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        out = super().load_state_dict(state_dict, strict=strict, assign=assign)
        self._cache_params()  # assign=True replaces the parameter objects themselves
        return out

    def obs_stats(self) -> RunningStats:
        """The observation filter's statistics (what runners act with)."""
        count = float(self.obs_count)
        return RunningStats(count, self.obs_mean.double().cpu().numpy(),
                            self.obs_var.double().cpu().numpy() * count)

    def update_obs_filter(self, delta: RunningStats) -> None:
        """Merge an iteration's observation statistics (call after the update, so the
        batch was learned with the statistics it was sampled with)."""
        merged = self.obs_stats().merge(delta)
        with torch.no_grad():
            self.obs_mean.copy_(torch.as_tensor(merged.mean))
            self.obs_var.copy_(torch.as_tensor(merged.var))
            self.obs_count.fill_(merged.count)

    def normalize(self, x: torch.Tensor, params: dict[str, torch.Tensor] | None) -> torch.Tensor:
        buffers = self if params is None else None
        mean = self.obs_mean if buffers else params["obs_mean"]
        var = self.obs_var if buffers else params["obs_var"]
        return ((x - mean) / torch.sqrt(var + 1e-8)).clamp(-OBS_CLIP, OBS_CLIP)

    def forward(self, obs: torch.Tensor, params: dict[str, torch.Tensor] | None = None,
                value: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns (distribution inputs [B, D], values [B]).

        ``params`` (state_dict names -> tensors) replaces the module's own parameters for
        this call: one skeleton can then act for many policies whose weights live
        elsewhere, e.g. as views of shared memory (distrl.policy_cache). ``value=False``
        skips the value head (half the work of a league opponent's move) and returns
        zeros for the values.
        """
        if params is None:
            (conv, shared, pi, vf), log_std = self._params, self.log_std
        else:
            (conv, shared, pi, vf), log_std = _lookup(self._keys, params), params.get("log_std")
        x = encode(obs, self.encoder, self.discrete_obs, self.obs_start, self.obs_dim, conv)
        if self.filtered:
            x = self.normalize(x, params)
        h = _mlp(shared, x, True, self.activation)
        out = _mlp(pi, h, False, self.activation)
        if log_std is not None:
            out = torch.cat([out, log_std.expand_as(out)], dim=-1)
        if not value:
            return out, out.new_zeros(out.shape[0])
        return out, _mlp(vf, h, False, self.vf_activation).squeeze(-1)

    def act(self, obs: torch.Tensor, generator: torch.Generator | None
            ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Sampled actions and what PPO's post-processing keeps (sampling.Policy)."""
        dist_inputs, values = self(obs)
        actions = self.dist.sample(dist_inputs, generator)
        logp = self.dist.log_prob(dist_inputs, actions)
        return actions, {"logp": logp, "dist_inputs": dist_inputs, "values": values}


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
        self.activation = _ACTIVATIONS[cfg.activation]
        sizes, ortho = [self.obs_dim, *cfg.hiddens], cfg.ortho_init
        self.hidden = _layers(sizes[:-1], sizes[-1], math.sqrt(2), ortho)
        self.advantage = _init(nn.Linear(sizes[-1], int(act_space.n)), 1.0, ortho)
        self.value = _init(nn.Linear(sizes[-1], 1), 1.0, ortho) if dueling else None
        self._cache_params()

    def _cache_params(self) -> None:
        heads = {"advantage": self.advantage}
        if self.value is not None:
            heads["value"] = self.value
        self._params, self._keys = _cached([
            _named("encoder.convs", self.encoder.convs if self.encoder is not None else None),
            _named("hidden", self.hidden), heads])

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
        conv, hidden, heads = self._params if params is None else _lookup(self._keys, params)
        x = encode(obs, self.encoder, self.discrete_obs, self.obs_start, self.obs_dim, conv)
        h = _mlp(hidden, x, True, self.activation)
        a = F.linear(h, *heads[0])
        if len(heads) == 1:
            return a
        v = F.linear(h, *heads[1])
        return v + a - a.mean(-1, keepdim=True)

    def greedy(self, obs: torch.Tensor) -> torch.Tensor:
        """The argmax actions (indices into the Discrete space) [B]."""
        return self(obs).argmax(-1)
