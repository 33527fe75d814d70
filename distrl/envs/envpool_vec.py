"""EnvPool envs (Weng et al. 2022, arXiv 2206.10558) behind gymnasium's vector
interface: ``--env envpool:Pong-v5`` steps all of a runner's envs in C++ threads and
returns uint8 frames ready for the network, with no Python loop over envs.

EnvPool resets an env on the step after its episode ended (the action is ignored, the
reward is 0): gymnasium's NEXT_STEP autoreset, which every sampler here expects. Atari
tasks keep EnvPool's own preprocessing (84x84 grey, 4 stacked frames, frame skip 4, up
to 30 no-ops); rewards are clipped to their sign for learning as in distrl's ALE/ envs,
and the reported episode return is the game's score.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np

PREFIX = "envpool:"
EXTRA = "pip install 'distrl[envpool]'"


def is_envpool(env: Any) -> bool:
    return isinstance(env, str) and env.startswith(PREFIX)


@contextlib.contextmanager
def _float64_bounds() -> Iterator[None]:
    """Quiet gymnasium's warning on EnvPool's float64 Box bounds, cast as they should be."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*precision lowered by casting")
        yield


class EnvPoolVector(gym.vector.VectorEnv):
    """One EnvPool of ``num_envs`` envs, stepped together (EnvPool's sync mode). EnvPool
    seeds env ``i`` with ``seed + i``: two pools of n envs seeded s and s + n are one
    pool of 2n seeded s (sampling.DoubleBuffered relies on it)."""

    metadata: ClassVar[dict] = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, env: str, num_envs: int, clip_rewards: bool = True,
                 max_episode_steps: int | None = None, num_threads: int = 0, **kwargs: Any):
        """``num_threads`` 0: EnvPool's default (one per env, at most the cores);
        ``kwargs``: EnvPool's own options for the task (env_config)."""
        try:
            import envpool
        except ImportError:
            raise ValueError(f"env {env!r} needs EnvPool: {EXTRA}") from None
        self.task_id = env.removeprefix(PREFIX)
        if self.task_id not in envpool.list_all_envs():
            raise ValueError(f"EnvPool has no task {self.task_id!r}; its tasks: "
                             "envpool.list_all_envs() (e.g. envpool:Pong-v5, "
                             "envpool:CartPole-v1).")
        self.options = dict(kwargs, num_envs=num_envs, batch_size=num_envs,
                            num_threads=num_threads, env_type="gymnasium")
        if max_episode_steps is not None:
            self.options["max_episode_steps"] = max_episode_steps
        self.clip_rewards = clip_rewards and self._is_atari()
        self.num_envs = num_envs
        self.pool = self._make(seed=0)
        with _float64_bounds():
            self.single_observation_space = self.pool.observation_space
            self.single_action_space = self.pool.action_space
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space,
                                                              num_envs)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        self.score = np.zeros(num_envs)
        self.length = np.zeros(num_envs, dtype=np.int64)

    def _is_atari(self) -> bool:
        import envpool

        return "Atari" in type(envpool.make_spec(self.task_id)).__name__

    def _make(self, seed: int) -> Any:
        import envpool

        with _float64_bounds():
            return envpool.make(self.task_id, seed=seed % 2**31, **self.options)  # int32

    def reset(self, *, seed: int | None = None, options: dict | None = None
              ) -> tuple[np.ndarray, dict]:
        """EnvPool seeds at construction: a seed makes the pool anew."""
        if seed is not None:
            self.pool.close()
            self.pool = self._make(seed)
        self.score[:] = 0.0
        self.length[:] = 0
        obs, _ = self.pool.reset()
        return obs, {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                  np.ndarray, dict]:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: np.ndarray) -> None:
        """Start a step and return at once: the pool's threads step the envs meanwhile
        (EnvPool's send; the same pair of calls as gymnasium's AsyncVectorEnv)."""
        self.pool.send(np.asarray(actions))

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """The step step_async started. Its batch is every env of the pool, in env
        order (EnvPool's sync mode)."""
        obs, rewards, terminated, truncated, _ = self.pool.recv()
        done = terminated | truncated
        restarted = self.length == -1  # this step was an ended episode's reset
        self.score = np.where(restarted, 0.0, self.score + rewards)
        self.length = np.where(restarted, 0, self.length + 1)
        info = {"episode": {"r": self.score.copy(), "l": self.length.copy()}, "_episode": done}
        self.length = np.where(done, -1, self.length)
        if self.clip_rewards:
            rewards = np.sign(rewards)
        return obs, rewards.astype(np.float32), terminated, truncated, info

    def close(self, **kwargs: Any) -> None:
        self.pool.close()
