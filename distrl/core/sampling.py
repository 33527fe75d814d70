"""EnvLoop: steps a vector env with any policy and keeps what every algorithm's sampler
needs: the NEXT_STEP valid mask, episode returns and lengths, the finite check, and a
state to resume from. What the steps become (GAE fragments for PPO, n-step transitions
for DQN) is a pure post-processing function over the stacked Trajectory.

Layout (see returns.py): row ``t`` holds the step taken from ``obs[t]``. NEXT_STEP
autoreset spends one step per finished episode on the reset; those rows are invalid.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from distrl.core.checkpoint import games_in_progress, trusted_loads
from distrl.envs.envpool_vec import is_envpool
from distrl.envs.errors import EnvErrors
from distrl.envs.make import EnvSpec, VectorMode, env_name, make_vec_env


@dataclass
class StepContext:
    """What a recurrent policy needs besides the observations, per env."""

    first: np.ndarray  # [N] bool: the observation starts an episode (reset the state)
    prev_actions: np.ndarray  # [N] int64 or [N, A] float32: the env's previous action
    prev_rewards: np.ndarray  # [N] float32: the env's previous reward
    envs: slice | None = None  # which of the runner's envs these N are (None: all of them)

    @property
    def rows(self) -> slice:
        """The runner's envs these are, as a slice of its per-env arrays (DoubleBuffered
        acts for each half of the envs on its own)."""
        return slice(None) if self.envs is None else self.envs


class Policy(Protocol):
    """What an EnvLoop drives: actions for a batch of observations, plus per-step extras
    the post-processing needs (PPO: log-prob, distribution inputs, values). Feed-forward
    policies ignore the context."""

    def act(self, obs: torch.Tensor, generator: torch.Generator | None,
            context: StepContext) -> tuple[torch.Tensor, dict[str, torch.Tensor]]: ...


@dataclass
class Trajectory:
    """The steps of one collect call, time-major ``[T, N, ...]``."""

    obs: np.ndarray  # [T, N, *obs_shape] the obs each step acted on: uint8 or float32
    actions: np.ndarray  # [T, N] int64 (index into the Discrete space) or [T, N, A] unclipped
    rewards: np.ndarray  # [T, N] float32
    terminated: np.ndarray  # [T, N] bool
    truncated: np.ndarray  # [T, N] bool
    valid: np.ndarray  # [T, N] bool: False on reset steps
    extras: dict[str, np.ndarray]  # [T, N, ...] per key of the policy's extras
    next_obs: np.ndarray  # [N, *obs_shape] the obs after the last step
    episode_returns: np.ndarray  # [E] episodes that ended during the call
    episode_lengths: np.ndarray  # [E]
    episode_envs: np.ndarray  # [E] the sub-env each episode ran in
    steps_per_env: int  # valid steps each env keeps: its first ones

    @property
    def env_steps(self) -> int:
        """Env steps taken, reset steps included."""
        return int(self.rewards.size)

    def first_valid(self, x: np.ndarray) -> np.ndarray:
        """``x [T, N, ...]`` at each env's first ``steps_per_env`` valid rows, flattened
        time-major to ``[steps_per_env * N, ...]``."""
        return x.reshape(-1, *x.shape[2:])[self.first_valid_rows()]

    def first_valid_rows(self) -> np.ndarray:
        """[steps_per_env * N] the rows first_valid takes, as indices into ``[T * N]``."""
        # A stable sort of ~valid keeps time order within each env.
        rows = np.argsort(~self.valid, axis=0, kind="stable")[: self.steps_per_env]
        return (rows * self.valid.shape[1] + np.arange(self.valid.shape[1])).reshape(-1)


class Steps:
    """What one collect call has gathered so far, per step and per ended episode."""

    def __init__(self, num_envs: int):
        self.valid_count = np.zeros(num_envs, dtype=np.int64)  # valid steps acted, per env
        self.rows: list[tuple] = []  # per step: obs, actions, rewards, ..., valid
        self.returns: list[np.ndarray] = []  # per step where episodes ended: their returns,
        self.lengths: list[np.ndarray] = []  # lengths,
        self.envs: list[np.ndarray] = []  # and sub-envs

    def fewest(self) -> int:
        return int(self.valid_count.min())


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    return np.concatenate(parts) if parts else np.zeros(0, dtype)


class EnvLoop:
    """One vector env, its current observations and running episode statistics."""

    def __init__(self, env: EnvSpec, num_envs: int, seed: int,
                 env_config: dict[str, Any] | None = None,
                 max_episode_steps: int | None = None, vector_mode: VectorMode = "auto",
                 action_scaling: bool = False):
        self.env_name = env_name(env)
        self.envs = make_vec_env(env, num_envs, env_config, max_episode_steps=max_episode_steps,
                                 vector_mode=vector_mode)
        self.user_code = EnvErrors(self.env_name)  # the env's own errors name its code
        self.num_envs = num_envs
        self.to_env_action = env_action_fn(self.envs.single_action_space, action_scaling)
        # uint8 observations (images) stay uint8, 4x less memory and copying than float32
        # (the networks scale images themselves); everything else becomes float32.
        space = self.envs.single_observation_space
        self.obs_dtype = np.uint8 if getattr(space, "dtype", None) == np.uint8 else np.float32
        with self.user_code:
            self.obs, _ = self.envs.reset(seed=seed)
        self.prev_done = np.zeros(num_envs, dtype=bool)  # next step of this env is a reset
        self.ep_return = np.zeros(num_envs, dtype=np.float64)
        self.ep_len = np.zeros(num_envs, dtype=np.int64)
        self.context = first_context(self.envs.single_action_space, num_envs)

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        return self.envs.single_observation_space, self.envs.single_action_space

    def collect(self, policy: Policy, steps_per_env: int, generator: torch.Generator | None,
                stop_early: Callable[[int], bool] | None = None) -> Trajectory:
        """Step until every env has ``steps_per_env`` valid steps.

        ``stop_early(k)`` is asked after every step, k being the fewest valid steps of any
        env so far; when it says yes, each env keeps its first k (DD-PPO's preemption).
        """
        steps = Steps(self.num_envs)
        with torch.inference_mode():
            while steps.fewest() < steps_per_env:
                self.finish(self.act(policy, generator, steps), steps)
                if stop_early is not None and stop_early(steps.fewest()):
                    steps_per_env = steps.fewest()
                    break
        return self.trajectory(steps, steps_per_env)

    def act(self, policy: Policy, generator: torch.Generator | None, steps: Steps) -> tuple:
        """The policy's actions for the current observations, sent to the envs: a vector
        env with ``step_async`` (EnvPool's, gymnasium's AsyncVectorEnv) steps them in the
        background until ``finish``."""
        valid = ~self.prev_done
        steps.valid_count += valid
        obs = np.asarray(self.obs, dtype=self.obs_dtype)
        actions, extras = policy.act(torch.from_numpy(obs), generator, self.context)
        actions = actions.numpy()
        env_actions = self.to_env_action(actions)
        if hasattr(self.envs, "step_async"):
            with self.user_code:
                self.envs.step_async(env_actions)
        return obs, actions, extras, valid, env_actions

    def finish(self, acted: tuple, steps: Steps) -> None:
        """The envs' answer to ``act``'s actions, recorded in ``steps``."""
        obs, actions, extras, valid, env_actions = acted
        with self.user_code:
            out = (self.envs.step_wait() if hasattr(self.envs, "step_async")
                   else self.envs.step(env_actions))
        self.obs, rewards, terminated, truncated, info = out
        rewards = np.asarray(rewards, dtype=np.float32)
        self.ep_return += rewards * valid
        self.ep_len += valid
        if "episode" in info:  # RecordEpisodeStatistics below a reward wrapper (Atari's
            # clipping, envs.clip_rewards_keep_score): report the game's score, not the
            # sum of the clipped rewards the learner sees.
            self.ep_return = np.where(info["_episode"], info["episode"]["r"], self.ep_return)
        # A reset step (invalid) returns the first observation of the next episode.
        self.context = StepContext(~valid, actions, rewards, self.context.envs)
        steps.rows.append((obs, actions, rewards, terminated, truncated,
                           {k: v.numpy() for k, v in extras.items()}, valid))
        done = terminated | truncated
        if done.any():
            steps.returns.append(self.ep_return[done].copy())
            steps.lengths.append(self.ep_len[done].copy())
            steps.envs.append(np.flatnonzero(done))
            self.ep_return[done] = 0.0
            self.ep_len[done] = 0
        self.prev_done = done

    def trajectory(self, steps: Steps, steps_per_env: int) -> Trajectory:
        """The collected ``steps`` as a Trajectory, checked finite."""
        obs, actions, rewards, terminated, truncated, extras, valid = zip(*steps.rows,
                                                                          strict=True)
        traj = Trajectory(
            obs=np.stack(obs), actions=np.stack(actions), rewards=np.stack(rewards),
            terminated=np.stack(terminated), truncated=np.stack(truncated),
            valid=np.stack(valid),
            extras={k: np.stack([e[k] for e in extras]) for k in extras[0]},
            next_obs=np.asarray(self.obs, dtype=self.obs_dtype),
            episode_returns=_joined(steps.returns, np.float64),
            episode_lengths=_joined(steps.lengths, np.int64),
            episode_envs=_joined(steps.envs, np.int64),
            steps_per_env=steps_per_env,
        )
        check_finite(self.env_name, traj.obs, traj.rewards)
        return traj

    def get_state(self) -> bytes | None:
        """Everything needed to continue exactly where this loop is, or None when the env
        cannot be pickled (then a resume starts fresh episodes)."""
        return games_in_progress((self.envs, self.obs, self.prev_done, self.ep_return,
                                  self.ep_len, self.context), self.env_name)

    def set_state(self, state: bytes | None) -> None:
        """Trusted input only: the state is a pickle (it comes from our own checkpoint)."""
        if state is None:
            return
        self.envs.close()
        saved = trusted_loads(state)
        self.envs, self.obs, self.prev_done, self.ep_return, self.ep_len = saved[:5]
        if len(saved) > 5:  # saved before the context was: it only matters to an LSTM
            self.context = saved[5]

    def close(self) -> None:
        self.envs.close()


class DoubleBuffered:
    """An EnvLoop's interface over two EnvPools of half the envs each, stepped in turns:
    while the policy acts on one half's observations, the other half's envs step in
    EnvPool's threads (Sample Factory's double-buffered sampling). The envs are those of
    one pool of all of them (EnvPool seeds env i with seed + i): a deterministic policy
    samples the same trajectories, a stochastic one draws in two batches. The policy sees
    each half on its own, with ``context.envs`` saying which envs they are. Not EnvPool's own
    async mode (batch_size < num_envs): it returns whichever envs finish first, so a
    fragment's columns would not each be one env's steps."""

    def __init__(self, env: EnvSpec, num_envs: int, seed: int,
                 env_config: dict[str, Any] | None = None, *args: Any):
        if num_envs < 2 or num_envs % 2:
            raise ValueError(f"`vector_mode='async'` on {env_name(env)!r} steps two halves "
                             f"of the envs in turns: the number of envs ({num_envs}) must be "
                             "even.")
        half = num_envs // 2
        # Half the threads one pool of all the envs would have (EnvPool's default: one per
        # env, at most the cores) for each: the two pools step in turns, not together.
        threads = max(1, min(num_envs, os.cpu_count() or 1) // 2)
        env_config = {"num_threads": threads, **(env_config or {})}
        self.halves = (EnvLoop(env, half, seed, env_config, *args),
                       EnvLoop(env, half, seed + half, env_config, *args))
        for k, loop in enumerate(self.halves):
            loop.context = replace(loop.context, envs=slice(k * half, (k + 1) * half))
        self.num_envs, self.obs_dtype = num_envs, self.halves[0].obs_dtype

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        return self.halves[0].spaces()

    @property
    def context(self) -> StepContext:
        """Every env's context (a recurrent policy's bootstrap value reads it)."""
        a, b = (loop.context for loop in self.halves)
        return StepContext(*(np.concatenate([x, y]) for x, y in
                             ((a.first, b.first), (a.prev_actions, b.prev_actions),
                              (a.prev_rewards, b.prev_rewards))))

    def collect(self, policy: Policy, steps_per_env: int, generator: torch.Generator | None,
                stop_early: Callable[[int], bool] | None = None) -> Trajectory:
        """EnvLoop.collect: both halves step the same number of times; half b's step
        finishes after half a's next one was sent, so one half always steps meanwhile."""
        a, b = self.halves
        steps = Steps(a.num_envs), Steps(b.num_envs)
        pending_b = None
        with torch.inference_mode():
            while min(s.fewest() for s in steps) < steps_per_env:
                pending_a = a.act(policy, generator, steps[0])
                if pending_b is not None:
                    b.finish(pending_b, steps[1])
                pending_b = b.act(policy, generator, steps[1])
                a.finish(pending_a, steps[0])
                fewest = min(s.fewest() for s in steps)
                if stop_early is not None and stop_early(fewest):
                    steps_per_env = fewest
                    break
            b.finish(pending_b, steps[1])
        return joined(a.trajectory(steps[0], steps_per_env),
                      b.trajectory(steps[1], steps_per_env))

    def get_state(self) -> tuple[bytes, bytes] | None:
        """Both halves' states, or None where envs cannot be saved (EnvPool's cannot: a
        resume starts fresh episodes, said once as for one EnvLoop)."""
        states = tuple(loop.get_state() for loop in self.halves)
        return None if None in states else states

    def set_state(self, state: tuple[bytes, bytes] | None) -> None:
        """Trusted input only (see EnvLoop.set_state)."""
        for loop, saved in zip(self.halves, state or (None, None), strict=True):
            loop.set_state(saved)

    def close(self) -> None:
        for loop in self.halves:
            loop.close()


