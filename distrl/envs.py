"""Environment construction: gymnasium vector envs from an id, a "module:name" string
or a factory, with keyword arguments (env_config)."""

from __future__ import annotations

import difflib
import functools
import importlib
import socket
from collections.abc import Callable
from typing import Any

import gymnasium as gym

EnvSpec = str | Callable[..., gym.Env]
"""A registered gymnasium id ("CartPole-v1"); "module:EnvId" (gymnasium's convention: the
module registers EnvId when imported) or "module:callable" (a factory or an Env class),
which work from the CLI and travel to every Ray node as a string; or, from Python, a
factory returning an Env. env_config is passed to gym.make or the factory as kwargs."""


def resolve_env(env: EnvSpec) -> str | Callable[..., gym.Env]:
    """A registered id or a callable; "module:name" imports the module first (on whichever
    process makes the env: the driver, or an actor on any Ray node)."""
    if not isinstance(env, str) or ":" not in env:
        return env
    module_name, name = env.split(":", 1)
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(
            f"env {env!r}: cannot import module {module_name!r} on {socket.gethostname()} "
            f"({err}). Install it, or put its directory on PYTHONPATH, on the driver and on "
            "every Ray node."
        ) from None
    if name in gym.registry:
        return name
    factory = getattr(module, name, None)
    if callable(factory):
        return factory
    raise ValueError(f"env {env!r}: module {module_name!r} registers no env id {name!r} with "
                     f"gymnasium and has no callable {name!r}.")


def check_env_id(env: EnvSpec) -> None:
    """Raise ValueError for an unregistered id, suggesting the closest registered ids."""
    env = resolve_env(env)
    if not isinstance(env, str) or env in gym.registry:
        return
    close = difflib.get_close_matches(env, list(gym.registry), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown env id {env!r}: it is not registered with gymnasium.{hint} "
        "Pass a registered id (see gymnasium.pprint_registry()) or a factory returning an Env."
    )


def make_vec_env(env: EnvSpec, num_envs: int,
                 env_config: dict[str, Any] | None = None) -> gym.vector.VectorEnv:
    """A vector env with NEXT_STEP autoreset (gymnasium's default; see returns.py).

    Envs that register a native vector implementation (CartPole's is plain numpy over
    all sub-envs) use it: one vectorised step instead of N Python steps. Others run
    in-process (SyncVectorEnv): on small envs, subprocesses (AsyncVectorEnv) cost more in
    pickling and wake-ups than they save, and parallelism comes from env runners instead.
    """
    check_env_id(env)
    maker, kwargs = resolve_env(env), env_config or {}
    if isinstance(maker, str):
        spec = gym.spec(maker)
        mode = "vector_entry_point" if spec.vector_entry_point is not None else "sync"
        vec = gym.make_vec(maker, num_envs=num_envs, vectorization_mode=mode, **kwargs)
    else:
        vec = gym.vector.SyncVectorEnv([functools.partial(maker, **kwargs)] * num_envs)
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


def env_spaces(env: EnvSpec, env_config: dict[str, Any] | None = None
               ) -> tuple[gym.Space, gym.Space]:
    """(single observation space, single action space) of one sub-env."""
    vec = make_vec_env(env, 1, env_config)
    try:
        return vec.single_observation_space, vec.single_action_space
    finally:
        vec.close()
