"""EnvPool envs behind the vector interface the samplers use: NEXT_STEP resets,
uint8 Atari frames end to end, clipped rewards with the game's score reported."""

import numpy as np
import pytest
import torch

pytest.importorskip("envpool")

from distrl.core.envpool_vec import EnvPoolVector
from distrl.core.envs import make_vec_env
from distrl.core.sampling import EnvLoop


class Left:
    """Always action 0 (CartPole falls within ~10 steps)."""

    def act(self, obs, generator, context):
        return torch.zeros(obs.shape[0], dtype=torch.int64), {}


def test_an_envpool_cartpole_ends_and_resets_as_gymnasiums_does():
    pool = make_vec_env("envpool:CartPole-v1", 3)
    gym_vec = make_vec_env("CartPole-v1", 3)
    assert pool.single_observation_space.shape == gym_vec.single_observation_space.shape
    loop = EnvLoop("envpool:CartPole-v1", 3, seed=0)
    traj = loop.collect(Left(), 30, None)
    ends = traj.terminated | traj.truncated
    assert ends.any()
    t, i = np.argwhere(ends)[0]
    assert not traj.valid[t + 1, i]  # the step after an end is the reset
    assert traj.valid[t + 2, i] and traj.rewards[t + 1, i] == 0.0
    # Each finished episode's return is its number of steps (reward 1 per step).
    np.testing.assert_array_equal(traj.episode_returns, traj.episode_lengths)


def test_pong_frames_stay_uint8_from_the_pool_to_the_batch():
    loop = EnvLoop("envpool:Pong-v5", 2, seed=0)
    traj = loop.collect(Left(), 4, None)
    assert traj.obs.dtype == np.uint8 and traj.obs.shape == (4, 2, 4, 84, 84)


class FakePool:
    """Rewards 3 then -2 then 0 in one env; the episode ends at the second step."""

    def __init__(self):
        self.t = 0

    def step(self, actions):
        rewards = [np.array([3.0]), np.array([-2.0]), np.array([0.0])][self.t]
        done = np.array([self.t == 1])
        self.t += 1
        return np.zeros((1, 4, 84, 84), np.uint8), rewards, done, np.array([False]), {}


def test_atari_rewards_are_clipped_and_the_score_reported():
    vec = EnvPoolVector("envpool:Pong-v5", 1)
    vec.pool.close()
    vec.pool = FakePool()
    _, r1, *_ = vec.step(np.zeros(1))
    _, r2, _, _, info = vec.step(np.zeros(1))
    assert (r1[0], r2[0]) == (1.0, -1.0)
    assert info["_episode"][0] and info["episode"]["r"][0] == 1.0  # 3 - 2, unclipped
    _, r3, _, _, info = vec.step(np.zeros(1))  # the reset step starts a new score
    assert r3[0] == 0.0 and info["episode"]["r"][0] == 0.0


def test_an_unknown_task_is_one_line_naming_how_to_list_them():
    with pytest.raises(ValueError, match=r"EnvPool has no task 'Pongg-v5'.*list_all_envs"):
        make_vec_env("envpool:Pongg-v5", 1)
