"""train_appo: env runners sample without waiting; the learner in the driver consumes
fragments as they arrive, corrects their lag with V-trace and steps PPO's loss.

In process (num_env_runners=0, no Ray imported) one runner samples in a thread beside
the learner (appo/sampler.py); on Ray, actors do (appo/remote.py). An iteration is
one learner update on train_batch_size samples.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from distrl.appo.config import APPOConfig
from distrl.appo.loss import train_batch
from distrl.appo.sampler import Sampler, ThreadSampler
from distrl.core.callbacks import Callbacks
from distrl.core.config import RunConfig
from distrl.core.loop import (
    Closures,
    Progress,
    drive,
    learner_device,
    policy_files,
    save_run,
    start_run,
)
from distrl.envs.make import env_spaces
from distrl.models.filters import return_std
from distrl.ppo.env_runner import EnvRunner
from distrl.ppo.train import LearnerSide, restore_runners, runner_kwargs


def train_appo(config: APPOConfig | None = None, run: RunConfig | None = None, *,
               callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Train APPO until a stop condition holds; returns the final metrics and checkpoint
    path. Resume and ``callbacks`` as train_ppo."""
    start = start_run("appo", config or APPOConfig(), run or RunConfig())
    config, run = start.config, start.run
    device = learner_device(run.device)
    spaces = env_spaces(run.env, run.env_config) if config.num_env_runners else None
    sampler, ray_start_s = _make_sampler(config, run)
    try:
        obs_space, act_space = spaces or sampler.runner.spaces()
        side = LearnerSide.create(start, obs_space, act_space, device)
        model = side.learner.model
        progress = start.progress()
        if start.ckpt is not None:
            restore_runners(start, sampler)
            sampler.resume(start.ckpt.trusted("appo", "pending.pkl")["fragments"])
        sampler.publish(side.learner.weights(), progress.iteration)
    except BaseException:
        sampler.close()
        raise

    def iterate() -> dict[str, Any]:
        return _iteration(config, side, sampler, progress, device)

    def save() -> Path:
        pending = sampler.pause()  # runners idle: their states match the fragments kept
        try:
            return save_run(start, progress,
                            policy_files(model.state_dict(), obs_space, act_space, config.model),
                            side.learner_state(), sampler.get_states(), side.algo_state(),
                            {"appo": {"pending.pkl": {"fragments": pending}}})
        finally:
            sampler.resume(pending)

    return drive(start, Closures(progress, iterate, save, sampler.close, lambda: model,
                                 ray_start_s), callbacks)


def _iteration(config: APPOConfig, side: LearnerSide, sampler: Sampler, p: Progress,
               device: torch.device) -> dict[str, Any]:
    t0 = time.perf_counter()
    fragments = sampler.take(max(config.num_env_runners, 1))
    t1 = time.perf_counter()
    lag = float(np.mean([p.iteration - f.weights_version for f in fragments]))
    lr = config.lr_at(p.env_steps)
    side.learner.set_lr(lr)
    reward_std = return_std(side.returns)
    batch, rollout = train_batch(side.learner.model, fragments, config, device, reward_std)
    learned = side.update(config, batch, rollout, config.entropy_coeff_at(p.env_steps))
    out = p.add(rollout.env_steps, rollout.episode_returns, rollout.episode_lengths)
    if p.iteration % config.broadcast_interval == 0:
        sampler.publish(side.learner.weights(), p.iteration)
    t2 = time.perf_counter()
    return {
        **out,
        "time/wait_s": t1 - t0,
        "time/learn_s": t2 - t1,
        "env/steps_per_s": rollout.env_steps / (t2 - t0),
        **sampler.metrics(),
        **learned,
        "learner/policy_lag": lag,
        "learner/lr": lr,
        "learner/reward_std": reward_std,
    }


def _make_sampler(config: APPOConfig, run: RunConfig) -> tuple[Sampler, float]:
    kwargs = runner_kwargs(config, run)
    steps = config.fragment_length()
    if config.num_env_runners == 0:
        runner = EnvRunner(**kwargs(0, 0))
        return ThreadSampler(runner, steps, config.max_queued_fragments), 0.0
    from distrl.appo.remote import RaySampler
    from distrl.runtime.cluster import init_ray

    cpus = config.num_env_runners * config.num_cpus_per_env_runner
    ray_start_s = init_ray(run.address, cpus)
    sampler = RaySampler(kwargs, config.num_env_runners, config.num_cpus_per_env_runner, run,
                         steps, config.max_queued_fragments)
    return sampler, ray_start_s
