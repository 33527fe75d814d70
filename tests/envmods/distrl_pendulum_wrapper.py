"""A user's own Pendulum without its angular velocity, for `--env distrl_pendulum_wrapper:make`."""

import gymnasium as gym
import numpy as np


class NoVelocity(gym.ObservationWrapper):
    def __init__(self, env: gym.Env):
        super().__init__(env)
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)

    def observation(self, observation):
        return observation[:2]


def make(**kwargs):
    return NoVelocity(gym.make("Pendulum-v1", **kwargs))
