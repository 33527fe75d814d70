"""Evaluate a saved policy: greedy actions, whole episodes, mean return."""

from __future__ import annotations

from pathlib import Path

import cloudpickle
import gymnasium as gym
import numpy as np
import torch

from distrl.checkpoint import load_checkpoint
from distrl.envs import EnvSpec, make_vec_env
from distrl.nets import ActorCritic

MAX_PARALLEL = 16


def evaluate(checkpoint: str | Path, episodes: int = 10, seed: int = 0,
             env: EnvSpec | None = None) -> list[float]:
    """Returns of ``episodes`` greedy episodes (argmax / Gaussian mean) of a checkpoint.

    Each sub-env plays exactly one episode, so short episodes are not over-counted.
    ``env`` overrides the env saved in the checkpoint.
    """
    if episodes <= 0:
        raise ValueError(f"`episodes` ({episodes}) must be > 0.")
    ckpt = load_checkpoint(checkpoint)
    if env is None:
        factory = ckpt["env_factory"]
        env = cloudpickle.loads(factory) if factory else ckpt["run_config"].env
    returns: list[float] = []
    while len(returns) < episodes:
        n = min(MAX_PARALLEL, episodes - len(returns))
        returns += _play(ckpt, env, n, seed + len(returns))
    return returns


def _play(ckpt: dict, env: EnvSpec, n: int, seed: int) -> list[float]:
    envs = make_vec_env(env, n)
    model = ActorCritic(envs.single_observation_space, envs.single_action_space,
                        ckpt["config"].model)
    model.load_state_dict(ckpt["model"])
    space = envs.single_action_space
    obs, _ = envs.reset(seed=seed)
    total = np.zeros(n)
    running = np.ones(n, dtype=bool)
    with torch.inference_mode():
        while running.any():
            dist_inputs, _ = model(torch.as_tensor(np.asarray(obs, dtype=np.float32)))
            actions = model.dist.greedy(dist_inputs).numpy()
            if isinstance(space, gym.spaces.Box):
                actions = np.clip(actions, space.low, space.high)
            obs, rewards, terminated, truncated, _ = envs.step(actions)
            total += np.where(running, rewards, 0.0)
            running &= ~(terminated | truncated)
    envs.close()
    return total.tolist()
