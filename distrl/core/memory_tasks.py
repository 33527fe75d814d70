"""Tasks that need memory, to check and compare recurrent policies: a feed-forward policy
cannot solve them, whatever its training budget.

- ``StatelessCartPole``: CartPole-v1 with the velocities removed (cart position and pole
  angle only), as in SB3-contrib's RecurrentPPO benchmarks.
- ``RepeatFirst``: a cue (+1 or -1) shown at the first step only; at the last step the
  agent must name it (action 1 for +1, 0 for -1): +1 if right, -1 if wrong. Without
  memory the best mean return is 0.

Use them by id: ``--env distrl.core.memory_tasks:StatelessCartPole``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

POSITIONS = [0, 2]  # cart position and pole angle in CartPole's observation


def StatelessCartPole(**kwargs: Any) -> gym.Env:
    env = gym.make("CartPole-v1", **kwargs)
    low, high = env.observation_space.low[POSITIONS], env.observation_space.high[POSITIONS]
    return gym.wrappers.TransformObservation(
        env, lambda obs: obs[POSITIONS], gym.spaces.Box(low, high, dtype=np.float32))


class RepeatFirst(gym.Env):
    """Observation ``[cue, query]``: the cue at step 0, zeros after, query = 1 at the last
    of ``length`` steps, where the action is judged."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, length: int = 4, render_mode: str | None = None):
        self.length = length
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t, self.cue = 0, 1.0

    def _obs(self) -> np.ndarray:
        cue = self.cue if self.t == 0 else 0.0
        return np.array([cue, float(self.t == self.length - 1)], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.cue = 0, float(self.np_random.choice([-1.0, 1.0]))
        return self._obs(), {}

    def step(self, action: Any):
        if self.t == self.length - 1:
            right = int(action) == int(self.cue > 0)
            return self._obs(), 1.0 if right else -1.0, True, False, {}
        self.t += 1
        return self._obs(), 0.0, False, False, {}
