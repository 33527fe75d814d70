"""Environment construction: gymnasium vector envs from an id, a "module:name" string
or a factory, with keyword arguments (env_config)."""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib
import inspect
import socket
import sys
from collections.abc import Callable, Iterator
from typing import Any, Literal

import gymnasium as gym
import numpy as np

from distrl.envs.async_vec import AsyncEnvs, user_errors
from distrl.envs.envpool_vec import EnvPoolVector, is_envpool
from distrl.envs.errors import EnvErrors
from distrl.envs.thread_vec import ThreadedVectorEnv

EnvSpec = str | Callable[..., gym.Env]
"""A registered gymnasium id ("CartPole-v1"); "module:EnvId" (gymnasium's convention: the
module registers EnvId when imported) or "module:callable" (a factory or an Env class),
which work from the CLI and travel to every Ray node as a string; or, from Python, a
factory returning an Env. env_config is passed to gym.make or the factory as kwargs."""


VectorMode = Literal["auto", "sync", "threads", "async"]
"""How sub-envs are stepped; BACKENDS says by what."""

SubEnvs = list[Callable[[], gym.Env]]
BACKENDS: dict[str, Callable[[SubEnvs, str], gym.vector.VectorEnv]] = {
    # in process, one after another
    "sync": lambda makes, name: gym.vector.SyncVectorEnv(makes),
    # in process, a thread a core: for envs that release the GIL (MuJoCo's)
    "threads": lambda makes, name: ThreadedVectorEnv(makes),
    # gymnasium's AsyncVectorEnv, a subprocess a sub-env; a user's error is one line
    "async": lambda makes, name: AsyncEnvs([functools.partial(user_errors, m, name)
                                            for m in makes]),
}
"""vector_mode -> the vector env its sub-envs are stepped in: the one table (a new backend
is an entry here and its file). "auto" is "sync", except for a gymnasium id that registers
a native vector implementation (CartPole's numpy one: one step for all sub-envs). An
``envpool:`` env is one EnvPool in any mode (for "async", core.sampling.DoubleBuffered
steps two of half size in turns)."""

ATARI_EXTRA = "pip install 'distrl[atari]'"
FRAME_STACK = 4


def resolve_env(env: EnvSpec) -> str | Callable[..., gym.Env]:
    """A registered id or a callable; "module:name" imports the module first (on whichever
    process makes the env: the driver, or an actor on any Ray node); "ALE/..." registers
    ale-py's Atari envs; "envpool:..." stays as it is (envs/envpool_vec.py)."""
    if is_atari(env):
        _register_atari()
    if not isinstance(env, str) or ":" not in env or is_envpool(env):
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


def is_atari(env: EnvSpec) -> bool:
    return isinstance(env, str) and env.startswith("ALE/")


def _register_atari() -> None:
    try:
        import ale_py
    except ImportError:
        raise ValueError(f"Atari envs need ale-py (ROMs included): {ATARI_EXTRA}") from None
    gym.register_envs(ale_py)


def make_atari(env_id: str, clip_rewards: bool = True, **kwargs: Any) -> gym.Env:
    """DeepMind's preprocessing (Mnih et al. 2015, Machado et al. 2018) with gymnasium's
    wrappers: up to 30 no-op starts, frame skip 4 with a max over the last two frames,
    84x84 grey, 4 stacked frames (uint8, (4, 84, 84)); v5's sticky actions (repeat
    probability 0.25) stay unless ``kwargs`` (env_config) set repeat_action_probability.
    ``clip_rewards``: see clip_rewards_keep_score (off for evaluation)."""
    _register_atari()
    env = gym.make(env_id, frameskip=1, **kwargs)  # AtariPreprocessing does the skipping
    env = gym.wrappers.AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84,
                                          grayscale_obs=True, scale_obs=False)
    env = gym.wrappers.FrameStackObservation(env, FRAME_STACK)
    return clip_rewards_keep_score(env) if clip_rewards else env


