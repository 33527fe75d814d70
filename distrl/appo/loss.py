"""APPO's maths: a train batch from lagging fragments. The learner's own weights value
every sampled step and re-score its action; V-trace (core.returns.vtrace) turns the
importance ratios into off-policy value targets and policy-gradient advantages; PPO's
clipped surrogate (ppo.loss.ppo_update) then trains on them. The gradient on log pi
carries one importance weight: with clip_around="learner" (the default) the advantage
carries IMPALA's min(rho_bar, pi / mu) and the surrogate's ratio is to the learner's own
policy before the update (1 at its first step: RLlib's APPO with its target network
refreshed every batch, decoupled PPO); with "sampler" the ratio pi / mu is the weight,
clipped by PPO, and the advantage carries none. Reward scaling is the learner's too:
runners send raw rewards, so a lagging runner never scales with statistics older than
the learner's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from distrl.appo.config import APPOConfig
from distrl.core.returns import vtrace
from distrl.core.types import Fragment, PPOBatch, Rollout, to_tensor
from distrl.ppo.env_runner import scale_rewards


@dataclass
class LearnerView:
    """A fragment as the learner's weights see it, before its update."""

    logp: np.ndarray  # [T, N]: log-probs of the taken actions
    dist_inputs: np.ndarray  # [T, N, D]: the action distributions' inputs
    values: np.ndarray  # [T + 1, N]: values of the observations and the last next_obs


@torch.no_grad()
def learner_view(model: torch.nn.Module, frag: Fragment, device: torch.device) -> LearnerView:
    T, N = frag.rewards.shape
    obs = to_tensor(np.concatenate([frag.obs.reshape(T * N, *frag.obs.shape[2:]),
                                    frag.next_obs]), device)
    dist_inputs, values = model(obs)
    actions = to_tensor(frag.actions.reshape(T * N, *frag.actions.shape[2:]), device)
    logp = model.dist.log_prob(dist_inputs[: T * N], actions)
    return LearnerView(logp.cpu().numpy().reshape(T, N),
                       dist_inputs[: T * N].cpu().numpy().reshape(T, N, -1),
                       values.cpu().numpy().reshape(T + 1, N))


def vtrace_rollout(model: torch.nn.Module, frag: Fragment, cfg: APPOConfig,
                   device: torch.device, reward_std: float = 1.0) -> Rollout:
    """One fragment's valid rows with V-trace advantages and value targets (rewards
    scaled by ``reward_std`` with normalize_rewards)."""
    view = learner_view(model, frag, device)
    rewards = scale_rewards(frag.rewards, reward_std) if cfg.normalize_rewards else frag.rewards
    learner = cfg.clip_around == "learner"
    # One importance weight on log pi: V-trace's in the advantage, or the ratio's to mu.
    targets, advantages = vtrace(
        rewards, view.values, frag.terminated, frag.truncated, view.logp - frag.logp,
        cfg.gamma, cfg.lambda_, cfg.vtrace_clip_rho, cfg.vtrace_clip_c,
        cfg.vtrace_clip_pg_rho if learner else None)
    v = frag.valid
    base = view if learner else frag  # the surrogate's denominator
    return Rollout(obs=frag.obs[v], actions=frag.actions[v],
                   logp=base.logp[v].astype(np.float32),
                   dist_inputs=base.dist_inputs[v], values=view.values[:-1][v],
                   advantages=advantages[v].astype(np.float32),
                   value_targets=targets[v].astype(np.float32),
                   episode_returns=frag.episode_returns, episode_lengths=frag.episode_lengths,
                   env_steps=frag.env_steps, weights_version=frag.weights_version,
                   stats=frag.stats)


def train_batch(model: torch.nn.Module, fragments: list[Fragment], cfg: APPOConfig,
                device: torch.device, reward_std: float = 1.0) -> tuple[PPOBatch, Rollout]:
    """The learner's batch from fragments (and their rows, for episode counts and the
    filters' statistics)."""
    rollout = Rollout.concat([vtrace_rollout(model, f, cfg, device, reward_std)
                              for f in fragments])
    return PPOBatch.from_rollout(rollout, device, cfg.advantage_stats()), rollout
