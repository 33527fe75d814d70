"""PPO's recompute_advantages: GAE recomputed from a sample's kept steps under the
learner's current value function, before each epoch after the first."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from distrl.core.learner import Learner
from distrl.core.types import PPOBatch, Rollout
from distrl.models.config import ModelConfig
from distrl.ppo.config import PPOConfig
from distrl.ppo.env_runner import EnvRunner
from distrl.ppo.loss import (
    explained_variance,
    ppo_update,
    recomputed_gae,
    with_recomputed_gae,
)


def runner(seed: int) -> EnvRunner:
    # Episodes cut at 12 steps and a random early policy: the sample holds truncations,
    # terminations and reset rows, so the kept rows are not simply the first ones.
    return EnvRunner("CartPole-v1", num_envs=3, model=ModelConfig(hiddens=(8,)), gamma=0.9,
                     lambda_=0.8, seed=seed, normalize_rewards=True, max_episode_steps=12,
                     keep_steps=True)


def test_recomputed_gae_under_the_sampling_weights_is_the_runners_gae():
    a, b = runner(0), runner(1)
    parts = [a.sample(40, reward_std=2.0), b.sample(40, reward_std=2.0)]
    steps = parts[0].steps[0]
    assert steps.truncated.any() and steps.terminated.any()
    assert len(steps.kept) == 120 < steps.rewards.size  # reset rows were left out
    b.model.load_state_dict(a.model.state_dict())  # one value function for both parts
    parts[1] = b.sample(40, reward_std=2.0)
    rollout = Rollout.concat(parts)
    values, adv, targets = recomputed_gae(a.model, rollout.steps, 0.9, 0.8)
    np.testing.assert_allclose(values, rollout.values, rtol=0, atol=1e-6)
    np.testing.assert_allclose(adv, rollout.advantages, rtol=0, atol=1e-5)
    np.testing.assert_allclose(targets, rollout.value_targets, rtol=0, atol=1e-5)


@pytest.mark.parametrize("use_gae", [True, False])
def test_the_refreshed_batch_takes_gamma_and_lambda_from_the_config(use_gae):
    """Under the sampling weights, with_recomputed_gae gives back the runner's GAE: the
    config's gamma, and its GAE lambda (1 with use_gae=False), each in its place."""
    r = EnvRunner("CartPole-v1", num_envs=3, model=ModelConfig(hiddens=(8,)), gamma=0.9,
                  lambda_=0.8 if use_gae else 1.0, seed=0, max_episode_steps=12,
                  keep_steps=True)
    rollout = r.sample(40)
    cfg = PPOConfig(num_env_runners=0, num_envs_per_env_runner=3, train_batch_size=120,
                    minibatch_size=60, gamma=0.9, lambda_=0.8, use_gae=use_gae,
                    advantage_normalization="none")
    batch = PPOBatch.from_rollout(rollout, "cpu", cfg.advantage_stats())
    fresh = with_recomputed_gae(batch, r.model, rollout.steps, cfg)
    np.testing.assert_allclose(fresh.advantages.numpy(), rollout.advantages, atol=1e-5)
    np.testing.assert_allclose(fresh.value_targets.numpy(), rollout.value_targets, atol=1e-5)


def test_a_rollout_without_steps_does_not_concatenate_with_one_that_has_them():
    with_steps = runner(0).sample(4)
    without = replace(with_steps, steps=None)
    with pytest.raises(ValueError, match="with and without their steps"):
        Rollout.concat([with_steps, without])


def test_each_epoch_after_the_first_trains_on_the_refreshed_batch():
    rollout = runner(0).sample(16)
    cfg = PPOConfig(num_env_runners=0, num_envs_per_env_runner=3, train_batch_size=48,
                    minibatch_size=48, num_epochs=3, use_kl_loss=False)
    calls = []

    def refresh(b: PPOBatch) -> PPOBatch:
        # No advantage: the later epochs' policy loss is 0. Values on target: the
        # explained variance, taken from the batch trained last, is 1.
        calls.append(1)
        return replace(b, advantages=torch.zeros_like(b.advantages), values=b.value_targets)

    def update(epochs: int, refresh=None) -> dict:
        torch.manual_seed(0)  # the same initial network for both updates
        model = runner(0).model.requires_grad_(True)
        batch = PPOBatch.from_rollout(rollout)
        return ppo_update(Learner(model, 1e-3), batch, replace(cfg, num_epochs=epochs), 0.0,
                          0.0, torch.Generator().manual_seed(0), refresh=refresh)

    one, three = update(1), update(3, refresh)
    assert len(calls) == 2
    assert three["policy_loss"] == pytest.approx(one["policy_loss"] / 3, abs=1e-7)
    assert one["policy_loss"] != 0.0
    assert three["explained_variance"] == 1.0
    assert one["explained_variance"] == pytest.approx(
        explained_variance(torch.as_tensor(rollout.values),
                           torch.as_tensor(rollout.value_targets)))


def test_recompute_advantages_is_refused_where_it_cannot_apply():
    from distrl.appo.config import APPOConfig

    with pytest.raises(ValueError, match="recompute_advantages takes feed-forward"):
        PPOConfig(recompute_advantages=True, model=ModelConfig(use_lstm=True))
    with pytest.raises(ValueError, match="recompute_advantages is PPO's knob"):
        APPOConfig(recompute_advantages=True)
