"""APPO's maths: a train batch from lagging fragments. The learner's own weights value
every sampled step and re-score its action; V-trace (core.returns.vtrace) turns the
importance ratios into off-policy value targets and policy-gradient advantages; PPO's
clipped surrogate (ppo.loss.ppo_update) then trains on them, with the sampling policy's
log-probs as the ratio's denominator (RLlib's APPO, Sample Factory). Reward scaling is
the learner's too: runners send raw rewards, so a lagging runner never scales with
statistics older than the learner's.
"""

from __future__ import annotations

import numpy as np
import torch

from distrl.appo.config import APPOConfig
from distrl.core.returns import vtrace
from distrl.core.types import Fragment, PPOBatch, Rollout, to_tensor
from distrl.ppo.env_runner import scale_rewards


@torch.no_grad()
def learner_view(model: torch.nn.Module, frag: Fragment, device: torch.device
                 ) -> tuple[np.ndarray, np.ndarray]:
    """(log-probs of the taken actions [T, N], values [T + 1, N]) under ``model``."""
    T, N = frag.rewards.shape
    obs = to_tensor(np.concatenate([frag.obs.reshape(T * N, *frag.obs.shape[2:]),
                                    frag.next_obs]), device)
    dist_inputs, values = model(obs)
    actions = to_tensor(frag.actions.reshape(T * N, *frag.actions.shape[2:]), device)
    logp = model.dist.log_prob(dist_inputs[: T * N], actions)
    return logp.cpu().numpy().reshape(T, N), values.cpu().numpy().reshape(T + 1, N)


def vtrace_rollout(model: torch.nn.Module, frag: Fragment, cfg: APPOConfig,
                   device: torch.device, reward_std: float = 1.0) -> Rollout:
    """One fragment's valid rows with V-trace advantages and value targets (rewards
    scaled by ``reward_std`` with normalize_rewards)."""
    logp, values = learner_view(model, frag, device)
    rewards = scale_rewards(frag.rewards, reward_std) if cfg.normalize_rewards else frag.rewards
    targets, advantages = vtrace(
        rewards, values, frag.terminated, frag.truncated, logp - frag.logp, cfg.gamma,
        cfg.lambda_, cfg.vtrace_clip_rho, cfg.vtrace_clip_c, cfg.vtrace_clip_pg_rho)
    v = frag.valid
    return Rollout(obs=frag.obs[v], actions=frag.actions[v], logp=frag.logp[v],
                   dist_inputs=frag.dist_inputs[v], values=values[:-1][v],
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
