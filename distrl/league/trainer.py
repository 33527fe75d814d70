"""PolicyTrainer: one learning policy of a league (PPO with its own KL coefficient,
env steps and magnet), the same object in the driver and in a Ray learner.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import torch

from distrl.core.learner import Learner
from distrl.core.sampling import seed_for
from distrl.core.sequences import unroll_rows
from distrl.core.types import PPOBatch, Rollout
from distrl.league.config import Magnet
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

    def update(self, rollout: Rollout, generator: torch.Generator | None = None
               ) -> dict[str, float]:
        """One PPO update (num_epochs of minibatches) on the rollout."""
        cfg = self.cfg
        self.env_steps += rollout.size
        self.learner.set_lr(cfg.lr_at(self.env_steps))
        batch = PPOBatch.from_rollout(rollout, self.device)
        if self.magnet is not None:
            batch.magnet_dist_inputs = self._magnet_inputs(batch)
        metrics = ppo_update(self.learner, batch, cfg, self.kl_coeff,
                             cfg.entropy_coeff_at(self.env_steps), generator,
                             magnet_coeff=self.magnet_cfg.coeff)
        if cfg.use_kl_loss:
            self.kl_coeff = update_kl_coeff(self.kl_coeff, metrics["kl"], cfg.kl_target)
        return metrics

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
        return {**self.learner.get_state(), "kl_coeff": self.kl_coeff,
                "env_steps": self.env_steps, "magnet": magnet, "magnet_at": self.magnet_at,
                "magnet_updates": self.magnet_updates, "resets": self.resets}

    def set_state(self, state: dict[str, Any]) -> None:
        self.learner.set_state(state)
        self.kl_coeff, self.env_steps = float(state["kl_coeff"]), int(state["env_steps"])
        self.resets = int(state.get("resets", self.resets))  # absent before this was saved
        if self.magnet is not None:
            self.magnet.load_state_dict(state["magnet"])
            self.magnet_at = int(state["magnet_at"])
            # Absent when a Ray learner restarts before its first checkpoint: phases start over.
            self.magnet_updates = int(state.get("magnet_updates", 0))

