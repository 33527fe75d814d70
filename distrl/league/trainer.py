"""PolicyTrainer: one learning policy of a league (PPO with its own KL coefficient,
env steps and magnet), the same object in the driver and in a Ray learner.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from distrl.core.learner import Learner
from distrl.core.returns import gae
from distrl.core.sampling import seed_for
from distrl.core.sequences import unroll_rows
from distrl.core.types import PPOBatch, Rollout
from distrl.league.config import Magnet
from distrl.models.actor_critic import StateCritic
from distrl.models.distributions import mask_logits
from distrl.models.recurrent import actor_critic
from distrl.ppo.config import PPOHyperparams
from distrl.ppo.loss import ppo_update, update_kl_coeff


class PolicyTrainer:
    """One learning policy of a league: an ActorCritic on the shared Learner, its own
    adaptive KL coefficient and env steps (for its schedules). The same object trains in
    the driver (num_env_runners=0) and inside a Ray PolicyLearner."""

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: PPOHyperparams,
                 device: torch.device | str = "cpu", magnet: Magnet | None = None,
                 seed: int = 0):
        self.obs_space, self.act_space, self.cfg = obs_space, act_space, cfg
        # A state critic replaces the policy's value head, which then trains no more.
        self.ppo_cfg = (dataclasses.replace(cfg, vf_loss_coeff=0.0) if cfg.model.state_critic
                        else cfg)
        self.seed, self.resets = seed, 0
        self.magnet_cfg = magnet or Magnet()  # off
        self.device = torch.device(device)
        self.env_steps = 0
        self.reset()

    def reset(self) -> None:
        """Fresh weights, optimizer, KL coefficient and magnet; env steps keep counting.
        The weights come from the trainer's seed and reset count, not the process's RNG,
        so a resumed or restarted trainer resets to the weights an uninterrupted one would."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed_for(self.seed, self.resets))
            model = actor_critic(self.obs_space, self.act_space, self.cfg.model)
        self.resets += 1
        self.model = model.to(self.device)
        self.learner = Learner(self.model, self.cfg.lr_at(self.env_steps), self.cfg.grad_clip)
        self.kl_coeff = self.cfg.kl_coeff
        self.magnet = copy.deepcopy(self.model) if self.magnet_cfg.coeff > 0 else None
        self.magnet_at, self.magnet_updates = self.env_steps, 0
        self.critic: Learner | None = None  # state_critic: made at the first batch's size

    def _state_critic(self, size: int) -> Learner:
        if self.critic is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed_for(self.seed, self.resets) + 1)
                critic = StateCritic(size, self.cfg.model).to(self.device)
            self.critic = Learner(critic, self.cfg.lr_at(self.env_steps), self.cfg.grad_clip)
        return self.critic

    def update(self, rollout: Rollout, generator: torch.Generator | None = None
               ) -> dict[str, float]:
        """One PPO update (num_epochs of minibatches) on the rollout."""
        cfg = self.cfg
        self.env_steps += rollout.size
        self.learner.set_lr(cfg.lr_at(self.env_steps))
        if rollout.critic_obs is not None:
            rollout, critic_targets = self._critic_advantages(rollout)
        batch = PPOBatch.from_rollout(rollout, self.device, cfg.advantage_stats())
        if self.magnet is not None:
            batch.magnet_dist_inputs = self._magnet_inputs(batch)
        if self.magnet_cfg.counterfactual:
            if rollout.reach_logp is None:
                raise ValueError("Magnet.counterfactual needs rollouts with reach_logp (a "
                                 "MatchLoop with others_reach=True); these have none.")
            batch.pg_weights, batch.reg_weights = counterfactual_weights(rollout.reach_logp,
                                                                         self.device)
        metrics = ppo_update(self.learner, batch, self.ppo_cfg, self.kl_coeff,
                             cfg.entropy_coeff_at(self.env_steps), generator,
                             magnet_coeff=self.magnet_cfg.coeff)
        if cfg.use_kl_loss:
            self.kl_coeff = update_kl_coeff(self.kl_coeff, metrics["kl"], cfg.kl_target)
        if rollout.critic_obs is not None:
            metrics["critic_loss"] = self._fit_critic(*critic_targets, generator)
        return metrics

    def _critic_advantages(self, rollout: Rollout
                           ) -> tuple[Rollout, tuple[torch.Tensor, torch.Tensor]]:
        """The rollout with GAE advantages from the state critic over its nodes (two per
        step: the state the seat acted in, the one after its action; league.matches),
        and the critic's (states, value targets) at every node there is."""
        steps, size = rollout.critic_obs.shape[0], rollout.critic_obs.shape[-1]
        states = torch.as_tensor(rollout.critic_obs.reshape(2 * steps, size), device=self.device)
        ends = rollout.critic_ends.reshape(-1)
        with torch.no_grad():
            values = self._state_critic(size).model(states).cpu().numpy()
        flat_adv, flat_targets = node_advantages(values, rollout.critic_rewards.reshape(-1),
                                                 ends, self.cfg.gamma, self.cfg.gae_lambda)
        live = torch.as_tensor(ends != 2, device=self.device)
        out = dataclasses.replace(rollout, advantages=flat_adv[0::2],
                                  value_targets=flat_targets[0::2])
        return out, (states[live], torch.as_tensor(flat_targets, device=self.device)[live])

    def _fit_critic(self, states: torch.Tensor, targets: torch.Tensor,
                    generator: torch.Generator | None) -> float:
        """num_epochs of minibatch regression on the batch's node values; mean loss."""
        critic, cfg = self.critic, self.cfg
        critic.set_lr(cfg.lr_at(self.env_steps))
        parts = -(-len(states) // (2 * cfg.minibatch_size))  # two nodes per step
        total = torch.zeros((), device=self.device)  # one device sync at the end, not per step
        for _ in range(cfg.num_epochs):
            for idx in torch.tensor_split(torch.randperm(len(states), generator=generator), parts):
                loss = (critic.model(states[idx]) - targets[idx]).pow(2).mean()
                critic.step(loss, len(idx))
                total += loss.detach()
        return float(total) / (cfg.num_epochs * parts)

    def _magnet_inputs(self, batch: PPOBatch) -> torch.Tensor:
        """The magnet's masked logits on the batch, after moving it to the policy when due."""
        every = self.magnet_cfg.phase_steps(self.magnet_updates)
        if every and self.env_steps - self.magnet_at >= every:
            self.magnet.load_state_dict(self.model.state_dict())
            self.magnet_at, self.magnet_updates = self.env_steps, self.magnet_updates + 1
        with torch.no_grad():
            if batch.sequences is None:
                logits = self.magnet(batch.obs, value=False)[0]
            else:  # a recurrent magnet replays the batch's sequences (rows come reordered)
                out, _, rows = unroll_rows(self.magnet, batch)
                logits = torch.empty_like(out).index_copy_(0, rows, out)
            return mask_logits(logits, batch.action_mask)

    def get_state(self) -> dict[str, Any]:
        magnet = None if self.magnet is None else self.magnet.state_dict()
        critic = None if self.critic is None else self.critic.get_state()
        return {**self.learner.get_state(), "kl_coeff": self.kl_coeff,
                "env_steps": self.env_steps, "magnet": magnet, "magnet_at": self.magnet_at,
                "magnet_updates": self.magnet_updates, "resets": self.resets,
                "critic": critic}

    def set_state(self, state: dict[str, Any]) -> None:
        self.learner.set_state(state)
        self.kl_coeff, self.env_steps = float(state["kl_coeff"]), int(state["env_steps"])
        self.resets = int(state.get("resets", self.resets))  # absent before this was saved
        if self.magnet is not None:
            self.magnet.load_state_dict(state["magnet"])
            self.magnet_at = int(state["magnet_at"])
            # Absent when a Ray learner restarts before its first checkpoint: phases start over.
            self.magnet_updates = int(state.get("magnet_updates", 0))
        if state.get("critic") is not None:
            size = state["critic"]["model"]["layers.0.weight"].shape[1]
            self._state_critic(size).set_state(state["critic"])


def counterfactual_weights(reach_logp: np.ndarray, device: torch.device
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Magnet.counterfactual's row weights from [B, 2] (own, others') log-probabilities
    of the game so far: 1 / own and 1 / (own x others), each over its mean."""
    def inverse(logp: np.ndarray) -> torch.Tensor:
        w = np.exp(logp.max() - logp)  # scaled by the largest probability: no overflow
        return torch.as_tensor(w / w.mean(), dtype=torch.float32, device=device)
    x = reach_logp.astype(np.float64)
    return inverse(x[:, 0]), inverse(x.sum(1))


def node_advantages(values: np.ndarray, rewards: np.ndarray, ends: np.ndarray, gamma: float,
                    lambda_: float) -> tuple[np.ndarray, np.ndarray]:
    """GAE over a state critic's nodes, flat [2B] in Rollout.critic_* order (a step's
    node, then its after-node; each seat's steps contiguous, its last after-node's end
    non-zero): (advantages, value targets) per node, 0 at nodes that are not there
    (end 2). The discount applies once per step, between an after-node and the next
    step, so a step's advantage sees the other players' moves as gamma = 1 would."""
    # One column per seat, padded with ended nodes, so GAE's scan runs over a seat's
    # length (a few steps in a card game) and not over the batch.
    last = np.flatnonzero(ends[1::2] != 0)
    starts = np.concatenate([[0], last[:-1] + 1])
    lengths = 2 * (last + 1 - starts)
    rows = np.arange(lengths.max())[:, None]
    idx = np.where(rows < lengths[None, :], 2 * starts[None, :] + rows, 0)
    valid = (rows < lengths[None, :]) & (ends[idx] != 2)  # a missing node is a seat's last
    column_values = np.where(valid, values[idx], 0.0).astype(np.float32)
    adv, targets = gae(np.where(valid, rewards[idx], 0.0),
                       np.vstack([column_values, np.zeros_like(column_values[:1])]),
                       np.where(valid, ends[idx] >= 1, True), np.zeros(valid.shape, bool),
                       np.where(rows % 2 == 1, gamma, 1.0) * np.ones(valid.shape), lambda_)
    flat_adv, flat_targets = np.zeros(len(values), np.float32), np.zeros(len(values), np.float32)
    flat_adv[idx[valid]], flat_targets[idx[valid]] = adv[valid], targets[valid]
    return flat_adv, flat_targets
