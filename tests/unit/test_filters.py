"""Observation normalization and reward scaling: statistics merge, discounted returns,
the network's normalizing buffers."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import ModelConfig
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
