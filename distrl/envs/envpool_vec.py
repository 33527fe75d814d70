"""EnvPool envs (Weng et al. 2022, arXiv 2206.10558) behind gymnasium's vector
interface: ``--env envpool:Pong-v5`` steps all of a runner's envs in C++ threads and
returns uint8 frames ready for the network, with no Python loop over envs.

EnvPool resets an env on the step after its episode ended (the action is ignored, the
reward is 0): gymnasium's NEXT_STEP autoreset, which every sampler here expects. The
step limit is applied here, not by EnvPool, whose flags call an episode that terminates
on its last allowed step truncated (its terminated is ``done & ~truncated``), so that
its return would bootstrap from a terminal state: as gymnasium's TimeLimit, such a step
is terminated (and truncated). Atari
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


ALE_V5 = {"repeat_action_probability": 0.25, "use_fire_reset": False, "noop_max": 1}
"""EnvPool's env_config nearest gymnasium's ALE/<Game>-v5 (Machado et al. 2018: sticky
actions, no FIRE at reset, no no-op starts), whose defaults it does not share: EnvPool's
<Game>-v5 has no sticky actions, presses FIRE at reset and starts with up to 30 no-ops
(noop_max 1, its fewest, is one no-op; 0 crashes it). Scores of ALE v5's tables compare
only with these set."""


def ale_v5_differences(env: str, env_config: dict[str, Any] | None = None
                       ) -> dict[str, dict[str, Any]]:
    """Where an ``envpool:`` Atari task with this env_config differs from ALE v5:
    {setting: {"envpool": its value, "ale_v5": ALE v5's}}; {} when it differs nowhere
    or is no Atari task (for benches to print beside a score)."""
    import envpool

    config = envpool.make_spec(env.removeprefix(PREFIX)).config
    if not hasattr(config, "repeat_action_probability"):
        return {}
    ours = {k: (env_config or {}).get(k, getattr(config, k)) for k in ALE_V5}
    return {k: {"envpool": ours[k], "ale_v5": v} for k, v in ALE_V5.items() if ours[k] != v}


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
        if kwargs.get("noop_max", 1) < 1:  # EnvPool's own check is a segmentation fault
            raise ValueError(f"EnvPool's noop_max must be >= 1 (got {kwargs['noop_max']}): "
                             "1 is its fewest, one no-op at reset.")
        self.limit = max_episode_steps or envpool.make_spec(self.task_id).config.max_episode_steps
        # One step beyond the limit: EnvPool never ends an episode at the limit itself.
        self.options = dict(kwargs, num_envs=num_envs, batch_size=num_envs,
                            num_threads=num_threads, env_type="gymnasium",
                            max_episode_steps=self.limit + 1)
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
        self.cut = np.zeros(num_envs, dtype=bool)  # truncated here: reset at the next step

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
        self.cut[:] = False
        obs, _ = self.pool.reset()
        return obs, {}

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray,
                                                  np.ndarray, dict]:
        self.step_async(actions)
        return self.step_wait()

    def step_async(self, actions: np.ndarray) -> None:
        """Start a step and return at once: the pool's threads step the envs meanwhile
        (EnvPool's send; the same pair of calls as gymnasium's AsyncVectorEnv). An env
        truncated at the last step is reset instead, its action ignored (NEXT_STEP)."""
        actions = np.asarray(actions)
        if not self.cut.any():
            self.pool.send(actions)
            return
        keep = np.flatnonzero(~self.cut)
        self.pool._reset(np.flatnonzero(self.cut))  # EnvPool's reset without its recv
        if keep.size:
            self.pool.send(actions[keep], keep)

    def step_wait(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, dict]:
        """The step step_async started. Its batch is every env of the pool, in env
        order (EnvPool's sync mode)."""
        obs, rewards, terminated, _, info = self.pool.recv()
        if self.cut.any():  # resets and steps in one batch come back in finishing order
            order = np.argsort(info["env_id"])
            obs, rewards, terminated = obs[order], rewards[order], terminated[order]
        restarted = self.length == -1  # this step was an ended episode's reset
        self.score = np.where(restarted, 0.0, self.score + rewards)
        self.length = np.where(restarted, 0, self.length + 1)
        truncated = self.length >= self.limit
        self.cut = truncated & ~terminated  # EnvPool resets terminated envs itself
        done = terminated | truncated
        info = {"episode": {"r": self.score.copy(), "l": self.length.copy()}, "_episode": done}
        self.length = np.where(done, -1, self.length)
        if self.clip_rewards:
            rewards = np.sign(rewards)
        return obs, rewards.astype(np.float32), terminated, truncated, info

    def close(self, **kwargs: Any) -> None:
        self.pool.close()
