"""EnvRunner: PPO's sampler, an EnvLoop driven by an inference copy of the ActorCritic,
whose steps become GAE fragments. A plain class: used directly in-process, and made a
Ray actor by distrl.runtime.ray_runners.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from distrl.envs import EnvSpec
from distrl.nets import ActorCritic, ModelConfig
from distrl.policy_cache import readonly_tensor
from distrl.returns import gae
from distrl.sampling import EnvLoop, Trajectory
from distrl.types import Rollout

Weights = dict[str, np.ndarray]


class EnvRunner:
    """One EnvLoop plus an inference copy of the policy."""

    def __init__(self, env: EnvSpec, num_envs: int, model: ModelConfig, gamma: float,
                 lambda_: float, seed: int, env_config: dict[str, Any] | None = None):
        self.loop = EnvLoop(env, num_envs, seed, env_config)
        self.gamma, self.lambda_ = gamma, lambda_
        self.model = ActorCritic(*self.loop.spaces(), model)
        self.model.requires_grad_(False)
        self.generator = torch.Generator().manual_seed(seed)
        self.version = -1

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        return self.loop.spaces()

    def set_weights(self, weights: Weights, version: int) -> None:
        """Load weights unless this version is already loaded."""
        if version != self.version:
            # load_state_dict copies out of Ray's read-only shared memory.
            self.model.load_state_dict({k: readonly_tensor(v) for k, v in weights.items()})
            self.version = version

    def sample(self, steps_per_env: int, weights: Weights | None = None, version: int = -1,
               stop_early: Callable[[int], bool] | None = None) -> Rollout:
        """Exactly ``steps_per_env x num_envs`` valid samples with GAE advantages (fewer
        when ``stop_early`` preempts; see EnvLoop.collect)."""
        if weights is not None:
            self.set_weights(weights, version)
        traj = self.loop.collect(self.model, steps_per_env, self.generator, stop_early)
        with torch.inference_mode():
            _, last_values = self.model(torch.from_numpy(traj.next_obs))
        return gae_rollout(traj, last_values.numpy(), self.gamma, self.lambda_, self.version)

    def get_state(self) -> tuple[bytes | None, torch.Tensor]:
        return self.loop.get_state(), self.generator.get_state()

    def set_state(self, state: tuple[bytes | None, torch.Tensor]) -> None:
        self.loop.set_state(state[0])
        self.generator.set_state(state[1])

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


class LocalRunnerGroup:
    """The in-process twin of runtime.ray_runners.RayRunnerGroup: one runner, no Ray."""

    def __init__(self, runner: EnvRunner):
        self.runner = runner

    def sample(self, weights: Weights, version: int, steps_per_env: int) -> list[Rollout]:
        return [self.runner.sample(steps_per_env, weights, version)]

    def metrics(self) -> dict[str, float]:
        return {}

    def get_states(self) -> list:
        return [self.runner.get_state()]

    def set_states(self, states: list) -> None:
        self.runner.set_state(states[0])

    def close(self) -> None:
        self.runner.close()


def seed_for(seed: int, *path: int) -> int:
    """Distinct, reproducible seeds per (run seed, runner, restart, ...)."""
    return int(np.random.SeedSequence([seed, *path]).generate_state(1)[0])
