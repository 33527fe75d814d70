"""train_apex: Ape-X DQN. With num_workers >= 1, actors, replay shards and a learner
thread run concurrently on Ray (apex/remote.py); with num_workers=0 one process
alternates acting, storing and learning (prioritized double/dueling n-step DQN).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from distrl.apex.config import ApexConfig
from distrl.apex.dqn import epsilon_ladder, low_epsilon_workers
from distrl.apex.roles import (
    SHARD_ID_SPAN,
    ApexActor,
    ApexEngine,
    DQNLearner,
    LocalApex,
    ReplayShard,
    frame_stack,
)
from distrl.core.callbacks import Callbacks
from distrl.core.config import RunConfig
from distrl.core.loop import (
    Closures,
    drive,
    learner_device,
    max_env_steps,
    policy_files,
    save_run,
    start_run,
)
from distrl.core.sampling import seed_for
from distrl.envs.make import env_spaces


def train_apex(config: ApexConfig | None = None, run: RunConfig | None = None, *,
               callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Train Ape-X DQN until a stop condition holds; returns the final metrics and the
    checkpoint path. Training episodes are reported from the third of actors with the
    lowest epsilon. ``callbacks``: your functions, called between iterations
    (distrl.Callbacks)."""
    start = start_run("apex", config or ApexConfig(), run or RunConfig())
    config, run = start.config, start.run
    obs_space, act_space = env_spaces(run.env, run.env_config)
    learner = DQNLearner(obs_space, act_space, config, learner_device(run.device))
    if start.ckpt is not None:
        learner.set_state({**start.ckpt.learner_state(),
                           "model": start.ckpt.policy_weights()})
    progress = start.progress()
    engine, ray_start_s = make_engine(config, run, learner, obs_space, progress.iteration)
    keep_replay = config.checkpoint_replay and config.num_workers == 0
    if keep_replay and start.ckpt is not None and "replay" in start.ckpt.manifest["components"]:
        engine.set_state(start.ckpt.replay_state())
        engine.actor.set_state(start.ckpt.runner_states()[0])

    def iterate() -> dict[str, Any]:
        updates0 = learner.updates
        # The last iteration stops at the run's budget, not at a full reporting period.
        left = max_env_steps(run) - progress.env_steps
        period = config.min_sample_timesteps_per_reporting
        out = engine.iterate(config.min_time_s_per_reporting if left > period else 0.0,
                             min(period, left))
        dt = out["time_s"]
        return {
            **progress.add(out["env_steps"], np.asarray(out["returns"]),
                           np.asarray(out["lengths"], dtype=np.int64)),
            "env/steps_per_s": out["env_steps"] / dt,
            "replay/samples_per_s": out["sampled"] / dt,
            "learner/updates_per_s": (learner.updates - updates0) / dt,
            "learner/trained_total": learner.trained,
            "learner/target_updates": learner.target_updates,
            **{f"learner/{k}": v for k, v in learner.last_metrics.items()},
            **{f"apex/epsilon/{i}": e for i, e in enumerate(engine.epsilons)},
            **engine.metrics(),
        }

    def save() -> Path:
        state = learner.get_state()
        policy = policy_files(state.pop("model"), obs_space, act_space, config.model,
                              builder="dueling_q_network" if config.dueling else "q_network")
        if not keep_replay:
            return save_run(start, progress, policy, state, [], {"stored": engine.stored})
        return save_run(start, progress, policy, state, [engine.actor.get_state()],
                        {"stored": engine.stored},
                        more={"replay": {"state.pt": engine.get_state()}})

    return drive(start, Closures(progress, iterate, save, engine.close, learner.snapshot,
                                 ray_start_s), callbacks)


def make_engine(config: ApexConfig, run: RunConfig, learner: DQNLearner, obs_space: gym.Space,
                resumed_at: int = 0) -> tuple[ApexEngine, float]:
    """The in-process loop (num_workers=0) or the Ray runtime, and Ray's start-up time.
    A run resumed at iteration ``resumed_at`` seeds its envs and shards anew (the replay
    and env states are not saved: the same seeds would replay the first episodes)."""
    resumed = (resumed_at,) if resumed_at else ()
    n = max(config.num_workers, 1)
    epsilons = epsilon_ladder(n if config.num_workers else config.num_envs_per_worker,
                              config.epsilon_base, config.epsilon_alpha)

    def actor_kwargs(i: int, restart: int) -> dict[str, Any]:
        eps = ([float(epsilons[i])] * config.num_envs_per_worker if config.num_workers
               else epsilons.tolist())
        return dict(env=run.env, num_envs=config.num_envs_per_worker, model=config.model,
                    dueling=config.dueling, epsilons=eps, gamma=config.gamma,
                    n_step=config.n_step, seed=seed_for(run.seed, i, restart, *resumed),
                    worker_side_prioritization=config.worker_side_prioritization,
                    env_config=run.env_config, max_episode_steps=run.max_episode_steps,
                    vector_mode=run.vector_mode)

    def shard_kwargs(s: int, restart: int) -> dict[str, Any]:
        return dict(capacity=config.shard_capacity, obs_shape=tuple(obs_space.shape),
                    obs_dtype=str(obs_space.dtype), frame_stack=frame_stack(obs_space),
                    alpha=config.prioritized_replay_alpha, eps=config.prioritized_replay_eps,
                    seed=seed_for(run.seed, 10_000 + s, restart, *resumed),
                    first_id=restart * SHARD_ID_SPAN)

    reporting = set(low_epsilon_workers(epsilons).tolist())  # actors, or in-process envs
    if config.num_workers == 0:
        engine = LocalApex(config, learner, ApexActor(**actor_kwargs(0, 0)),
                           ReplayShard(**shard_kwargs(0, 0)), reporting, epsilons.tolist())
        return engine, 0.0
    from distrl.apex.remote import ApexRuntime
    from distrl.runtime.cluster import init_ray

    ray_start_s = init_ray(run.address, config.num_workers * config.num_cpus_per_worker
                           + config.num_shards * config.num_cpus_per_replay_shard)
    engine = ApexRuntime(config, run, learner, actor_kwargs, shard_kwargs, reporting,
                         epsilons.tolist())
    return engine, ray_start_s