def joined(a: Trajectory, b: Trajectory) -> Trajectory:
    """Two trajectories of the same steps over different envs as one, a's envs first."""
    def envs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        return np.concatenate([x, y], axis=1)

    return Trajectory(
        obs=envs(a.obs, b.obs), actions=envs(a.actions, b.actions),
        rewards=envs(a.rewards, b.rewards), terminated=envs(a.terminated, b.terminated),
        truncated=envs(a.truncated, b.truncated), valid=envs(a.valid, b.valid),
        extras={k: envs(a.extras[k], b.extras[k]) for k in a.extras},
        next_obs=np.concatenate([a.next_obs, b.next_obs]),
        episode_returns=np.concatenate([a.episode_returns, b.episode_returns]),
        episode_lengths=np.concatenate([a.episode_lengths, b.episode_lengths]),
        episode_envs=np.concatenate([a.episode_envs, b.episode_envs + a.obs.shape[1]]),
        steps_per_env=a.steps_per_env,
    )


def make_loop(env: EnvSpec, num_envs: int, seed: int, env_config: dict[str, Any] | None = None,
              max_episode_steps: int | None = None, vector_mode: VectorMode = "auto",
              action_scaling: bool = False) -> EnvLoop | DoubleBuffered:
    """An algorithm's sampler loop: DoubleBuffered for ``vector_mode="async"`` on an
    EnvPool env (EnvPool's async stepping), else one EnvLoop."""
    loop = DoubleBuffered if vector_mode == "async" and is_envpool(env) else EnvLoop
    return loop(env, num_envs, seed, env_config, max_episode_steps, vector_mode,
                action_scaling)


