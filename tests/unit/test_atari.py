"""Atari: DeepMind preprocessing, clipped rewards for learning but the game's score as
the episode return, uint8 frames end to end, a missing extra named."""

import subprocess
import sys

import gymnasium as gym
import numpy as np
import torch

from distrl.core.sampling import EnvLoop
from distrl.envs.make import clip_rewards_keep_score, make_atari, make_vec_env

torch.set_num_threads(1)


class ScoredEnv(gym.Env):
    """Rewards 5, 0, -7 in 3-step episodes (score -2); frames are uint8."""

    observation_space = gym.spaces.Box(0, 255, (2, 2), np.uint8)
    action_space = gym.spaces.Discrete(2)
    REWARDS = (5.0, 0.0, -7.0)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros((2, 2), np.uint8), {}

    def step(self, action):
        self.t += 1
        obs = np.full((2, 2), 200 + self.t, np.uint8)
        return obs, self.REWARDS[self.t - 1], self.t == 3, False, {}


class First:
    def act(self, obs, generator, context=None):
        return torch.zeros(obs.shape[0], dtype=torch.int64), {}


def test_learning_sees_clipped_rewards_while_episode_returns_are_the_game_score():
    loop = EnvLoop(lambda: clip_rewards_keep_score(ScoredEnv()), 2, seed=0)
    traj = loop.collect(First(), 7, None)
    np.testing.assert_array_equal(traj.rewards[traj.valid].reshape(-1, 2)[:3], [
        [1.0, 1.0], [0.0, 0.0], [-1.0, -1.0]])
    assert traj.episode_returns.tolist() == [-2.0] * 4  # not the clipped sum 0
    assert traj.obs.dtype == np.uint8 and traj.next_obs.dtype == np.uint8
    assert traj.obs.max() == 203  # no float round trip, no scaling


def test_make_atari_is_deepminds_preprocessing():
    env = make_atari("ALE/Pong-v5")
    assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
    wrappers, inner = {}, env
    while isinstance(inner, gym.Wrapper):
        wrappers[type(inner).__name__], inner = inner, inner.env
    pre = wrappers["AtariPreprocessing"]
    assert (pre.noop_max, pre.frame_skip, pre.screen_size, pre.grayscale_obs) == (
        30, 4, (84, 84), True)
    assert wrappers["FrameStackObservation"].stack_size == 4
    assert inner._frameskip == 1  # the preprocessing skips (and max-pools) frames
    assert inner.ale.getFloat("repeat_action_probability") == 0.25  # v5's sticky actions
    assert {"TransformReward", "RecordEpisodeStatistics"} <= set(wrappers)
    env.close()
    plain = make_atari("ALE/Pong-v5", clip_rewards=False)
    assert not isinstance(plain, gym.wrappers.TransformReward)  # evaluation's real score
    plain.close()
    vec = make_vec_env("ALE/Pong-v5", 2)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
    vec.close()


def missing_package_error(package, env_id):
    code = (f"import sys; sys.modules[{package!r}] = None\n"
            "from distrl.envs.make import make_vec_env\n"
            f"try:\n    make_vec_env({env_id!r}, 1)\n"
            "except ValueError as err:\n    print(err)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    return out.stdout + out.stderr


def test_a_missing_ale_py_or_mujoco_names_the_extra_to_install():
    assert "pip install 'distrl[atari]'" in missing_package_error("ale_py", "ALE/Pong-v5")
    assert "pip install 'distrl[mujoco]'" in missing_package_error("mujoco", "Hopper-v5")
