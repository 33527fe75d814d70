"""``vector_mode="async"``: gymnasium's AsyncVectorEnv, one subprocess per sub-env, for a
user's env whose own stepping is the cost. NEXT_STEP autoreset as every sampler expects.

An error raised in the user's env inside a subprocess becomes the EnvError there, where
its traceback still shows the user's frame, and reaches the caller as that one line
(gymnasium would also log the whole traceback; it is the error's cause instead, shown
with --debug).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import gymnasium as gym
from gymnasium.vector.async_vector_env import AsyncState

from distrl.envs.errors import EnvErrors


class SubprocessTraceback(Exception):
    """The traceback of an error raised in a sub-env's subprocess, as text."""


class AsyncEnvs(gym.vector.AsyncVectorEnv):
    """AsyncVectorEnv that raises a sub-env's error as it is, without logging it."""

    def _raise_if_errors(self, successes: Iterable[bool]) -> None:
        failed = self.num_envs - sum(successes)
        if not failed:
            return
        errors = [self.error_queue.get() for _ in range(failed)]
        for index, *_ in errors:  # that worker has shut down
            self.parent_pipes[index].close()
            self.parent_pipes[index] = None
        self._state = AsyncState.DEFAULT
        _, kind, value, trace = errors[-1]
        error = value if isinstance(value, BaseException) else kind(value)
        raise error from SubprocessTraceback(trace)


class UserErrors(gym.Wrapper):
    """A sub-env whose reset and step errors leave as EnvErrors (env_errors.py)."""

    def __init__(self, env: gym.Env, errors: EnvErrors):
        super().__init__(env)
        self.errors = errors

    def reset(self, **kwargs: Any) -> Any:
        with self.errors:
            return self.env.reset(**kwargs)

    def step(self, action: Any) -> Any:
        with self.errors:
            return self.env.step(action)


def user_errors(make: Callable[[], gym.Env], env_name: str) -> gym.Env:
    """``make()`` in a subprocess, its errors EnvErrors naming ``env_name``."""
    errors = EnvErrors(env_name)
    with errors:
        env = make()
    return UserErrors(env, errors)
