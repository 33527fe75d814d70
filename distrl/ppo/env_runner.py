"""EnvRunner: PPO's sampler, an EnvLoop driven by an inference copy of the ActorCritic,
whose steps become GAE fragments. A plain class: used directly in-process, and made a
Ray actor by distrl.ppo.remote.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from distrl.core.returns import gae
from distrl.core.sampling import Trajectory, make_loop
from distrl.core.sequences import to_sequences
from distrl.core.types import Fragment, GAESteps, Rollout
from distrl.envs.make import EnvSpec, VectorMode
from distrl.models.config import ModelConfig
from distrl.models.filters import RunningStats, discounted_returns
from distrl.models.recurrent import LSTMActor, actor_critic
from distrl.store.policy_cache import readonly_tensor

Weights = dict[str, np.ndarray]


REWARD_CLIP = 10.0  # scaled rewards are clipped here (SB3's VecNormalize clip_reward)


def scale_rewards(rewards: np.ndarray, reward_std: float) -> np.ndarray:
    """Reward scaling: rewards over the std of discounted returns, clipped."""
    return np.clip(rewards / reward_std, -REWARD_CLIP, REWARD_CLIP)


class EnvRunner:
    """One EnvLoop (or DoubleBuffered) plus an inference copy of the policy."""

    def __init__(self, env: EnvSpec, num_envs: int, model: ModelConfig, gamma: float,
                 lambda_: float, seed: int, env_config: dict[str, Any] | None = None,
                 normalize_rewards: bool = False, max_episode_steps: int | None = None,
                 vector_mode: VectorMode = "auto", keep_steps: bool = False):
        self.loop = make_loop(env, num_envs, seed, env_config, max_episode_steps, vector_mode,
                              model.action_scaling)
        self.gamma, self.lambda_ = gamma, lambda_
        self.model = actor_critic(*self.loop.spaces(), model)
        self.model.requires_grad_(False)
        # A recurrent policy acts through an LSTMActor, which carries each env's state.
        self.max_seq_len = model.max_seq_len if model.use_lstm else None
        self.actor = LSTMActor(self.model, num_envs) if model.use_lstm else self.model
        self.generator = torch.Generator().manual_seed(seed)
        self.version = -1
        # Reward scaling: each sub-env's running discounted return, across fragments.
        self.returns = np.zeros(num_envs) if normalize_rewards else None
        self.keep_steps = keep_steps  # samples carry their steps (recompute_advantages)

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        return self.loop.spaces()

    def use_model(self, model: torch.nn.Module) -> None:
        """Act with ``model`` itself (DD-PPO: the very weights being trained)."""
        self.model = model
        if self.max_seq_len is None:
            self.actor = model
        else:
            self.actor.model = model

    def set_weights(self, weights: Weights, version: int) -> None:
        """Load weights unless this version is already loaded."""
        if version != self.version:
            # load_state_dict copies out of Ray's read-only shared memory.
            self.model.load_state_dict({k: readonly_tensor(v) for k, v in weights.items()})
            self.version = version

    def collect(self, steps_per_env: int, weights: Weights | None = None, version: int = -1,
                stop_early: Callable[[int], bool] | None = None,
                reward_std: float | None = 1.0) -> tuple[Trajectory, dict[str, RunningStats]]:
        """The steps of one sample call as taken, and the filters' new statistics. With
        reward scaling, rewards are scaled by ``reward_std`` (the driver's merged std of
        discounted returns; None: left raw, for a learner that scales them itself)."""
        if weights is not None:
            self.set_weights(weights, version)
        traj = self.loop.collect(self.actor, steps_per_env, self.generator, stop_early)
        stats = self._statistics(traj)
        if self.returns is not None and reward_std is not None:
            traj.rewards = scale_rewards(traj.rewards, reward_std)
        return traj, stats

    def sample(self, steps_per_env: int, weights: Weights | None = None, version: int = -1,
               stop_early: Callable[[int], bool] | None = None,
               reward_std: float = 1.0) -> Rollout:
        """Exactly ``steps_per_env x num_envs`` valid samples with GAE advantages (fewer
        when ``stop_early`` preempts; see EnvLoop.collect)."""
        traj, stats = self.collect(steps_per_env, weights, version, stop_early, reward_std)
        next_obs = torch.from_numpy(traj.next_obs)
        with torch.inference_mode():
            last_values = (self.model(next_obs)[1] if self.max_seq_len is None
                           else self.actor.values(next_obs, self.loop.context))
        rollout = gae_rollout(traj, last_values.numpy(), self.gamma, self.lambda_, self.version)
        if self.keep_steps:
            rollout.steps = [GAESteps(traj.obs, traj.next_obs, traj.rewards, traj.terminated,
                                      traj.truncated, traj.first_valid_rows())]
        if self.max_seq_len is not None:
            rollout = to_sequences(rollout, traj, self.max_seq_len)
        rollout.stats = stats
        return rollout

    def fragment(self, steps_per_env: int, weights: Weights | None = None, version: int = -1
                 ) -> Fragment:
        """The steps as taken, time-major, for a learner that corrects for its own newer
        weights (APPO's V-trace) instead of trusting this runner's values, and scales
        the raw rewards with its own statistics."""
        traj, stats = self.collect(steps_per_env, weights, version, reward_std=None)
        x = traj.extras
        return Fragment(obs=traj.obs, actions=traj.actions, logp=x["logp"],
                        dist_inputs=x["dist_inputs"], rewards=traj.rewards,
                        terminated=traj.terminated, truncated=traj.truncated, valid=traj.valid,
                        next_obs=traj.next_obs, episode_returns=traj.episode_returns,
                        episode_lengths=traj.episode_lengths, weights_version=self.version,
                        stats=stats)

    def _statistics(self, traj: Trajectory) -> dict[str, RunningStats]:
        """This fragment's raw observations and discounted returns (valid rows), for the
        driver to merge into the filters."""
        stats = {}
        if self.model.filtered:
            stats["obs"] = RunningStats.of(traj.obs[traj.valid].reshape(int(traj.valid.sum()), -1))
        if self.returns is not None:
            done = traj.terminated | traj.truncated
            returns, self.returns = discounted_returns(traj.rewards, done, self.returns,
                                                       self.gamma)
            stats["returns"] = RunningStats.of(returns[traj.valid][:, None])
        return stats

    def get_state(self) -> tuple:
        """Envs in progress, RNG, reward scaling, a recurrent policy's states and gSDE's
        held noise."""
        memory = None if self.max_seq_len is None else self.actor.get_state()
        noise = self.model.sde_noise
        return (self.loop.get_state(), self.generator.get_state(), self.returns, memory,
                None if noise is None else noise.get_state())

    def set_state(self, state: tuple) -> None:
        self.loop.set_state(state[0])
        self.generator.set_state(state[1])
        self.returns = state[2]
        if len(state) > 3 and state[3] is not None and state[0] is not None:
            self.actor.set_state(state[3])  # the episodes it belongs to go on
        if len(state) > 4 and state[4] is not None and self.model.sde_noise is not None:
            self.model.sde_noise.set_state(state[4])

    def close(self) -> None:
        self.loop.close()


def gae_rollout(traj: Trajectory, last_values: np.ndarray, gamma: float, lambda_: float,
                weights_version: int) -> Rollout:
    """PPO's post-processing: GAE over every step taken (a later cut bootstraps less),
    then each env's first ``steps_per_env`` valid samples."""
    x = traj.extras
    values = np.concatenate([x["values"], last_values[None]])
    adv, targets = gae(traj.rewards, values, traj.terminated, traj.truncated, gamma, lambda_)
    take = traj.first_valid
    return Rollout(
        obs=take(traj.obs), actions=take(traj.actions), logp=take(x["logp"]),
        dist_inputs=take(x["dist_inputs"]), values=take(x["values"]),
        advantages=take(adv), value_targets=take(targets),
        episode_returns=traj.episode_returns, episode_lengths=traj.episode_lengths,
        env_steps=traj.env_steps, weights_version=weights_version,
    )


class InProcessGroup:
    """A group of one in-process EnvRunner (``runner``), the twin of a Ray group: no
    restarts to count, one runner state to checkpoint."""

    runner: EnvRunner

    def metrics(self) -> dict[str, float]:
        return {}

    def get_states(self) -> list:
        return [self.runner.get_state()]

    def set_states(self, states: list) -> None:
        self.runner.set_state(states[0])


class LocalRunnerGroup(InProcessGroup):
    """The in-process twin of ppo.remote.RayRunnerGroup: one runner, no Ray. With
    ``threaded``, a launched sample runs in a thread beside the learner (PPO's overlap;
    torch releases the GIL in its kernels, as do envs stepped in C)."""

    def __init__(self, runner: EnvRunner, threaded: bool = False):
        self.runner = runner
        self._pool = ThreadPoolExecutor(1, "ppo-sampler") if threaded else None
        self._next: Callable[[], list[Rollout]] | None = None

    def sample(self, weights: Weights, version: int, steps_per_env: int,
               reward_std: float = 1.0) -> list[Rollout]:
        return [self.runner.sample(steps_per_env, weights, version, reward_std=reward_std)]

    def launch(self, weights: Weights, version: int, steps_per_env: int,
               reward_std: float = 1.0) -> None:
        """Start the next sample (unthreaded: taken when collected)."""
        if self._pool is None:
            self._next = functools.partial(self.sample, weights, version, steps_per_env,
                                           reward_std)
            return
        # Copied: the learner goes on updating its arrays in place meanwhile.
        weights = {k: v.copy() for k, v in weights.items()}
        self._next = self._pool.submit(self.sample, weights, version, steps_per_env,
                                       reward_std).result

    @property
    def in_flight(self) -> bool:
        return self._next is not None

    def collect(self) -> list[Rollout]:
        """The launched sample, waiting for it; raises the runner's error."""
        call, self._next = self._next, None
        return call()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)  # a sample in progress ends before its envs close
        self.runner.close()