def clip_rewards_keep_score(env: gym.Env) -> gym.Env:
    """Rewards clipped to their sign for learning (DQN's recipe: one learning rate fits
    every game's reward scale), with RecordEpisodeStatistics below the clipping: its
    info["episode"]["r"] is the game's score, which sampling.EnvLoop reports as the
    episode return instead of the sum of the clipped rewards."""
    env = gym.wrappers.RecordEpisodeStatistics(env)
    return gym.wrappers.TransformReward(env, lambda r: float(np.sign(r)))


def check_env_id(env: EnvSpec) -> None:
    """Raise ValueError for an unregistered id, suggesting the closest registered ids."""
    env = resolve_env(env)
    if not isinstance(env, str) or env in gym.registry or is_envpool(env):
        return  # EnvPool's own task list is checked as the pool is made
    close = difflib.get_close_matches(env, list(gym.registry), n=3, cutoff=0.6)
    hint = f" Did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    raise ValueError(
        f"unknown env id {env!r}: it is not registered with gymnasium.{hint} "
        "Pass a registered id (see gymnasium.pprint_registry()) or a factory returning an Env."
    )


@contextlib.contextmanager
def env_config_checked(env: Any, env_config: dict[str, Any]) -> Iterator[None]:
    """Making ``env`` with ``env_config`` as its keyword arguments: a key it does not
    take becomes one line naming the env, the key and the keys it takes, not a TypeError
    from inside its constructor (Python names the first such key only)."""
    try:
        yield
    except TypeError as err:
        keys = [k for k in env_config if f"keyword argument {k!r}" in str(err)]
        if not keys:
            raise
        takes = accepted_keys(env)
        takes = f"; it takes {', '.join(takes)}" if takes else ""
        raise ValueError(f"env {env_name(env)!r} does not take the env_config key "
                         f"{keys[0]!r} (given: {sorted(env_config)}{takes}); remove it "
                         "from --env-config or fix its name.") from None


