"""Evaluate a saved policy: greedy actions, whole episodes, mean return.

Reads only the checkpoint's weights-only parts (policy/ and run/): nothing is
unpickled, so a downloaded checkpoint is safe to evaluate.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from distrl.checkpoint import Checkpoint, space_from_json
from distrl.config import from_json
from distrl.envs import EnvSpec, make_vec_env
from distrl.nets import ActorCritic, ModelConfig
from distrl.sampling import env_action_fn

MAX_PARALLEL = 16


def evaluate(checkpoint: str | Path, episodes: int = 10, seed: int = 0,
             env: EnvSpec | None = None) -> list[float]:
    """Returns of ``episodes`` greedy episodes (argmax / Gaussian mean) of a checkpoint.

    Each sub-env plays exactly one episode, so short episodes are not over-counted.
    ``env`` overrides the env saved in the checkpoint (needed when it was a factory).
    """
    if episodes <= 0:
        raise ValueError(f"`episodes` ({episodes}) must be > 0.")
    ckpt = Checkpoint(checkpoint)
    model = load_policy(ckpt)
    env = saved_env(ckpt) if env is None else env
    returns: list[float] = []
    while len(returns) < episodes:
        n = min(MAX_PARALLEL, episodes - len(returns))
        returns += _play(model, env, n, seed + len(returns))
    return returns


def load_policy(ckpt: Checkpoint) -> ActorCritic:
    """The checkpoint's policy network, from JSON and tensors only."""
    spec = ckpt.json("policy", "policy.json")
    if spec["builder"] != "actor_critic":
        raise ValueError(f"cannot evaluate a {spec['builder']!r} policy yet")
    model = ActorCritic(space_from_json(spec["obs_space"]), space_from_json(spec["act_space"]),
                        from_json(ModelConfig, spec["model"]))
    model.load_state_dict(ckpt.tensors("policy", "weights.pt"))
    return model.requires_grad_(False)


def saved_env(ckpt: Checkpoint) -> EnvSpec:
    run = ckpt.json("run", "config.json")["run"]
    if run["env"] is None:
        raise ValueError(
            f"the run trained on a factory env ({run['env_name']}), which only the "
            "trusted resume state holds; pass it: evaluate(..., env=<factory>)."
        )
    return run["env"]


def _play(model: ActorCritic, env: EnvSpec, n: int, seed: int) -> list[float]:
    envs = make_vec_env(env, n)
    to_env_action = env_action_fn(envs.single_action_space)
    obs, _ = envs.reset(seed=seed)
    total = np.zeros(n)
    running = np.ones(n, dtype=bool)
    with torch.inference_mode():
        while running.any():
            dist_inputs, _ = model(torch.as_tensor(np.asarray(obs, dtype=np.float32)))
            actions = model.dist.greedy(dist_inputs).numpy()
            obs, rewards, terminated, truncated, _ = envs.step(to_env_action(actions))
            total += np.where(running, rewards, 0.0)
            running &= ~(terminated | truncated)
    envs.close()
    return total.tolist()
