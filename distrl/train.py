"""train_ppo: sample with env runners, update one learner in the driver, repeat.

The loop is the same in-process (num_env_runners=0, no Ray imported) and on Ray; only
the runner group differs.
"""

from __future__ import annotations

import dataclasses
import time
from collections import deque
from datetime import datetime
from pathlib import Path
from typing import Any

import cloudpickle
import numpy as np
import torch

from distrl.algos.ppo import PPOConfig, ppo_update, update_kl_coeff
from distrl.checkpoint import load_checkpoint, save_checkpoint
from distrl.config import RunConfig
from distrl.env_runner import EnvRunner, LocalRunnerGroup, seed_for
from distrl.envs import check_env_id, env_spaces
from distrl.metrics import MetricsLogger
from distrl.nets import ActorCritic
from distrl.types import PPOBatch, Rollout

WINDOW = 100  # episodes in env/episode_return_mean


@dataclasses.dataclass
class Progress:
    """Counters that a checkpoint carries across a resume."""

    kl_coeff: float
    iteration: int = 0
    env_steps: int = 0
    episodes: int = 0
    time_s: float = 0.0
    returns: deque = dataclasses.field(default_factory=lambda: deque(maxlen=WINDOW))
    lengths: deque = dataclasses.field(default_factory=lambda: deque(maxlen=WINDOW))

    def return_mean(self) -> float:
        return float(np.mean(self.returns)) if self.returns else float("nan")


def train_ppo(config: PPOConfig | None = None, run: RunConfig | None = None) -> dict[str, Any]:
    """Train PPO until a stop condition holds; returns the final metrics and checkpoint path."""
    config, run = config or PPOConfig(), run or RunConfig()
    ckpt = load_checkpoint(run.resume) if run.resume else None
    if ckpt is not None:
        config = ckpt["ppo_config"]  # a resumed run keeps its hyperparameters
    check_env_id(run.env)
    torch.set_num_threads(run.num_torch_threads)
    torch.manual_seed(run.seed)
    device = _device(run.device)
    runners, ray_start_s = _make_runners(config, run)
    obs_space, act_space = (runners.runner.spaces() if isinstance(runners, LocalRunnerGroup)
                            else env_spaces(run.env))
    model = ActorCritic(obs_space, act_space, config.model).to(device)
    # fused: one kernel for all parameters; on small nets the per-tensor loop dominates.
    opt = torch.optim.Adam(model.parameters(), lr=config.lr_at(0), eps=1e-5, fused=True)
    progress = Progress(kl_coeff=config.kl_coeff)
    generator = torch.Generator().manual_seed(run.seed)
    logdir = _logdir(run, ckpt)
    if ckpt is not None:
        progress = _restore(ckpt, model, opt, generator, runners)
    logger = MetricsLogger(logdir, run.progress)
    frag = config.fragment_length(run.num_env_runners, run.num_envs_per_env_runner)
    stopped_by = "max_env_steps"
    tick = time.perf_counter()
    metrics: dict[str, Any] = {}
    try:
        while True:
            try:
                metrics = _iteration(config, model, opt, runners, progress, generator, frag,
                                     device)
            except KeyboardInterrupt:  # Ctrl-C: keep what was learned, checkpoint below
                stopped_by = "interrupted"
                break
            # Wall time of the loop, logging and checkpoints included (not Ray's start-up).
            now = time.perf_counter()
            progress.time_s, tick = progress.time_s + now - tick, now
            metrics["time/total_s"] = progress.time_s
            logger.log(metrics)
            if run.checkpoint_every and progress.iteration % run.checkpoint_every == 0:
                _save(logdir, config, run, model, opt, generator, runners, progress)
            if run.stop_return is not None and progress.return_mean() >= run.stop_return:
                stopped_by = "stop_return"
                break
            if progress.env_steps >= run.max_env_steps:
                break
        checkpoint = _save(logdir, config, run, model, opt, generator, runners, progress)
    finally:
        runners.close()
        logger.close()
    return {**metrics, "checkpoint": str(checkpoint), "logdir": str(logdir),
            "stopped_by": stopped_by, "ray_start_s": ray_start_s}


