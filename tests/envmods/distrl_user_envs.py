"""A user's own env module, as a user would have it: on PYTHONPATH, not installed.

Importing it registers "Countdown-v0"; `countdown` is the same env as a factory.
`Endless` never ends its episodes; `Broken` raises where it is told to.
"""

import gymnasium as gym
import numpy as np


class Countdown(gym.Env):
    """Reward 1 per step, `length` steps per episode: the return is `length`, so a test
    can see that env_config reached the env."""

    metadata = {"render_modes": ["rgb_array"], "render_fps": 30}  # noqa: RUF012 (gymnasium's API)
    observation_space = gym.spaces.Box(0.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 5, render_mode: str | None = None):
        self.length, self.render_mode = length, render_mode

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.ones(1, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([1.0 - self.t / self.length], np.float32)
        return obs, 1.0, self.t >= self.length, False, {}

    def render(self):
        frame = np.zeros((64, 64, 3), np.uint8)
        frame[:, : 64 * self.t // self.length] = 255
        return frame


def countdown(length: int = 5, render_mode: str | None = None) -> gym.Env:
    return Countdown(length, render_mode)


class Endless(Countdown):
    """Never ends an episode by itself: only a step limit does."""

    def step(self, action):
        self.t += 1
        return np.ones(1, np.float32), 1.0, False, False, {}


def endless(render_mode: str | None = None) -> gym.Env:
    return Endless(render_mode=render_mode)


class Broken(Countdown):
    """A user's bug: a ZeroDivisionError in `fail_in` ("init", "reset" or "step", after
    `after` steps), raised on the line marked BUG below."""

    def __init__(self, fail_in: str = "step", after: int = 2, length: int = 5,
                 render_mode: str | None = None):
        super().__init__(length, render_mode)
        self.fail_in, self.after = fail_in, after
        if fail_in == "init":
            self.divide()

    def reset(self, *, seed=None, options=None):
        if self.fail_in == "reset":
            self.divide()
        return super().reset(seed=seed, options=options)

    def step(self, action):
        if self.fail_in == "step" and self.t >= self.after:
            self.divide()
        return super().step(action)

    def divide(self):
        return self.length / 0  # BUG


gym.register("Countdown-v0", entry_point=Countdown)
