"""train_ddppo: every worker samples and trains; the driver only starts them, counts,
logs and checkpoints. See docs/ddppo.md for when to choose it over train_ppo."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist

from distrl.core.callbacks import Callbacks
from distrl.core.config import RunConfig
from distrl.core.loop import Closures, Progress, drive, policy_files, save_run, start_run
from distrl.core.sampling import seed_for
from distrl.ddppo.config import DDPPOConfig
from distrl.envs.make import env_spaces
from distrl.models.recurrent import actor_critic
from distrl.store.policy_cache import readonly_tensor


def train_ddppo(config: DDPPOConfig | None = None, run: RunConfig | None = None, *,
                callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Train DD-PPO until a stop condition holds; returns the final metrics and checkpoint.

    With ``run.resume`` the configs come from the checkpoint (see train_ppo).
    ``callbacks``: your functions, called between iterations (distrl.Callbacks).
    """
    start = start_run("ddppo", config or DDPPOConfig(), run or RunConfig())
    config, run = start.config, start.run
    _check_deployment(config, run)
    obs_space, act_space = env_spaces(run.env, run.env_config)
    # The driver's copy: the initial weights every worker starts from, then rank 0's.
    model = actor_critic(obs_space, act_space, config.model)
    from distrl.ddppo.remote import DDPPOWorkerGroup
    from distrl.runtime.cluster import init_ray

    ray_start_s = init_ray(run.address, config.num_workers * config.num_cpus_per_worker)

    def kwargs(index: int, restart: int) -> dict[str, Any]:
        return dict(env=run.env, config=config, seed=seed_for(run.seed, index, restart),
                    env_config=run.env_config, max_episode_steps=run.max_episode_steps,
                    vector_mode=run.vector_mode)

    group = DDPPOWorkerGroup(kwargs, config, run)
    progress = start.progress()
    try:
        if start.ckpt is None:
            group.set_learner_state({"model": model.state_dict(), "optimizer": None})
        else:
            weights = start.ckpt.policy_weights()
            model.load_state_dict(weights)
            optimizer = start.ckpt.learner_state()["optimizer"]
            group.set_learner_state({"model": weights, "optimizer": optimizer})
            states = start.ckpt.runner_states()
            if len(states) == config.num_workers:
                group.set_states(states)
            else:
                print(f"distrl: resume: {len(states)} saved worker states for "
                      f"{config.num_workers} workers; the workers start fresh episodes",
                      flush=True)
    except BaseException:
        group.close()
        raise

    def iterate() -> dict[str, Any]:
        return _round(config, group, model, progress)

    def save() -> Path:
        state = group.learner_state()
        return save_run(start, progress,
                        policy_files(state["model"], obs_space, act_space, config.model),
                        {"optimizer": state["optimizer"]}, group.get_states())

    def policy() -> torch.nn.Module:
        if not config.keep_local_weights_in_sync:  # the driver's copy is stale: fetch rank 0's
            model.load_state_dict(group.learner_state()["model"])
        return model

    return drive(start, Closures(progress, iterate, save, group.close, policy, ray_start_s),
                 callbacks)


def _round(config: DDPPOConfig, group, model: torch.nn.Module, p: Progress) -> dict[str, Any]:
    t0 = time.perf_counter()
    lr, entropy_coeff = config.lr_at(p.env_steps), config.entropy_coeff_at(p.env_steps)
    results = group.run_round(p.iteration, p.env_steps, config.keep_local_weights_in_sync)
    wall = time.perf_counter() - t0
    if config.keep_local_weights_in_sync:
        model.load_state_dict({k: readonly_tensor(v) for k, v in results[0].weights.items()})
    env_steps = sum(r.env_steps for r in results)
    learner = {k: float(np.mean([r.learner[k] for r in results])) for k in results[0].learner}
    return {
        **p.add(env_steps, np.concatenate([r.episode_returns for r in results]),
                np.concatenate([r.episode_lengths for r in results])),
        "time/sample_s": max(r.sample_s for r in results),
        "time/learn_s": max(r.learn_s for r in results),
        "env/steps_per_s": env_steps / wall,
        **group.metrics(),
        **{f"learner/{k}": v for k, v in learner.items()},
        "learner/kl_coeff": 0.0,
        "learner/lr": lr,
        "learner/entropy_coeff": entropy_coeff,
        "learner/batch_size": sum(r.samples for r in results),
        "ddppo/preempted_steps": sum(r.preempted_samples for r in results),
        "ddppo/allreduce_s": float(np.mean([r.allreduce_s for r in results])),
        "ddppo/world_size": len(results),
    }


def _check_deployment(config: DDPPOConfig, run: RunConfig) -> None:
    if run.device == "cuda":
        raise ValueError(
            "DD-PPO's driver does no learning, so it gets no GPU (device='cuda'): give the "
            "workers GPUs with num_gpus_per_worker=1 (and backend='nccl')."
        )
    if config.backend == "mpi" and not dist.is_mpi_available():
        raise ValueError(
            "backend='mpi' needs a torch built with MPI (the pip wheels are not); use "
            "backend='gloo' (CPU) or 'nccl' (GPU workers)."
        )
    if config.backend == "nccl" and not dist.is_nccl_available():
        raise ValueError("backend='nccl' needs a CUDA build of torch; this one has no NCCL. "
                         "Use backend='gloo'.")
