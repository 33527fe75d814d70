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
from distrl.core.envs import env_spaces
from distrl.core.learner import Learner
from distrl.core.loop import (
    Closures,
    Progress,
    drive,
    learner_device,
    policy_files,
    save_run,
    start_run,
)
from distrl.models.filters import RunningStats, return_std, stats_from_json, stats_to_json
from distrl.models.recurrent import actor_critic
from distrl.ppo.env_runner import EnvRunner
from distrl.ppo.loss import ppo_update, update_kl_coeff
from distrl.ppo.train import restore, runner_kwargs


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
        model = actor_critic(obs_space, act_space, config.model).to(device)
        learner = Learner(model, config.lr_at(0), config.grad_clip)
        generator = torch.Generator().manual_seed(run.seed)
        progress = start.progress()
        kl_coeff = start.algo_state().get("kl_coeff", config.kl_coeff)
        returns = stats_from_json(start.algo_state().get("returns"))  # reward scaling
        if start.ckpt is not None:
            restore(start, learner, generator, sampler)
            sampler.resume(start.ckpt.trusted("appo", "pending.pkl")["fragments"])
        sampler.publish(learner.weights(), progress.iteration)
    except BaseException:
        sampler.close()
        raise

    def iterate() -> dict[str, Any]:
        nonlocal kl_coeff, returns
        metrics, kl_coeff, returns = _iteration(config, learner, sampler, progress, kl_coeff,
                                                returns, generator, device)
        return metrics

    def save() -> Path:
        pending = sampler.pause()  # runners idle: their states match the fragments kept
        try:
            return save_run(start, progress,
                            policy_files(model.state_dict(), obs_space, act_space, config.model),
                            {"optimizer": learner.get_state()["optimizer"],
                             "generator": generator.get_state()},
                            sampler.get_states(),
                            {"kl_coeff": kl_coeff, "returns": stats_to_json(returns)},
                            {"appo": {"pending.pkl": {"fragments": pending}}})
        finally:
            sampler.resume(pending)

    return drive(start, Closures(progress, iterate, save, sampler.close, lambda: model,
                                 ray_start_s), callbacks)


def _iteration(config: APPOConfig, learner: Learner, sampler: Sampler, p: Progress,
               kl_coeff: float, returns: RunningStats, generator: torch.Generator,
               device: torch.device) -> tuple[dict[str, Any], float, RunningStats]:
    t0 = time.perf_counter()
    fragments = sampler.take(max(config.num_env_runners, 1))
    t1 = time.perf_counter()
    lag = float(np.mean([p.iteration - f.weights_version for f in fragments]))
    learner.set_lr(config.lr_at(p.env_steps))
    entropy_coeff = config.entropy_coeff_at(p.env_steps)
    reward_std = return_std(returns)
    batch, rollout = train_batch(learner.model, fragments, config, device, reward_std)
    metrics = ppo_update(learner, batch, config, kl_coeff, entropy_coeff, generator)
    new_kl_coeff = (update_kl_coeff(kl_coeff, metrics["kl"], config.kl_target)
                    if config.use_kl_loss else kl_coeff)
    # After the update, as PPO: the batch was learned with the statistics before it.
    if "obs" in rollout.stats:
        learner.model.update_obs_filter(rollout.stats["obs"])
    if "returns" in rollout.stats:
        returns = returns.merge(rollout.stats["returns"])
    out = p.add(rollout.env_steps, rollout.episode_returns, rollout.episode_lengths)
    if p.iteration % config.broadcast_interval == 0:
        sampler.publish(learner.weights(), p.iteration)
    t2 = time.perf_counter()
    return {
        **out,
        "time/wait_s": t1 - t0,
        "time/learn_s": t2 - t1,
        "env/steps_per_s": rollout.env_steps / (t2 - t0),
        **sampler.metrics(),
        **{f"learner/{k}": v for k, v in metrics.items()},
        "learner/policy_lag": lag,
        "learner/kl_coeff": kl_coeff,
        "learner/lr": config.lr_at(p.env_steps),
        "learner/entropy_coeff": entropy_coeff,
        "learner/batch_size": len(batch),
        "learner/reward_std": reward_std,
    }, new_kl_coeff, returns


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
