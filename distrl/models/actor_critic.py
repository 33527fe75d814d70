"""ActorCritic: PPO's network (policy head as distribution inputs, value head), with
an optional observation filter in its buffers.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import torch
from torch import nn
from torch.nn import functional as F

from distrl.models.config import ModelConfig
from distrl.models.distributions import (
    Categorical,
    DiagGaussian,
    Distribution,
    SDENoise,
    sde_log_std,
)
from distrl.models.encoders import (
    ACTIVATIONS,
    ConvEncoder,
    cached_params,
    check_spaces,
    discrete_start,
    encode,
    encoder_for,
    input_dim,
    linear_layers,
    lookup_params,
    mlp,
    named_layers,
    stacked_mlp,
)
from distrl.models.filters import RunningStats


def check_filterable(obs_space: gym.Space, encoder: ConvEncoder | None) -> None:
    if encoder is not None or isinstance(obs_space, gym.spaces.Discrete):
        raise ValueError(f"observation_filter='MeanStdFilter' normalizes flat Box "
                         f"observations, not {obs_space}; leave it at 'NoFilter'.")


def check_scaling(act_space: gym.Space, action_scaling: bool) -> bool:
    """action_scaling, refused where it has no bounds to map [-1, 1] onto."""
    if action_scaling and not (isinstance(act_space, gym.spaces.Box)
                               and act_space.is_bounded("both")):
        raise ValueError(f"action_scaling maps [-1, 1] onto the bounds of Box actions; "
                         f"{act_space} has none to map onto. Leave action_scaling off.")
    return action_scaling


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
        self.activation = ACTIVATIONS[cfg.activation]
        self.vf_activation = ACTIVATIONS[cfg.vf_activation or cfg.activation]
        init = cfg.ortho_init
        sizes = [self.obs_dim, *cfg.hiddens]
        vf_sizes = [self.obs_dim, *(cfg.vf_hiddens or cfg.hiddens)]
        if cfg.vf_share_layers:  # no hiddens (an LSTM's input): nothing to share
            self.shared = (linear_layers(sizes[:-1], sizes[-1], math.sqrt(2), init)
                           if cfg.hiddens else nn.ModuleList())
            sizes = vf_sizes = sizes[-1:]
        else:
            self.shared = nn.ModuleList()
        head_log_std = self.dist is DiagGaussian and not cfg.free_log_std
        self.pi = linear_layers(sizes, 2 * n_out if head_log_std else n_out, 0.01, init)
        self.vf = linear_layers(vf_sizes, 1, 1.0, init)
        if head_log_std:  # the head's log-std half starts at log_std_init
            nn.init.constant_(self.pi[-1].bias[n_out:], cfg.log_std_init)
        # State-independent log-std, as in the PPO paper's continuous-control setup; gSDE's
        # is a matrix over the policy's last hidden features.
        if cfg.sde_sample_freq and self.dist is not DiagGaussian:
            raise ValueError(f"`sde_sample_freq` ({cfg.sde_sample_freq}) explores Box actions, "
                             f"not {act_space}; leave it at 0.")
        self.sde_noise = SDENoise(cfg.sde_sample_freq) if cfg.sde_sample_freq else None
        self.sde_latent: torch.Tensor | None = None
        self.log_std = self._log_std(self.pi[-1].in_features, n_out, cfg)
        self.action_scaling = check_scaling(act_space, cfg.action_scaling)
        self.filtered = cfg.observation_filter == "MeanStdFilter"
        if self.filtered:
            check_filterable(obs_space, self.encoder)
            self.register_buffer("obs_mean", torch.zeros(self.obs_dim))
            self.register_buffer("obs_var", torch.ones(self.obs_dim))
            self.register_buffer("obs_count", torch.zeros(()))
        self._cache_params()

    def _log_std(self, features: int, n_out: int, cfg: ModelConfig) -> nn.Parameter | None:
        if self.dist is not DiagGaussian or not cfg.free_log_std:
            return None
        shape = (features, n_out) if self.sde_noise is not None else (n_out,)
        return nn.Parameter(torch.full(shape, float(cfg.log_std_init)))

    def _cache_params(self) -> None:
        self._params, self._keys = cached_params([
            named_layers("encoder.convs", self.encoder.convs if self.encoder is not None else None),
            named_layers("shared", self.shared), named_layers("pi", self.pi),
            named_layers("vf", self.vf)])

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

    @property
    def stackable(self) -> bool:
        """Whether forward_stacked runs it: a Box observation, unfiltered."""
        return not self.discrete_obs and not self.filtered

    def layers(self, params: dict[str, torch.Tensor] | None = None) -> tuple[list, Any]:
        """Its (weight, bias) groups (conv, shared, pi, vf) and free log-std: its own, or
        those of ``params`` (state_dict names -> tensors)."""
        if params is None:
            return self._params, self.log_std
        return lookup_params(self._keys, params), params.get("log_std")

    def forward_stacked(self, obs: torch.Tensor, layers: list[tuple[list, Any]]
                        ) -> torch.Tensor:
        """Distribution inputs [K, n, D] of K policies of this architecture at once, each
        on its own observations ``obs[k]`` ([K, n, ...]); ``layers``: each one's layers()
        (games.batched: a league's opponents in one pass; value heads skipped)."""
        if self.encoder is not None:
            x = self.encoder.forward_stacked(obs, [g[0] for g, _ in layers])
        else:
            x = obs.reshape(*obs.shape[:2], -1).float()
        x = stacked_mlp([g[1] for g, _ in layers], x, True, self.activation)
        x = stacked_mlp([g[2] for g, _ in layers], x, False, self.activation)
        if layers[0][1] is not None:
            x = torch.cat([x, torch.stack([s for _, s in layers])[:, None].expand_as(x)], -1)
        return x

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
        elsewhere, e.g. as views of shared memory (distrl.store.policy_cache). ``value=False``
        skips the value head (half the work of a league opponent's move) and returns
        zeros for the values.
        """
        return self.heads(self.features(obs, params), params, value)

    def features(self, obs: torch.Tensor, params: dict[str, torch.Tensor] | None = None
                 ) -> torch.Tensor:
        """What both heads see: the encoded, filtered observation through the shared
        layers ([B, F])."""
        (conv, shared, _, _) = self._params if params is None else lookup_params(
            self._keys, params)
        x = encode(obs, self.encoder, self.discrete_obs, self.obs_start, self.obs_dim, conv)
        if self.filtered:
            x = self.normalize(x, params)
        return mlp(shared, x, True, self.activation)

    def heads(self, h: torch.Tensor, params: dict[str, torch.Tensor] | None = None,
              value: bool = True, vf_h: torch.Tensor | None = None
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """(distribution inputs [..., D], values [...]) from features ``h [..., F]``
        (the value head's own features ``vf_h``, if given)."""
        if params is None:
            (_, _, pi, vf), log_std = self._params, self.log_std
        else:
            (_, _, pi, vf) = lookup_params(self._keys, params)
            log_std = params.get("log_std")
        if self.sde_noise is not None:
            # Kept for sample(): gSDE's noise is a map of these features (as RLlib's
            # models keep their features for value_function()).
            latent = mlp(pi[:-1], h, True, self.activation)
            self.sde_latent = latent.detach()
            out = torch.cat([F.linear(latent, *pi[-1]), sde_log_std(latent, log_std)], dim=-1)
        else:
            out = mlp(pi, h, False, self.activation)
            if log_std is not None:
                out = torch.cat([out, log_std.expand_as(out)], dim=-1)
        if not value:
            return out, out.new_zeros(out.shape[:-1])
        return out, mlp(vf, h if vf_h is None else vf_h, False, self.vf_activation).squeeze(-1)

    def act(self, obs: torch.Tensor, generator: torch.Generator | None, context: Any = None
            ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Sampled actions and what PPO's post-processing keeps (sampling.Policy; a
        feed-forward policy needs no step context)."""
        dist_inputs, values = self(obs)
        actions = self.sample(dist_inputs, generator)
        logp = self.dist.log_prob(dist_inputs, actions)
        return actions, {"logp": logp, "dist_inputs": dist_inputs, "values": values}

    def sample(self, dist_inputs: torch.Tensor, generator: torch.Generator | None
               ) -> torch.Tensor:
        """Exploring actions for the latest forward's ``dist_inputs``: gSDE's held noise
        (sde_sample_freq), else independent draws."""
        if self.sde_noise is None:
            return self.dist.sample(dist_inputs, generator)
        return self.sde_noise.sample(dist_inputs, self.sde_latent, self.log_std, generator)


class StateCritic(nn.Module):
    """An action-value MLP over a game's whole state, beside a league learner's
    ActorCritic (LeagueConfig.state_critic): [B, outcomes] values, to the player whose
    view the state is, of each move or chance outcome from states [B, size]."""

    def __init__(self, size: int, outcomes: int, cfg: ModelConfig):
        super().__init__()
        self.layers = linear_layers([size, *(cfg.vf_hiddens or cfg.hiddens)], outcomes, 1.0,
                                    cfg.ortho_init)
        self.activation = ACTIVATIONS[cfg.vf_activation or cfg.activation]

    def forward(self, state: torch.Tensor) -> torch.Tensor:
        layers = [(m.weight, m.bias) for m in self.layers]
        return mlp(layers, state, False, self.activation)
