"""LeagueTrainer: one learning policy of a league (PPO with its own KL coefficient,
env steps and magnet), the same object in the driver and in a Ray learner.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import gymnasium as gym
import torch

from distrl.core.learner import Learner
from distrl.core.sampling import seed_for
from distrl.core.sequences import unroll_rows
from distrl.core.types import PPOBatch, Rollout, to_tensor
from distrl.league.config import LeagueConfig, Magnet
from distrl.league.terms import (
    LeagueRows,
    counterfactual_weights,
    magnet_term,
    reweighting_term,
    visit_weights,
)
from distrl.models.actor_critic import StateCritic
from distrl.models.distributions import mask_logits
from distrl.models.recurrent import actor_critic
from distrl.ppo.loss import LossTerm, ppo_update, update_kl_coeff


class LeagueTrainer:
    """One learning policy of a league: an ActorCritic on the shared Learner, its own
    adaptive KL coefficient and env steps (for its schedules). The same object trains in
    the driver (num_env_runners=0) and inside a Ray PolicyLearner."""

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, cfg: LeagueConfig,
                 device: torch.device | str = "cpu", magnet: Magnet | None = None,
                 seed: int = 0):
        self.obs_space, self.act_space, self.cfg = obs_space, act_space, cfg
        # A state critic replaces the policy's value head, which then trains no more.
        self.state_critic = cfg.state_critic
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

    def _state_critic(self, size: int, outcomes: int) -> Learner:
        if self.critic is None:
            with torch.random.fork_rng(devices=[]):
                torch.manual_seed(seed_for(self.seed, self.resets) + 1)
                critic = StateCritic(size, outcomes, self.cfg.model).to(self.device)
            self.critic = Learner(critic, self.cfg.lr_at(self.env_steps), self.cfg.grad_clip)
        return self.critic

    def update(self, rollout: Rollout, generator: torch.Generator | None = None
               ) -> dict[str, float]:
        """One PPO update (num_epochs of minibatches) on the rollout."""
        cfg = self.cfg
        self.env_steps += rollout.size
        self.learner.set_lr(cfg.lr_at(self.env_steps))
        critic = rollout.game is not None and rollout.game.critic_obs is not None
        if critic:
            rollout, critic_data = self._critic_advantages(rollout)
        batch = PPOBatch.from_rollout(rollout, self.device, cfg.advantage_stats())
        entropy_coeff = cfg.entropy_coeff_at(self.env_steps)
        terms = self._terms(rollout, batch, entropy_coeff)
        metrics = ppo_update(self.learner, batch, cfg, self.kl_coeff, entropy_coeff, generator,
                             terms=terms, value_loss=not self.state_critic)
        if cfg.use_kl_loss:
            self.kl_coeff = update_kl_coeff(self.kl_coeff, metrics["kl"], cfg.kl_target)
        if critic:
            metrics["critic_loss"] = self._fit_critic(*critic_data, rollout.size, generator)
        return metrics

    def _terms(self, rollout: Rollout, batch: PPOBatch, entropy_coeff: float
               ) -> list[LossTerm]:
        """The magnet's and the counterfactual weights' loss terms, with the rows they
        read put in ``batch.extra``."""
        rows, terms, dist = LeagueRows(), [], self.model.dist
        if self.magnet is not None:
            rows.magnet = self._magnet_inputs(batch)
            terms.append(magnet_term(dist, self.magnet_cfg.coeff))
        if self.magnet_cfg.counterfactual:
            if rollout.game is None or rollout.game.reach_logp is None:
                raise ValueError("Magnet.counterfactual needs rollouts with reach_logp (a "
                                 "MatchLoop with others_reach=True); these have none.")
            rows.pg_weights, rows.reg_weights = counterfactual_weights(rollout.game.reach_logp,
                                                                       self.device)
            if self.magnet_cfg.regulariser == "visits":
                rows.reg_weights = visit_weights(rollout.obs, self.device)
            terms.append(reweighting_term(dist, self.cfg.clip_param, entropy_coeff))
        batch.extra = rows if terms else None
        return terms

    def _critic_advantages(self, rollout: Rollout) -> tuple[Rollout, tuple[torch.Tensor, ...]]:
        """The rollout with the state critic's control-variate advantages
        (control_variate_returns), and its training data: every node's (state, choice,
        target, weight), each node once (GameRows.critic_weight)."""
        game = rollout.game
        obs = to_tensor(game.critic_obs, self.device)
        choice = to_tensor(game.critic_choice, self.device)
        live = choice >= 0
        critic = self._state_critic(obs.shape[-1], game.critic_probs.shape[-1])
        q = torch.zeros(*choice.shape, game.critic_probs.shape[-1], device=self.device)
        with torch.no_grad():
            q[live] = critic.model(obs[live])
        targets, baseline = control_variate_returns(
            q, to_tensor(game.critic_probs, self.device), choice,
            to_tensor(game.critic_rewards, self.device))
        adv = (targets[:, 0] - baseline).cpu().numpy()
        out = dataclasses.replace(rollout, advantages=adv, value_targets=adv + rollout.values)
        fit = to_tensor(game.critic_weight, self.device) > 0
        weight = to_tensor(game.critic_weight, self.device)[fit]
        return out, (obs[fit], choice[fit], targets[fit], weight)

    def _fit_critic(self, states: torch.Tensor, choice: torch.Tensor, targets: torch.Tensor,
                    weight: torch.Tensor, rows: int, generator: torch.Generator | None
                    ) -> float:
        """num_epochs of minibatch regression of the chosen moves' values on their
        targets, each node weighted by how many rows hold it, as many steps as the
        policy's; mean loss."""
        critic, cfg = self.critic, self.cfg
        critic.set_lr(cfg.lr_at(self.env_steps))
        parts = -(-rows // cfg.minibatch_size)
        total = torch.zeros((), device=self.device)  # one device sync at the end, not per step
        for _ in range(cfg.num_epochs):
            for idx in torch.tensor_split(torch.randperm(len(states), generator=generator), parts):
                value = critic.model(states[idx]).gather(1, choice[idx, None]).squeeze(1)
                w = weight[idx]
                loss = (w * (value - targets[idx]).pow(2)).sum() / w.sum()
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
                out, _, rows, _ = unroll_rows(self.magnet, batch)
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
            shapes = [w.shape for k, w in state["critic"]["model"].items() if k.endswith("weight")]
            size, outcomes = shapes[0][1], shapes[-1][0]
            self._state_critic(size, outcomes).set_state(state["critic"])


def control_variate_returns(q: torch.Tensor, probs: torch.Tensor, choice: torch.Tensor,
                            rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each node's estimate of its chosen move's value, and the row's first node's baseline,
    from [B, L] nodes per row (the rest of a step's game, -1 choices past its end), the
    critic's values q [B, L, K] of every move or outcome there, and the mover's (or
    chance's) distributions probs [B, L, K]. Backwards from the end, with
    V(n) = sum_a probs(a) q(n, a):

        target(n) = reward(n) + u(n+1),  u(n) = V(n) + target(n) - q(n, choice(n)),

    u = 0 past the end. Each u(n) - V(n) adds a term of mean zero at every later node
    (the others' and chance's moves, the seat's own later ones), so target(n) is an
    unbiased estimate of the chosen move's value whatever q is (VR-MCCFR's baseline,
    Schmid et al. 2019), and of low variance where q is right; the Monte Carlo return is
    the case q = 0. The row's advantage is target(first) - V(first): a baseline that
    may see hidden cards, since it does not depend on the move."""
    live = choice >= 0
    values = (probs * q).sum(-1)
    chosen = q.gather(-1, choice.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    targets = torch.zeros_like(rewards)
    u = torch.zeros_like(rewards[:, 0])
    for n in range(choice.shape[1] - 1, -1, -1):
        targets[:, n] = torch.where(live[:, n], rewards[:, n] + u, 0.0)
        u = torch.where(live[:, n], values[:, n] + targets[:, n] - chosen[:, n], 0.0)
    return targets, values[:, 0]