def accepted_keys(env: Any) -> list[str] | None:
    """The keyword arguments ``env``'s constructor or factory names (a gymnasium id's
    entry point), or None when they cannot be told (no signature, or ``**kwargs``)."""
    try:
        maker = resolve_env(env)
        if isinstance(maker, str):
            entry = gym.spec(maker).entry_point
            maker = entry if callable(entry) else gym.envs.registration.load_env_creator(entry)
        params = inspect.signature(maker).parameters.values()
    except Exception:  # a game spec, a builtin: nothing to list
        return None
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return None
    return sorted(p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def make_vec_env(env: EnvSpec, num_envs: int, env_config: dict[str, Any] | None = None,
                 clip_rewards: bool = True, max_episode_steps: int | None = None,
                 vector_mode: VectorMode = "auto") -> gym.vector.VectorEnv:
    """A vector env with NEXT_STEP autoreset (gymnasium's default; see returns.py).

    Envs that register a native vector implementation (CartPole's is plain numpy over
    all sub-envs) use it: one vectorised step instead of N Python steps. Others run
    in-process (SyncVectorEnv): on small envs, subprocesses (AsyncVectorEnv) cost more in
    pickling and wake-ups than they save, and parallelism comes from env runners instead.
    "ALE/..." ids get make_atari's preprocessing (``clip_rewards`` for learning; off
    for evaluation). ``max_episode_steps``: every episode is truncated after that many
    steps (gymnasium's TimeLimit). An error raised in the user's env is an EnvError.
    ``vector_mode="async"`` steps each sub-env in a subprocess (VectorMode), for an env
    whose own stepping is the cost; its errors are EnvErrors too; ``"threads"`` steps
    them in process on one thread a core, for an env that releases the GIL (MuJoCo's).
    An ``envpool:`` env is one pool in any mode (for "async", sampling.DoubleBuffered
    makes two of half size).
    """
    try:
        with EnvErrors(env_name(env)), env_config_checked(env, env_config or {}):
            check_env_id(env)
            vec = _make_vec(env, num_envs, env_config or {}, clip_rewards, max_episode_steps,
                            vector_mode)
    except (gym.error.DependencyNotInstalled, ImportError) as err:
        raise ValueError(f"env {env_name(env)!r} needs a package that is not installed: "
                         f"{_install_hint(env)} ({err})") from None
    check_next_step_autoreset(vec, env)
    return vec


def _install_hint(env: EnvSpec) -> str:
    """Which extra brings a registered env's dependencies (MuJoCo's need mujoco and,
    for rendering, imageio: gymnasium's mujoco extra has both)."""
    entry = str(gym.spec(env).entry_point) if isinstance(env, str) and env in gym.registry else ""
    if "mujoco" in entry:
        return "pip install 'distrl[mujoco]'"
    return ATARI_EXTRA if is_atari(env) else "install the package it names"


def _make_vec(env: EnvSpec, num_envs: int, kwargs: dict[str, Any], clip_rewards: bool,
              max_episode_steps: int | None, vector_mode: VectorMode = "auto"
              ) -> gym.vector.VectorEnv:
    if is_envpool(env):
        return EnvPoolVector(env, num_envs, clip_rewards, max_episode_steps, **kwargs)
    maker = resolve_env(env)
    if isinstance(maker, str) and not is_atari(env):
        if max_episode_steps is not None:  # gym.make's (and vector entry points') own
            kwargs = {**kwargs, "max_episode_steps": max_episode_steps}
        if vector_mode == "auto" and gym.spec(maker).vector_entry_point is not None:
            return gym.make_vec(maker, num_envs=num_envs, **kwargs,
                                vectorization_mode="vector_entry_point")
        make = functools.partial(gym.make, maker, **kwargs)
    else:
        make = (functools.partial(make_atari, env, clip_rewards=clip_rewards, **kwargs)
                if is_atari(env) else functools.partial(maker, **kwargs))
        make = functools.partial(time_limited, make, max_episode_steps)
    mode = "sync" if vector_mode == "auto" else vector_mode
    return BACKENDS[mode]([make] * num_envs, env_name(env))


def time_limited(make: Callable[[], gym.Env], max_episode_steps: int | None) -> gym.Env:
    """``make()``, truncated after ``max_episode_steps`` steps when given (Atari's count
    the agent's steps, after frame skipping)."""
    env = make()
    return env if max_episode_steps is None else gym.wrappers.TimeLimit(env, max_episode_steps)


DEFAULT_MAX_EPISODE_STEPS = 10_000
"""Where the episodes of an env that declares no step limit are truncated when none is
given: an episode that never ends would hold evaluation (and a runner's stats) forever."""


def episode_limit(env: EnvSpec, env_config: dict[str, Any],
                  max_episode_steps: int | None) -> int | None:
    """The step limit a run or evaluation applies: ``max_episode_steps`` when given; None
    when the env limits its own episodes (a gymnasium id's registration, a TimeLimit in
    what a factory returns, Atari's and EnvPool's own); else DEFAULT_MAX_EPISODE_STEPS,
    said in one line on stderr."""
    if (max_episode_steps is not None or is_atari(env) or is_envpool(env)
            or "max_episode_steps" in env_config):
        return max_episode_steps
    maker = resolve_env(env)
    if isinstance(maker, str):
        if gym.spec(maker).max_episode_steps is not None:
            return None
    elif _has_time_limit(maker, env, env_config):
        return None
    sys.stderr.write(f"distrl: env {env_name(env)!r} declares no step limit: its episodes are "
                     f"truncated after {DEFAULT_MAX_EPISODE_STEPS:,} steps (--max-episode-steps "
                     "N, RunConfig.max_episode_steps, to change).\n")
    return DEFAULT_MAX_EPISODE_STEPS


def _has_time_limit(maker: Callable[..., gym.Env], env: EnvSpec,
                    env_config: dict[str, Any]) -> bool:
    with EnvErrors(env_name(env)), env_config_checked(env, env_config):
        made = maker(**env_config)
    layer, limited = made, False
    while layer is not None and not limited:
        limited = (isinstance(layer, gym.wrappers.TimeLimit)
                   or getattr(getattr(layer, "spec", None), "max_episode_steps", None))
        layer = layer.env if isinstance(layer, gym.Wrapper) else None
    made.close()
    return limited


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
