"""RecurrentActorCritic: ActorCritic with an LSTM core between its hidden layers and its
heads (``ModelConfig.use_lstm``), and LSTMActor, which carries each sub-env's state
through sampling and evaluation.

Layout: encoder (conv for images) -> hiddens -> [features, previous action one-hot,
previous reward] -> nn.LSTM(lstm_cell_size) -> lstm_head_hiddens -> linear head (SB3's
RecurrentPPO: no hiddens, its net_arch as lstm_head_hiddens). With ``vf_share_layers``
the policy and value heads read one LSTM; without (the default), the value function
has its own hiddens and LSTM (SB3's ``enable_critic_lstm``), so the value loss's
scale cannot swamp the policy's memory. The state is (h, c), each ``[N, state_size]``
(the critic's LSTM, if any, after the policy's); a state is zero at an episode's first
step and never carried across a reset.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.models.distributions import DiagGaussian
from distrl.models.encoders import cached_params, linear_layers, lookup_params, mlp, named_layers

State = tuple[torch.Tensor, torch.Tensor]  # (h, c), each [N, state_size]
Params = dict[str, torch.Tensor] | None


def set_forget_bias(lstm: nn.LSTM, value: float) -> None:
    """Forget gate's total bias = ``value``: torch adds bias_ih and bias_hh, gates in the
    order (input, forget, cell, output)."""
    n = lstm.hidden_size
    with torch.no_grad():
        lstm.bias_ih_l0[n:2 * n].fill_(value)
        lstm.bias_hh_l0[n:2 * n].zero_()


class RecurrentActorCritic(ActorCritic):
    """An ActorCritic whose heads read LSTM outputs. ``step`` advances one time step
    for a batch of envs (sampling); ``unroll`` runs padded sequences ``[L, S]`` from their
    initial states (training). ``forward`` (no state) is refused: it would act with an
    empty memory."""

    recurrent = True

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: ModelConfig):
        super().__init__(obs_space, act_space, cfg)
        self.cell = cfg.lstm_cell_size
        self.discrete_act = self.dist is not DiagGaussian
        self.act_dim = int(act_space.n) if self.discrete_act else int(act_space.shape[0])
        self.use_prev_action, self.use_prev_reward = (cfg.lstm_use_prev_action,
                                                      cfg.lstm_use_prev_reward)
        extra = self.act_dim * self.use_prev_action + self.use_prev_reward
        n_out = self.pi[-1].out_features
        # ActorCritic's pi and vf MLPs become trunks (hiddens, activated) before the LSTMs;
        # the heads are single linear layers after them. Shared: the shared layers are
        # the trunk and both heads read one LSTM.
        self.pi_trunk = nn.ModuleList() if cfg.vf_share_layers else self.pi[:-1]
        self.vf_trunk = nn.ModuleList() if cfg.vf_share_layers else self.vf[:-1]
        self.lstm = nn.LSTM(self.pi[-1].in_features + extra, self.cell)
        self.vf_lstm = None if cfg.vf_share_layers else nn.LSTM(
            self.vf[-1].in_features + extra, self.cell)
        self.state_size = self.cell * (1 if self.vf_lstm is None else 2)
        if cfg.lstm_forget_bias is not None:
            for lstm in filter(None, (self.lstm, self.vf_lstm)):
                set_forget_bias(lstm, cfg.lstm_forget_bias)
        head = [self.cell, *cfg.lstm_head_hiddens]
        self.pi = linear_layers(head, n_out, 0.01, cfg.ortho_init)
        self.vf = linear_layers(head, 1, 1.0, cfg.ortho_init)
        if self.dist is DiagGaussian and not cfg.free_log_std:
            nn.init.constant_(self.pi[-1].bias[self.act_dim:], cfg.log_std_init)
        if self.sde_noise is not None:  # gSDE's features are now the heads' last hiddens
            self.log_std = self._log_std(head[-1], n_out, cfg)
        # Built last, so that without it every other layer draws the same initial weights.
        self.next_obs, self.next_obs_weight = None, cfg.lstm_next_obs_loss
        if self.next_obs_weight > 0:
            if len(getattr(obs_space, "shape", None) or ()) != 1:
                raise ValueError(f"`lstm_next_obs_loss` predicts flat observations; this env's "
                                 f"are {obs_space}. Set it to 0.")
            self.next_obs = nn.Linear(self.cell + self.act_dim, obs_space.shape[0])
        self._cache_params()

    def _cache_params(self) -> None:
        super()._cache_params()
        if hasattr(self, "vf_trunk"):  # ActorCritic.__init__ calls this before they exist
            self._trunks, self._trunk_keys = cached_params([
                named_layers("pi_trunk", self.pi_trunk), named_layers("vf_trunk", self.vf_trunk)])

    def forward(self, obs: torch.Tensor, params: Any = None, value: bool = True) -> Any:
        raise TypeError("a recurrent policy acts with a state: use step() or unroll() "
                        "(LSTMActor carries the state per env).")

    def initial_state(self, n: int) -> State:
        device = self.pi[-1].weight.device
        return (torch.zeros(n, self.state_size, device=device),
                torch.zeros(n, self.state_size, device=device))

    def _core_inputs(self, obs: torch.Tensor, prev_actions: torch.Tensor,
                     prev_rewards: torch.Tensor, params: Params) -> list[torch.Tensor]:
        """Each LSTM's input for ``obs [..., *obs_shape]``: its trunk's features with the
        previous action and reward."""
        lead = prev_rewards.shape
        x = self.features(obs.reshape(-1, *obs.shape[len(lead):]), params)
        extras = []
        if self.use_prev_action:
            a = prev_actions
            extras.append(F.one_hot(a.long(), self.act_dim).to(x.dtype) if self.discrete_act
                          else a.to(x.dtype))
        if self.use_prev_reward:
            extras.append(prev_rewards.to(x.dtype)[..., None])
        pi, vf = self._trunks if params is None else lookup_params(self._trunk_keys, params)
        trunks = [(pi, self.activation)]
        if self.vf_lstm is not None:
            trunks.append((vf, self.vf_activation))
        return [torch.cat([mlp(layers, x, True, act).reshape(*lead, -1), *extras], dim=-1)
                for layers, act in trunks]

    def _run(self, inputs: list[torch.Tensor], state: State, params: Params
             ) -> tuple[torch.Tensor, torch.Tensor, State, torch.Tensor]:
        """The LSTMs over ``[L, S, F]`` inputs from ``state``: (distribution inputs,
        values, final state, the policy LSTM's outputs)."""
        outs, hs, cs = [], [], []
        lstms = [(n, m) for n, m in (("lstm", self.lstm), ("vf_lstm", self.vf_lstm))
                 if m is not None]
        for i, ((name, lstm), x) in enumerate(zip(lstms, inputs, strict=True)):
            part = slice(i * self.cell, (i + 1) * self.cell)
            hx = (state[0][None, :, part].contiguous(), state[1][None, :, part].contiguous())
            if params is None:
                out, (h, c) = lstm(x, hx)
            else:  # weights from elsewhere (a policy store's read-only views)
                out, (h, c) = _lstm_steps(x, hx, [params[f"{name}.{k}"] for k in LSTM_KEYS])
            outs.append(out)
            hs.append(h[0])
            cs.append(c[0])
        dist_inputs, values = self.heads(outs[0], params, vf_h=outs[-1])
        return dist_inputs, values, (torch.cat(hs, dim=-1), torch.cat(cs, dim=-1)), outs[0]

    def step(self, obs: torch.Tensor, state: State, prev_actions: torch.Tensor,
             prev_rewards: torch.Tensor, params: Params = None
             ) -> tuple[torch.Tensor, torch.Tensor, State]:
        """One time step of N envs: (distribution inputs [N, D], values [N], new state).
        ``params`` (state_dict names -> tensors) replaces the module's own weights, as in
        ActorCritic.forward."""
        inputs = [x[None] for x in self._core_inputs(obs, prev_actions, prev_rewards, params)]
        dist_inputs, values, state, _ = self._run(inputs, state, params)
        return dist_inputs[0], values[0], state

    def unroll(self, obs: torch.Tensor, state: State, prev_actions: torch.Tensor,
               prev_rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Sequences ``[L, S, ...]`` from initial states ``[S, state_size]``: (distribution
        inputs [L, S, D], values [L, S], the policy LSTM's outputs [L, S, cell]). Padding
        after a sequence's end cannot reach its steps (it comes later in time); the
        caller drops the padded rows."""
        inputs = self._core_inputs(obs, prev_actions, prev_rewards, None)
        dist_inputs, values, _, features = self._run(inputs, state, None)
        return dist_inputs, values, features

    def next_obs_loss(self, features: torch.Tensor, obs: torch.Tensor, actions: torch.Tensor,
                      mask: torch.Tensor) -> torch.Tensor:
        """The auxiliary loss of ``lstm_next_obs_loss`` (unweighted) over padded sequences
        ``[L, S]`` (``mask``: real steps): the mean squared error of the head's guess, from
        the LSTM's output and the action at t, of obs[t + 1] - obs[t], standardized per
        dimension. Pairs are consecutive real steps of one sequence, so of one episode."""
        pair = mask[:-1] & mask[1:]
        if pair.sum() < 2:  # too few pairs to standardize over
            return features.sum() * 0.0
        a = actions[:-1][pair]
        a = F.one_hot(a.long(), self.act_dim) if self.discrete_act else a
        delta = (obs[1:] - obs[:-1])[pair].to(features.dtype)
        target = (delta - delta.mean(0)) / (delta.std(0) + 1e-6)
        guess = self.next_obs(torch.cat([features[:-1][pair], a.to(features.dtype)], dim=-1))
        return F.mse_loss(guess, target)


class LSTMActor:
    """Acts for N envs with a RecurrentActorCritic, carrying each env's state: zeroed
    where a step starts an episode (``context.first``), so never across a reset. Its
    extras record, per step, the state it acted from (what a training sequence starting
    there replays from) and the previous action and reward it saw."""

    def __init__(self, model: RecurrentActorCritic, num_envs: int):
        self.model, self.state = model, model.initial_state(num_envs)

    def step(self, obs: torch.Tensor, context: Any) -> tuple[torch.Tensor, torch.Tensor, dict]:
        """(distribution inputs, values, extras) of one step of the envs ``context.envs``
        (all of them, or a half: sampling.DoubleBuffered); advances their state."""
        first = torch.as_tensor(context.first, device=obs.device)
        keep = (~first).to(self.state[0].dtype)[:, None]
        rows = context.rows
        h, c = self.state[0][rows] * keep, self.state[1][rows] * keep
        prev_a = _masked(context.prev_actions, first, obs.device)
        prev_r = _masked(context.prev_rewards, first, obs.device)
        dist_inputs, values, new = self.model.step(obs, (h, c), prev_a, prev_r)
        self.state = tuple(_rows_replaced(s, rows, x) for s, x in zip(self.state, new,
                                                                       strict=True))
        extras = {"first": first, "state_in": torch.stack([h, c], dim=1),
                  "prev_actions": prev_a, "prev_rewards": prev_r.float()}
        return dist_inputs, values, extras

    def act(self, obs: torch.Tensor, generator: torch.Generator | None, context: Any
            ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """Sampled actions and PPO's extras (sampling.Policy)."""
        dist_inputs, values, extras = self.step(obs, context)
        actions = self.model.sample(dist_inputs, generator)
        logp = self.model.dist.log_prob(dist_inputs, actions)
        return actions, {"logp": logp, "dist_inputs": dist_inputs, "values": values, **extras}

    def values(self, obs: torch.Tensor, context: Any) -> torch.Tensor:
        """V(obs) from the current state, without advancing it (the bootstrap value)."""
        saved = self.state
        _, values, _ = self.step(obs, context)
        self.state = saved
        return values

    def get_state(self) -> np.ndarray:
        return torch.stack(self.state, dim=1).cpu().numpy()  # [N, 2, state_size]

    def set_state(self, state: np.ndarray) -> None:
        device = self.state[0].device
        both = torch.as_tensor(state, device=device)
        self.state = (both[:, 0].contiguous(), both[:, 1].contiguous())


def _rows_replaced(state: torch.Tensor, rows: slice, new: torch.Tensor) -> torch.Tensor:
    """``state`` with ``rows`` replaced, as a new tensor (values() keeps the old one)."""
    if rows == slice(None):
        return new
    out = state.clone()
    out[rows] = new
    return out


LSTM_KEYS = ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")


def _lstm_steps(x: torch.Tensor, hx: State, weights: list[torch.Tensor]
                ) -> tuple[torch.Tensor, State]:
    """nn.LSTM's recurrence (gates i, f, g, o) over ``x [L, N, F]`` with weights passed in.
    nn.LSTM's kernel reads its weights' data pointers, which a policy store's views
    refuse (policy_cache.frozen_tensor); F.linear reads them as any op does."""
    w_ih, w_hh, b_ih, b_hh = weights
    h, c = hx[0][0], hx[1][0]
    outs = []
    for x_t in x:
        i, f, g, o = (F.linear(x_t, w_ih, b_ih) + F.linear(h, w_hh, b_hh)).chunk(4, dim=-1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        outs.append(h)
    return torch.stack(outs), (h[None], c[None])


def _masked(x: np.ndarray, first: torch.Tensor, device: torch.device) -> torch.Tensor:
    """The previous action or reward, zero where the step starts an episode."""
    t = torch.as_tensor(x, device=device)
    zero = torch.zeros((), dtype=t.dtype, device=device)
    return torch.where(first.view(-1, *[1] * (t.dim() - 1)), zero, t)


def actor_critic(obs_space: gym.Space, act_space: gym.Space, cfg: ModelConfig) -> ActorCritic:
    """PPO's network: recurrent when ``cfg.use_lstm``."""
    return (RecurrentActorCritic if cfg.use_lstm else ActorCritic)(obs_space, act_space, cfg)