def _iteration(config: PPOConfig, model: ActorCritic, opt: torch.optim.Optimizer, runners,
               p: Progress, generator: torch.Generator, frag: int,
               device: torch.device) -> dict[str, Any]:
    t0 = time.perf_counter()
    weights = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    rollout = Rollout.concat(runners.sample(weights, p.iteration, frag))
    t1 = time.perf_counter()
    lr = config.lr_at(p.env_steps)
    entropy_coeff = config.entropy_coeff_at(p.env_steps)
    for group in opt.param_groups:
        group["lr"] = lr
    batch = PPOBatch.from_rollout(rollout, device)
    learner = ppo_update(model, opt, batch, config, p.kl_coeff, entropy_coeff, generator)
    kl_coeff_used = p.kl_coeff
    if config.use_kl_loss:
        p.kl_coeff = update_kl_coeff(p.kl_coeff, learner["kl"], config.kl_target)
    t2 = time.perf_counter()
    p.iteration += 1
    p.env_steps += rollout.env_steps
    p.episodes += len(rollout.episode_returns)
    p.returns.extend(rollout.episode_returns.tolist())
    p.lengths.extend(rollout.episode_lengths.tolist())
    return {
        "iteration": p.iteration,
        "time/sample_s": t1 - t0,
        "time/learn_s": t2 - t1,
        "env/steps_total": p.env_steps,
        "env/episodes_total": p.episodes,
        "env/episode_return_mean": p.return_mean(),
        "env/episode_len_mean": float(np.mean(p.lengths)) if p.lengths else float("nan"),
        "env/steps_per_s": rollout.env_steps / (t2 - t0),
        "env/runner_restarts": sum(runners.restarts),
        **{f"learner/{k}": v for k, v in learner.items()},
        "learner/kl_coeff": kl_coeff_used,
        "learner/lr": lr,
        "learner/entropy_coeff": entropy_coeff,
        "learner/batch_size": len(batch),
    }


def _make_runners(config: PPOConfig, run: RunConfig):
    def kwargs(index: int, restart: int) -> dict[str, Any]:
        return dict(env=run.env, num_envs=run.num_envs_per_env_runner, model=config.model,
                    gamma=config.gamma, lambda_=config.lambda_ if config.use_gae else 1.0,
                    seed=seed_for(run.seed, index, restart))

    if run.num_env_runners == 0:
        return LocalRunnerGroup(EnvRunner(**kwargs(0, 0))), 0.0
    from distrl.runtime.ray_runners import RayRunnerGroup, init_ray

    ray_start_s = init_ray(run.address, run.num_env_runners * run.num_cpus_per_env_runner)
    group = RayRunnerGroup(kwargs, run.num_env_runners, run.num_cpus_per_env_runner)
    return group, ray_start_s


def _device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch sees no CUDA device; use device='cpu' or 'auto'.")
    return torch.device(name)


def _logdir(run: RunConfig, ckpt: dict[str, Any] | None) -> Path:
    if run.logdir is not None:
        return Path(run.logdir)
    if ckpt is not None:
        return Path(ckpt["logdir"])
    name = run.env if isinstance(run.env, str) else "custom"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("runs") / f"ppo_{name.replace('/', '_')}_{stamp}"


def _save(logdir: Path, config: PPOConfig, run: RunConfig, model: ActorCritic,
          opt: torch.optim.Optimizer, generator: torch.Generator, runners,
          progress: Progress) -> Path:
    env_factory = None if isinstance(run.env, str) else cloudpickle.dumps(run.env)
    payload = {
        "algo": "ppo",
        "ppo_config": config,
        "run_config": dataclasses.replace(run, env="<factory>") if env_factory else run,
        "env_factory": env_factory,
        "logdir": str(logdir),
        "model": model.state_dict(),
        "optimizer": opt.state_dict(),
        "progress": progress,
        "generator": generator.get_state(),
        "runner_states": runners.get_states(),
    }
    return save_checkpoint(logdir / "checkpoint", payload)


def _restore(ckpt: dict[str, Any], model: ActorCritic, opt: torch.optim.Optimizer,
             generator: torch.Generator, runners) -> Progress:
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    generator.set_state(ckpt["generator"])
    states = ckpt["runner_states"]
    if len(states) == len(runners.restarts):
        runners.set_states(states)
    else:
        print(f"distrl: checkpoint has {len(states)} env runner states but this run has "
              f"{len(runners.restarts)} runners; envs start fresh (resume is not exact).")
    return ckpt["progress"]
