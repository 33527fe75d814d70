"""Small deterministic envs for tests."""

import time

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """obs = [steps so far]; reward 1 per step; terminates after `end` steps.

    Wrap with TimeLimit to get truncations instead.
    """

    observation_space = gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, end: int = 3, nan_at: int | None = None, sleep_s: float = 0.0):
        self.end, self.nan_at, self.sleep_s = end, nan_at, sleep_s

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        if self.sleep_s:
            time.sleep(self.sleep_s)
        self.t += 1
        obs = np.array([np.nan if self.t == self.nan_at else self.t], np.float32)
        return obs, 1.0, self.t >= self.end, False, {}


def counting(end=3, limit=None, nan_at=None):
    def make():
        env = CountingEnv(end, nan_at)
        return gym.wrappers.TimeLimit(env, limit) if limit else env
    return make
