"""Observation normalization and reward scaling: statistics merge, life cycle through
the in-process PPO loop, checkpoints and evaluation."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import ModelConfig, PPOConfig, RunConfig, train_ppo
from distrl.core.checkpoint import Checkpoint
from distrl.core.evaluation import load_policy
from distrl.models.actor_critic import OBS_CLIP, ActorCritic
from distrl.models.filters import RunningStats, discounted_returns


def test_merged_runner_statistics_equal_those_of_the_concatenated_samples():
    rng = np.random.default_rng(0)
    parts = [rng.normal(loc=i, scale=i + 1, size=(n, 3)) for i, n in enumerate((5, 40, 1, 17))]
    merged = RunningStats.zeros((3,))
    for p in parts:
        merged = merged.merge(RunningStats.of(p))
    everything = np.concatenate(parts)
    assert merged.count == len(everything)
    assert np.allclose(merged.mean, everything.mean(0))
    assert np.allclose(merged.var, everything.var(0))


def test_discounted_returns_reset_after_episode_ends_and_carry_across_fragments():
    rewards = np.array([[1.0], [2.0], [3.0]])
    dones = np.array([[False], [True], [False]])
    returns, carry = discounted_returns(rewards, dones, np.array([10.0]), 0.5)
    assert returns[:, 0].tolist() == [0.5 * 10 + 1, 0.5 * 6 + 2, 3.0]
    assert carry.tolist() == [3.0]


def test_the_network_normalizes_with_its_buffers_and_clips():
    space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    filtered = ModelConfig(observation_filter="MeanStdFilter")
    net = ActorCritic(space, gym.spaces.Discrete(2), filtered)
    plain = ActorCritic(space, gym.spaces.Discrete(2), ModelConfig())
    plain.load_state_dict({k: v for k, v in net.state_dict().items() if not k.startswith("obs_")})
    obs = torch.tensor([[3.0, -1.0], [1e6, 0.0]])
    net.update_obs_filter(RunningStats.of(np.array([[1.0, 0.0], [3.0, 0.0]])))  # mean 2, var 1 / 0
    expected = torch.stack([(obs[:, 0] - 2.0) / 1.0, obs[:, 1] / 1e-4]).T.clamp(-OBS_CLIP, OBS_CLIP)
    for a, b in zip(net(obs), plain(expected), strict=True):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="flat Box"):
        ActorCritic(gym.spaces.Discrete(3), gym.spaces.Discrete(2),
                    ModelConfig(observation_filter="MeanStdFilter"))


def test_ppo_filter_life_cycle_checkpoint_and_eval(tmp_path):
    torch.set_num_threads(1)
    config = PPOConfig(num_env_runners=0, num_envs_per_env_runner=4, train_batch_size=256,
                       minibatch_size=128, num_epochs=1, normalize_rewards=True,
                       model=ModelConfig(observation_filter="MeanStdFilter"))
    result = train_ppo(config, RunConfig(env="Pendulum-v1", max_env_steps=1_024,
                                         logdir=str(tmp_path), progress=False))
    # Pendulum's rewards are ~-1..-16 per step: scaled ones would give returns near -10.
    assert result["env/episode_return_mean"] < -300
    assert result["learner/reward_std"] > 1.0
    ckpt = Checkpoint(result["checkpoint"])
    weights = ckpt.tensors("policy", "weights.pt")  # weights_only=True
    assert float(weights["obs_count"]) == 1_024  # 4 iterations x 256 valid samples
    assert weights["obs_mean"].abs().sum() > 0
    model = load_policy(ckpt)
    assert model.filtered and torch.equal(model.obs_mean, weights["obs_mean"])
    # Evaluation acts through the same normalization: outputs change with the stats.
    obs = torch.tensor([[0.5, -0.5, 2.0]])
    before = model(obs)[0]
    model.update_obs_filter(RunningStats.of(np.full((1000, 3), 5.0)))
    assert not torch.allclose(before, model(obs)[0])
    saved = ckpt.json("progress", "progress.json")["algo"]["returns"]
    assert saved["count"] == 1_024
