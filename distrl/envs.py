"""Environment construction: gymnasium vector envs from an id or a factory."""

from __future__ import annotations

import difflib
from collections.abc import Callable

import gymnasium as gym

EnvSpec = str | Callable[[], gym.Env]
"""A registered gymnasium id ("CartPole-v1") or a zero-argument factory returning an Env."""


def check_env_id(env: EnvSpec) -> None:
    """Raise ValueError for an unregistered id, suggesting the closest registered ids."""
    if not isinstance(env, str) or env in gym.registry:
        return
    close = difflib.get_close_matches(env, list(gym.registry), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown env id {env!r}: it is not registered with gymnasium.{hint} "
        "Pass a registered id (see gymnasium.pprint_registry()) or a factory returning an Env."
    )


def make_vec_env(env: EnvSpec, num_envs: int) -> gym.vector.VectorEnv:
    """A vector env with NEXT_STEP autoreset (gymnasium's default; see returns.py).

    Envs that register a native vector implementation (CartPole's is plain numpy over
    all sub-envs) use it: one vectorised step instead of N Python steps. Others run
    in-process (SyncVectorEnv): on small envs, subprocesses (AsyncVectorEnv) cost more in
    pickling and wake-ups than they save, and parallelism comes from env runners instead.
    """
    check_env_id(env)
    if isinstance(env, str):
        spec = gym.spec(env)
        mode = "vector_entry_point" if spec.vector_entry_point is not None else "sync"
        vec = gym.make_vec(env, num_envs=num_envs, vectorization_mode=mode)
    else:
        vec = gym.vector.SyncVectorEnv([env] * num_envs)
    check_next_step_autoreset(vec, env)
    return vec


def check_next_step_autoreset(vec: gym.vector.VectorEnv, env: EnvSpec) -> None:
    """Samplers rely on NEXT_STEP autoreset (returns.py): refuse any other mode."""
    mode = vec.metadata.get("autoreset_mode", gym.vector.AutoresetMode.NEXT_STEP)
    if mode != gym.vector.AutoresetMode.NEXT_STEP:
        vec.close()
        raise ValueError(
            f"env {env_name(env)!r} makes a vector env with autoreset mode {mode}; distrl "
            "needs NEXT_STEP (gymnasium's default). Register the env's vector entry point "
            "with autoreset_mode=AutoresetMode.NEXT_STEP."
        )


def env_name(env: EnvSpec) -> str:
    """A readable name: the id, or the factory's module:qualname."""
    if isinstance(env, str):
        return env
    qualname = getattr(env, "__qualname__", None)
    return f"{env.__module__}:{qualname}" if qualname else repr(env)


def env_spaces(env: EnvSpec) -> tuple[gym.Space, gym.Space]:
    """(single observation space, single action space) of one sub-env."""
    vec = make_vec_env(env, 1)
    try:
        return vec.single_observation_space, vec.single_action_space
    finally:
        vec.close()
