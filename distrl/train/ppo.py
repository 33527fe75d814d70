"""train_ppo: sample with env runners, update one learner in the driver, repeat.

The loop is the same in-process (num_env_runners=0, no Ray imported) and on Ray; only
the runner group differs.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from distrl.algos.ppo import PPOConfig, ppo_update, update_kl_coeff
from distrl.checkpoint import load_checkpoint
from distrl.config import RunConfig
from distrl.env_runner import EnvRunner, LocalRunnerGroup, seed_for
from distrl.envs import check_env_id, env_spaces
from distrl.loop import Progress, drive, make_logdir, save_run
from distrl.metrics import MetricsLogger
from distrl.nets import ActorCritic
from distrl.types import PPOBatch, Rollout


def train_ppo(config: PPOConfig | None = None, run: RunConfig | None = None) -> dict[str, Any]:
    """Train PPO until a stop condition holds; returns the final metrics and checkpoint path."""
    config, run = config or PPOConfig(), run or RunConfig()
    ckpt = load_checkpoint(run.resume) if run.resume else None
    if ckpt is not None:
        config = ckpt["config"]  # a resumed run keeps its hyperparameters and runner count
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
    logdir = make_logdir("ppo", run, ckpt)
    if ckpt is not None:
        progress = _restore(ckpt, model, opt, generator, runners)
    logger = MetricsLogger(logdir, run.progress)

    def iterate() -> dict[str, Any]:
        return _iteration(config, model, opt, runners, progress, generator, device)

    def save() -> Path:
        return save_run(logdir, "ppo", config, run, model=model.state_dict(),
                        optimizer=opt.state_dict(), progress=progress,
                        generator=generator.get_state(), runner_states=runners.get_states())

    return drive(run, logdir, progress, logger, iterate, save, runners.close, ray_start_s)


def _iteration(config: PPOConfig, model: ActorCritic, opt: torch.optim.Optimizer, runners,
               p: Progress, generator: torch.Generator, device: torch.device) -> dict[str, Any]:
    t0 = time.perf_counter()
    weights = {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}
    rollout = Rollout.concat(runners.sample(weights, p.iteration, config.fragment_length()))
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
    return {
        **p.add(rollout.env_steps, rollout.episode_returns, rollout.episode_lengths),
        "time/sample_s": t1 - t0,
        "time/learn_s": t2 - t1,
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
        return dict(env=run.env, num_envs=config.num_envs_per_env_runner, model=config.model,
                    gamma=config.gamma, lambda_=config.gae_lambda,
                    seed=seed_for(run.seed, index, restart))

    if config.num_env_runners == 0:
        return LocalRunnerGroup(EnvRunner(**kwargs(0, 0))), 0.0
    from distrl.runtime.ray_runners import RayRunnerGroup, init_ray

    cpus = config.num_env_runners * config.num_cpus_per_env_runner
    ray_start_s = init_ray(run.address, cpus)
    group = RayRunnerGroup(kwargs, config.num_env_runners, config.num_cpus_per_env_runner)
    return group, ray_start_s


def _device(name: str) -> torch.device:
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch sees no CUDA device; use device='cpu' or 'auto'.")
    return torch.device(name)


def _restore(ckpt: dict[str, Any], model: ActorCritic, opt: torch.optim.Optimizer,
             generator: torch.Generator, runners) -> Progress:
    model.load_state_dict(ckpt["model"])
    opt.load_state_dict(ckpt["optimizer"])
    generator.set_state(ckpt["generator"])
    runners.set_states(ckpt["runner_states"])
    return ckpt["progress"]
