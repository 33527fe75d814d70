"""train_apex: Ape-X DQN. With num_workers >= 1, actors, replay shards and a learner
thread run concurrently on Ray (runtime/apex.py); with num_workers=0 one process
alternates acting, storing and learning (prioritized double/dueling n-step DQN).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np

from distrl.algos.apex import ApexConfig
from distrl.algos.dqn import epsilon_ladder, low_epsilon_workers
from distrl.apex import ApexActor, DQNLearner, ReplayShard, frame_stack
from distrl.config import RunConfig
from distrl.env_runner import seed_for
from distrl.envs import env_spaces
from distrl.loop import drive, learner_device, policy_files, save_run, start_run


def train_apex(config: ApexConfig | None = None, run: RunConfig | None = None
               ) -> dict[str, Any]:
    """Train Ape-X DQN until a stop condition holds; returns the final metrics and the
    checkpoint path. Training episodes are reported from the third of actors with the
    lowest epsilon."""
    start = start_run("apex", config or ApexConfig(), run or RunConfig())
    config, run = start.config, start.run
    obs_space, act_space = env_spaces(run.env, run.env_config)
    learner = DQNLearner(obs_space, act_space, config, learner_device(run.device))
    if start.ckpt is not None:
        learner.set_state({**start.ckpt.tensors("learner", "state.pt"),
                           "model": start.ckpt.tensors("policy", "weights.pt")})
    progress = start.progress()
    engine, ray_start_s = make_engine(config, run, learner, obs_space)

    def iterate() -> dict[str, Any]:
        updates0 = learner.updates
        out = engine.iterate(config.min_time_s_per_reporting,
                             config.min_sample_timesteps_per_reporting)
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
        return save_run(start, progress, policy, state, [], {"stored": engine.stored})

    return drive(start, progress, iterate, save, engine.close, ray_start_s, learner.snapshot)


def make_engine(config: ApexConfig, run: RunConfig, learner: DQNLearner, obs_space: gym.Space):
    """The in-process loop (num_workers=0) or the Ray runtime, both with
    iterate(min_time_s, min_steps), metrics(), close() and ``epsilons``."""
    n = max(config.num_workers, 1)
    epsilons = epsilon_ladder(n if config.num_workers else config.num_envs_per_worker,
                              config.epsilon_base, config.epsilon_alpha)

    def actor_kwargs(i: int, restart: int) -> dict[str, Any]:
        eps = ([float(epsilons[i])] * config.num_envs_per_worker if config.num_workers
               else epsilons.tolist())
        return dict(env=run.env, num_envs=config.num_envs_per_worker, model=config.model,
                    dueling=config.dueling, epsilons=eps, gamma=config.gamma,
                    n_step=config.n_step, seed=seed_for(run.seed, i, restart),
                    worker_side_prioritization=config.worker_side_prioritization,
                    env_config=run.env_config)

    def shard_kwargs(s: int, restart: int) -> dict[str, Any]:
        return dict(capacity=config.shard_capacity, obs_shape=tuple(obs_space.shape),
                    obs_dtype=str(obs_space.dtype), frame_stack=frame_stack(obs_space),
                    alpha=config.prioritized_replay_alpha, eps=config.prioritized_replay_eps,
                    seed=seed_for(run.seed, 10_000 + s, restart))

    reporting = set(low_epsilon_workers(epsilons).tolist())  # actors, or in-process envs
    if config.num_workers == 0:
        engine = LocalApex(config, learner, ApexActor(**actor_kwargs(0, 0)),
                           ReplayShard(**shard_kwargs(0, 0)), reporting)
        engine.epsilons = epsilons.tolist()
        return engine, 0.0
    from distrl.runtime.apex import ApexRuntime
    from distrl.runtime.ray_runners import init_ray

    ray_start_s = init_ray(run.address, config.num_workers * config.num_cpus_per_worker)
    engine = ApexRuntime(config, run, learner, actor_kwargs, shard_kwargs, reporting)
    engine.epsilons = epsilons.tolist()
    return engine, ray_start_s


class LocalApex:
    """Act, store, learn in turn in this process; no Ray."""

    def __init__(self, config: ApexConfig, learner: DQNLearner, actor: ApexActor,
                 shard: ReplayShard, reporting: set[int]):
        self.config, self.learner, self.actor, self.shard = config, learner, actor, shard
        self.reporting = np.array(sorted(reporting))  # sub-envs whose episodes are reported
        self.since_sync = config.max_weight_sync_delay  # sync before the first fragment
        self.stored = 0
        self.weight_syncs = 0
        self.trained0 = learner.trained  # training_intensity counts from here

    def iterate(self, min_time_s: float, min_env_steps: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        out = {"env_steps": 0, "returns": [], "lengths": [], "sampled": 0}
        while (time.perf_counter() - t0 < min_time_s) or out["env_steps"] < min_env_steps:
            if self.since_sync >= self.config.max_weight_sync_delay:
                self.actor.set_weights(self.learner.weights(), self.learner.updates)
                self.since_sync = 0
                self.weight_syncs += 1
            fragment, priorities, stats = self.actor.collect(self.config.rollout_fragment_length)
            self.shard.add(fragment, priorities)
            self.stored += len(fragment)
            self.since_sync += stats["env_steps"]
            out["env_steps"] += stats["env_steps"]
            shown = np.isin(stats["episode_envs"], self.reporting)
            out["returns"].extend(stats["episode_returns"][shown].tolist())
            out["lengths"].extend(stats["episode_lengths"][shown].tolist())
            for _ in range(self._updates_due()):
                batch, indices, is_weights = self.shard.sample(
                    self.config.train_batch_size, self.config.prioritized_replay_beta)
                td_abs, _ = self.learner.update(batch, is_weights)
                self.shard.update_priorities(indices, td_abs)
                out["sampled"] += len(batch)
        out["time_s"] = time.perf_counter() - t0
        return out

    def _updates_due(self) -> int:
        if self.stored < self.config.learning_starts:
            return 0
        ratio = self.config.training_intensity
        if ratio is None:
            return 1
        due = ratio * self.stored - (self.learner.trained - self.trained0)
        return max(0, int(np.ceil(due / self.config.train_batch_size)))

    def metrics(self) -> dict[str, float]:
        stats = self.shard.stats()
        return {"replay/size": float(stats["size"]),
                "replay/bytes_per_transition": float(stats["bytes_per_transition"]),
                "learner/queue_size": 0.0, "apex/weight_syncs": float(self.weight_syncs)}

    def close(self) -> None:
        self.actor.close()
