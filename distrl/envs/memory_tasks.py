"""Tasks that need memory, to check and compare recurrent policies: a feed-forward policy
cannot solve them, whatever its training budget.

- ``StatelessCartPole``: CartPole-v1 with the velocities removed (cart position and pole
  angle only), as in SB3-contrib's RecurrentPPO benchmarks.
- ``PendulumNoVel``: Pendulum-v1 with the angular velocity removed (cos and sin of the
  angle only), rl-zoo's PendulumNoVel-v1.
- ``RepeatFirst``: a cue (+1 or -1) shown at the first step only; at the last step the
  agent must name it (action 1 for +1, 0 for -1): +1 if right, -1 if wrong. Without
  memory the best mean return is 0.
- ``RepeatAfter``: as RepeatFirst, with a random symbol at every step between cue and
  query, and the query exactly ``k`` steps after the cue: memory length is the knob.

Each takes ``stack=N``: the last N observations side by side, zeros before the first
(a frame stack, the feed-forward control: it sees N-1 steps back and no further).
Use them by id: ``--env distrl.envs.memory_tasks:StatelessCartPole``, and
``--env-config '{"k": 16}'`` for their keyword arguments.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

POSITIONS = [0, 2]  # cart position and pole angle in CartPole's observation
ANGLE = [0, 1]  # cos and sin of the angle in Pendulum's observation (then its velocity)


def StatelessCartPole(stack: int = 1, **kwargs: Any) -> gym.Env:
    return stacked(without_velocity(gym.make("CartPole-v1", **kwargs), POSITIONS), stack)


def PendulumNoVel(stack: int = 1, **kwargs: Any) -> gym.Env:
    return stacked(without_velocity(gym.make("Pendulum-v1", **kwargs), ANGLE), stack)


def without_velocity(env: gym.Env, keep: list[int]) -> gym.Env:
    """``env`` observing only the entries ``keep`` of its observation."""
    low, high = env.observation_space.low[keep], env.observation_space.high[keep]
    return gym.wrappers.TransformObservation(
        env, lambda obs: obs[keep], gym.spaces.Box(low, high, dtype=np.float32))


def stacked(env: gym.Env, stack: int) -> gym.Env:
    """The last ``stack`` observations, flat, oldest first, zero-padded at an episode's
    start (1: ``env`` itself)."""
    if stack < 1:
        raise ValueError(f"`stack` ({stack}) must be >= 1 (1: no frame stack).")
    if stack == 1:
        return env
    return gym.wrappers.FlattenObservation(
        gym.wrappers.FrameStackObservation(env, stack, padding_type="zero"))


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


class _RepeatAfter(gym.Env):
    """Observation ``[symbol, is_cue, is_query]``: a random symbol (+1 or -1) at every
    one of the k + 1 steps; the first is the cue (is_cue = 1). At step k (is_query = 1)
    the action must name the symbol seen k steps earlier, the cue (1 for +1, 0 for -1):
    +1 if right, -1 if wrong. The symbols between are distractors, so a policy must
    keep the one that was marked; one that sees fewer than k steps back averages 0."""

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, k: int = 4, render_mode: str | None = None):
        if k < 1:
            raise ValueError(f"`k` ({k}) must be >= 1.")
        self.k = k
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t, self.symbols = 0, np.ones(k + 1, np.float32)

    def _obs(self) -> np.ndarray:
        return np.array([self.symbols[self.t], self.t == 0, self.t == self.k], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        self.symbols = self.np_random.choice([-1.0, 1.0], self.k + 1).astype(np.float32)
        return self._obs(), {}

    def step(self, action: Any):
        if self.t == self.k:
            right = int(action) == int(self.symbols[0] > 0)
            return self._obs(), 1.0 if right else -1.0, True, False, {}
        self.t += 1
        return self._obs(), 0.0, False, False, {}


def RepeatAfter(k: int = 4, stack: int = 1, render_mode: str | None = None) -> gym.Env:
    """Name the cue seen exactly ``k`` steps earlier, through distractors (_RepeatAfter)."""
    return stacked(_RepeatAfter(k, render_mode), stack)