def first_context(action_space: gym.Space, num_envs: int) -> StepContext:
    """Every env at an episode's first step, with no previous action or reward."""
    shape = getattr(action_space, "shape", None) or ()
    dtype = np.float32 if isinstance(action_space, gym.spaces.Box) else np.int64
    return StepContext(np.ones(num_envs, bool), np.zeros((num_envs, *shape), dtype),
                       np.zeros(num_envs, np.float32))


def scales_actions(model: Any) -> bool:
    """Whether the network acts in [-1, 1] for its Box space (ModelConfig.action_scaling)."""
    return bool(getattr(model, "action_scaling", False))


def env_action_fn(space: gym.Space, scaled: bool = False
                  ) -> Callable[[np.ndarray], np.ndarray]:
    """Policy actions -> env actions: Box actions clipped to the bounds (the policy's
    Gaussian is unbounded; the batch keeps the unclipped sample its log-prob belongs to),
    or with ``scaled`` (ModelConfig.action_scaling) clipped to [-1, 1] and mapped onto
    them; Discrete indices shifted by the space's start."""
    if isinstance(space, gym.spaces.Box):
        low, high = space.low, space.high
        if scaled:
            mid, half = (high + low) / 2, (high - low) / 2
            return lambda a: mid + half * np.clip(a, -1.0, 1.0)
        return lambda a: np.clip(a, low, high)
    start = int(getattr(space, "start", 0))
    if start:
        return lambda a: a + start
    return lambda a: a


def check_finite(env_name: str, obs: np.ndarray, rewards: np.ndarray) -> None:
    for what, x in (("observation", obs), ("reward", rewards)):
        if not np.issubdtype(x.dtype, np.floating):
            continue  # integers (uint8 frames) are always finite
        bad = ~np.isfinite(x.reshape(x.shape[0], x.shape[1], -1)).all(-1)
        if bad.any():
            t, i = np.argwhere(bad)[0]
            raise ValueError(
                f"env {env_name!r} (sub-env {i}) returned a non-finite {what} ({x[t, i]}) "
                f"{t} steps into a sample call. Fix the env, or wrap it to clip or reject "
                "such values; training on NaN/inf would silently corrupt the policy."
            )


def seed_for(seed: int, *path: int) -> int:
    """Distinct, reproducible seeds per (run seed, runner, restart, ...)."""
    return int(np.random.SeedSequence([seed, *path]).generate_state(1)[0])

