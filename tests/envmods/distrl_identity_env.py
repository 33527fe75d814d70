"""The identity task of the per-commit learning checks (tests/integration/test_learns_quickly.py),
as SB3's IdentityEnv: one step per episode, the observation a one-hot of a random target
among ``n``, reward 1 when the action names the target, else 0. Learnt, the greedy policy
is the identity on the one-hots; a policy that ignores its input scores 1/n on average."""

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np


class Identity(gym.Env):
    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, n: int = 5, render_mode: str | None = None):
        self.n = n
        self.observation_space = gym.spaces.Box(0.0, 1.0, (n,), np.float32)
        self.action_space = gym.spaces.Discrete(n)
        self.target = 0

    def _obs(self) -> np.ndarray:
        return np.eye(self.n, dtype=np.float32)[self.target]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.target = int(self.np_random.integers(self.n))
        return self._obs(), {}

    def step(self, action: Any):
        reward = float(int(action) == self.target)
        return self._obs(), reward, True, False, {}
