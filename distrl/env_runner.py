"""EnvRunner: steps a vector env with the current policy and returns post-processed
fragments. A plain class: used directly in-process, and made a Ray actor by
distrl.runtime.ray_runners.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import NamedTuple

import cloudpickle
import gymnasium as gym
import numpy as np
import torch

from distrl.envs import EnvSpec, make_vec_env
from distrl.nets import ActorCritic, ModelConfig
from distrl.policy_cache import readonly_tensor
from distrl.returns import gae
from distrl.types import Rollout

Weights = dict[str, np.ndarray]


class _Step(NamedTuple):
    """One vector-env step, [N, ...] per field; stacked to [T, N, ...] after sampling."""

    obs: np.ndarray
    actions: np.ndarray
    logp: np.ndarray
    dist_inputs: np.ndarray
    values: np.ndarray
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    valid: np.ndarray


class EnvRunner:
    """One vector env plus an inference copy of the policy."""

    def __init__(self, env: EnvSpec, num_envs: int, model: ModelConfig, gamma: float,
                 lambda_: float, seed: int):
        self.env_name = env if isinstance(env, str) else getattr(env, "__name__", repr(env))
        self.envs = make_vec_env(env, num_envs)
        self.num_envs = num_envs
        self.gamma, self.lambda_ = gamma, lambda_
        act_space = self.envs.single_action_space
        self.model = ActorCritic(self.envs.single_observation_space, act_space, model)
        self.model.requires_grad_(False)
        self.box = isinstance(act_space, gym.spaces.Box)
        self.low, self.high = (act_space.low, act_space.high) if self.box else (None, None)
        self.generator = torch.Generator().manual_seed(seed)
        self.obs, _ = self.envs.reset(seed=seed)
        self.prev_done = np.zeros(num_envs, dtype=bool)  # next step of this env is a reset step
        self.ep_return = np.zeros(num_envs, dtype=np.float64)
        self.ep_len = np.zeros(num_envs, dtype=np.int64)
        self.version = -1

    def spaces(self) -> tuple[gym.Space, gym.Space]:
        return self.envs.single_observation_space, self.envs.single_action_space

    def set_weights(self, weights: Weights, version: int) -> None:
        """Load weights unless this version is already loaded."""
        if version != self.version:
            # load_state_dict copies out of Ray's read-only shared memory.
            self.model.load_state_dict({k: readonly_tensor(v) for k, v in weights.items()})
            self.version = version

    def sample(self, steps_per_env: int, weights: Weights | None = None, version: int = -1,
               stop_early: Callable[[int], bool] | None = None) -> Rollout:
        """Exactly ``steps_per_env x num_envs`` valid samples, with GAE advantages.

        NEXT_STEP autoreset spends one step per finished episode on the reset; those
        steps carry no sample, so each env steps until it has ``steps_per_env`` valid
        ones. Advantages use every step taken (a later cut bootstraps less), then each
        env keeps its first ``steps_per_env`` valid samples.

        ``stop_early(k)`` is asked after every step, k being the fewest valid samples
        of any env so far; when it says yes, each env keeps its first k (DD-PPO's
        straggler preemption).
        """
        if weights is not None:
            self.set_weights(weights, version)
        steps: list[_Step] = []
        finished_returns: list[np.ndarray] = []
        finished_lengths: list[np.ndarray] = []
        valid_count = np.zeros(self.num_envs, dtype=np.int64)
        with torch.inference_mode():
            while (valid_count < steps_per_env).any():
                step = self._step(valid=~self.prev_done)
                steps.append(step)
                valid_count += step.valid
                done = step.terminated | step.truncated
                if done.any():
                    finished_returns.append(self.ep_return[done].copy())
                    finished_lengths.append(self.ep_len[done].copy())
                    self.ep_return[done] = 0.0
                    self.ep_len[done] = 0
                self.prev_done = done
                if stop_early is not None and stop_early(int(valid_count.min())):
                    steps_per_env = int(valid_count.min())
                    break
            _, last_values = self.model(torch.from_numpy(np.asarray(self.obs, dtype=np.float32)))
        stacked = _Step(*map(np.stack, zip(*steps, strict=True)))
        return self._postprocess(stacked, last_values.numpy(), steps_per_env,
                                 finished_returns, finished_lengths)

    def _step(self, valid: np.ndarray) -> _Step:
        obs = np.asarray(self.obs, dtype=np.float32)
        dist_inputs, values = self.model(torch.from_numpy(obs))
        actions = self.model.dist.sample(dist_inputs, self.generator)
        logp = self.model.dist.log_prob(dist_inputs, actions)
        actions = actions.numpy()
        env_actions = np.clip(actions, self.low, self.high) if self.box else actions
        self.obs, rewards, terminated, truncated, _ = self.envs.step(env_actions)
        rewards = np.asarray(rewards, dtype=np.float32)
        self.ep_return += rewards * valid
        self.ep_len += valid
        return _Step(obs, actions, logp.numpy(), dist_inputs.numpy(), values.numpy(), rewards,
                     terminated, truncated, valid)

    def _postprocess(self, s: _Step, last_values: np.ndarray, steps_per_env: int,
                     returns: list[np.ndarray], lengths: list[np.ndarray]) -> Rollout:
        _check_finite(self.env_name, s.obs, s.rewards)
        values = np.concatenate([s.values, last_values[None]])
        adv, targets = gae(s.rewards, values, s.terminated, s.truncated, self.gamma, self.lambda_)
        # Row indices of each env's first steps_per_env valid steps (stable sort keeps time order).
        rows = np.argsort(~s.valid, axis=0, kind="stable")[:steps_per_env]
        cols = np.broadcast_to(np.arange(self.num_envs), rows.shape)

        def take(x: np.ndarray) -> np.ndarray:
            picked = x[rows, cols]
            return picked.reshape(-1, *picked.shape[2:])

        return Rollout(
            obs=take(s.obs), actions=take(s.actions), logp=take(s.logp),
            dist_inputs=take(s.dist_inputs), values=take(s.values),
            advantages=take(adv), value_targets=take(targets),
            episode_returns=np.concatenate(returns) if returns else np.zeros(0),
            episode_lengths=np.concatenate(lengths) if lengths else np.zeros(0, dtype=np.int64),
            env_steps=int(s.rewards.size), weights_version=self.version,
        )

    def get_state(self) -> bytes | None:
        """Everything needed to continue sampling exactly where this runner is, or None
        when the env cannot be pickled (then a resume starts fresh episodes)."""
        try:
            return cloudpickle.dumps((self.envs, self.obs, self.prev_done, self.ep_return,
                                      self.ep_len, self.generator.get_state()))
        except (pickle.PicklingError, TypeError, AttributeError):  # a process, socket, ...
            return None

    def set_state(self, state: bytes | None) -> None:
        if state is None:
            return
        self.envs.close()
        (self.envs, self.obs, self.prev_done, self.ep_return, self.ep_len,
         gen_state) = pickle.loads(state)
        self.generator.set_state(gen_state)

    def close(self) -> None:
        self.envs.close()


def _check_finite(env_name: str, obs: np.ndarray, rewards: np.ndarray) -> None:
    for what, x in (("observation", obs), ("reward", rewards)):
        bad = ~np.isfinite(x.reshape(x.shape[0], x.shape[1], -1)).all(-1)
        if bad.any():
            t, i = np.argwhere(bad)[0]
            raise ValueError(
                f"env {env_name!r} (sub-env {i}) returned a non-finite {what} ({x[t, i]}) "
                f"{t} steps into a sample call. Fix the env, or wrap it to clip or reject "
                "such values; training on NaN/inf would silently corrupt the policy."
            )


class LocalRunnerGroup:
    """The in-process twin of runtime.ray_runners.RayRunnerGroup: one runner, no Ray."""

    def __init__(self, runner: EnvRunner):
        self.runner = runner
        self.restarts = [0]

    def sample(self, weights: Weights, version: int, steps_per_env: int) -> list[Rollout]:
        return [self.runner.sample(steps_per_env, weights, version)]

    def get_states(self) -> list[bytes]:
        return [self.runner.get_state()]

    def set_states(self, states: list[bytes]) -> None:
        self.runner.set_state(states[0])

    def close(self) -> None:
        self.runner.close()


def seed_for(seed: int, index: int, restart: int) -> int:
    """Distinct, reproducible seeds per (run seed, runner, restart)."""
    return int(np.random.SeedSequence([seed, index, restart]).generate_state(1)[0])
