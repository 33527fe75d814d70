"""train_ppo: sample with env runners, update one Learner in the driver, repeat.

The loop is the same in-process (num_env_runners=0, no Ray imported) and on Ray; only
the runner group differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from distrl.core.callbacks import Callbacks
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.core.envs import env_spaces
from distrl.core.learner import Learner
from distrl.core.loop import (
    Closures,
    Progress,
    Start,
    drive,
    learner_device,
    policy_files,
    save_run,
    start_run,
)
from distrl.core.sampling import seed_for
from distrl.core.types import PPOBatch, Rollout
from distrl.models.filters import RunningStats, return_std, stats_from_json, stats_to_json
from distrl.models.recurrent import actor_critic
from distrl.ppo.config import PPOConfig
from distrl.ppo.env_runner import EnvRunner, LocalRunnerGroup, Weights
from distrl.ppo.loss import ppo_update, update_kl_coeff


def train_ppo(config: PPOConfig | None = None, run: RunConfig | None = None, *,
              callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Train PPO until a stop condition holds; returns the final metrics and checkpoint path.

    With ``run.resume`` the configs come from the checkpoint; fields set here that
    differ from the defaults change them (each change is reported). ``callbacks``: your
    functions, called between iterations (distrl.Callbacks).
    """
    start = start_run("ppo", config or PPOConfig(), run or RunConfig())
    config, run = start.config, start.run
    device = learner_device(run.device)
    # With Ray runners, one env made here first: a bad env or env_config is then one line
    # from the driver, before any actor starts.
    spaces = env_spaces(run.env, run.env_config) if config.num_env_runners else None
    runners, ray_start_s = _make_runners(config, run)
    rounds = Rounds(runners, config.overlap)
    try:
        obs_space, act_space = spaces or runners.runner.spaces()
        model = actor_critic(obs_space, act_space, config.model).to(device)
        learner = Learner(model, config.lr_at(0), config.grad_clip)
        generator = torch.Generator().manual_seed(run.seed)  # minibatch shuffling
        progress = start.progress()
        kl_coeff = start.algo_state().get("kl_coeff", config.kl_coeff)
        returns = stats_from_json(start.algo_state().get("returns"))  # reward scaling
        if start.ckpt is not None:
            restore(start, learner, generator, runners)
            rounds.pending = saved_pending(start.ckpt)
    except BaseException:
        runners.close()
        raise

    def iterate() -> dict[str, Any]:
        nonlocal kl_coeff, returns
        metrics, kl_coeff, returns = _iteration(config, learner, rounds, progress, kl_coeff,
                                                returns, generator, device)
        return metrics

    def save() -> Path:
        # The batch in flight is waited for and saved: its env steps are taken, and the
        # runners' states follow it. A resume trains on it first.
        pending = rounds.hold()
        return save_run(start, progress,
                        policy_files(model.state_dict(), obs_space, act_space, config.model),
                        {"optimizer": learner.get_state()["optimizer"],
                         "generator": generator.get_state()},
                        runners.get_states(),
                        {"kl_coeff": kl_coeff, "returns": stats_to_json(returns)},
                        {"ppo": {"pending.pkl": {"rollouts": pending}}} if pending else None)

    return drive(start, Closures(progress, iterate, save, runners.close, lambda: model,
                                 ray_start_s), callbacks)


class Rounds:
    """The sample requests of a run. With overlap one is always in flight: launched with
    the current weights before the learner trains on the batch just received, so that
    batch was sampled with the weights of one update ago."""

    def __init__(self, runners, overlap: bool):
        self.runners, self.overlap = runners, overlap
        self.pending: list[Rollout] | None = None  # sampled, not yet trained on

    def next_batch(self, weights: Weights, version: int, steps_per_env: int,
                   reward_std: float) -> list[Rollout]:
        if not self.pending:
            if not self.runners.in_flight:
                self.runners.launch(weights, version, steps_per_env, reward_std)
            self.pending = self.runners.collect()
        batch, self.pending = self.pending, None
        if self.overlap:
            self.runners.launch(weights, version, steps_per_env, reward_std)
        return batch

    def hold(self) -> list[Rollout]:
        """The batch sampled and not yet trained on, the one in flight waited for: the
        runners are then idle, their states those after it."""
        if self.runners.in_flight:
            self.pending = self.runners.collect()
        return self.pending or []


def _iteration(config: PPOConfig, learner: Learner, rounds: Rounds, p: Progress,
               kl_coeff: float, returns: RunningStats, generator: torch.Generator,
               device: torch.device) -> tuple[dict[str, Any], float, RunningStats]:
    t0 = time.perf_counter()
    reward_std = return_std(returns)
    rollout = Rollout.concat(rounds.next_batch(learner.weights(), p.iteration,
                                               config.fragment_length(), reward_std))
    lag = p.iteration - rollout.weights_version
    t1 = time.perf_counter()
    lr = config.lr_at(p.env_steps)
    entropy_coeff = config.entropy_coeff_at(p.env_steps)
    learner.set_lr(lr)
    batch = PPOBatch.from_rollout(rollout, device, config.advantage_stats())
    metrics = ppo_update(learner, batch, config, kl_coeff, entropy_coeff, generator)
    new_kl_coeff = (update_kl_coeff(kl_coeff, metrics["kl"], config.kl_target)
                    if config.use_kl_loss else kl_coeff)
    # After the update: the batch was learned with the statistics it was sampled with.
    if "obs" in rollout.stats:
        learner.model.update_obs_filter(rollout.stats["obs"])
    if "returns" in rollout.stats:
        returns = returns.merge(rollout.stats["returns"])
    t2 = time.perf_counter()
    return {
        **p.add(rollout.env_steps, rollout.episode_returns, rollout.episode_lengths),
        "time/sample_s": t1 - t0,
        "time/learn_s": t2 - t1,
        "env/steps_per_s": rollout.env_steps / (t2 - t0),
        **rounds.runners.metrics(),
        **{f"learner/{k}": v for k, v in metrics.items()},
        "learner/policy_lag": float(lag),
        "learner/kl_coeff": kl_coeff,
        "learner/lr": lr,
        "learner/entropy_coeff": entropy_coeff,
        "learner/batch_size": len(batch),
        "learner/reward_std": reward_std,
    }, new_kl_coeff, returns


def runner_kwargs(config: PPOConfig, run: RunConfig) -> Callable[[int, int], dict[str, Any]]:
    """The EnvRunner of slot ``index``'s constructor arguments (a fresh seed per restart);
    APPO's runners are PPO's."""
    def kwargs(index: int, restart: int) -> dict[str, Any]:
        return dict(env=run.env, num_envs=config.num_envs_per_env_runner, model=config.model,
                    gamma=config.gamma, lambda_=config.gae_lambda,
                    seed=seed_for(run.seed, index, restart), env_config=run.env_config,
                    normalize_rewards=config.normalize_rewards,
                    max_episode_steps=run.max_episode_steps, vector_mode=run.vector_mode)

    return kwargs


def _make_runners(config: PPOConfig, run: RunConfig):
    kwargs = runner_kwargs(config, run)
    if config.num_env_runners == 0:
        # Overlap in process samples in a thread, as APPO's sampler does: the same lag
        # and checkpoints as on Ray, without Ray (it pays where stepping or the learner's
        # kernels release the GIL).
        return LocalRunnerGroup(EnvRunner(**kwargs(0, 0)), threaded=config.overlap), 0.0
    from distrl.ppo.remote import RayRunnerGroup
    from distrl.runtime.cluster import init_ray

    cpus = config.num_env_runners * config.num_cpus_per_env_runner
    ray_start_s = init_ray(run.address, cpus)
    group = RayRunnerGroup(kwargs, config.num_env_runners, config.num_cpus_per_env_runner, run)
    return group, ray_start_s


def saved_pending(ckpt: Checkpoint) -> list[Rollout] | None:
    """The batch a run with overlap had sampled and not trained on when it saved."""
    try:
        return ckpt.trusted("ppo", "pending.pkl")["rollouts"]
    except FileNotFoundError:  # saved with nothing in flight
        return None


def restore(start: Start, learner: Learner, generator: torch.Generator, runners) -> None:
    """The learner, its shuffling generator and the runners from the checkpoint (APPO's
    too)."""
    ckpt = start.ckpt
    state = ckpt.learner_state()
    learner.set_state({"model": ckpt.policy_weights(),
                       "optimizer": state["optimizer"]})
    generator.set_state(state["generator"])
    runner_states = ckpt.runner_states()
    if len(runner_states) == max(start.config.num_env_runners, 1):
        runners.set_states(runner_states)
    else:
        print(f"distrl: resume: {len(runner_states)} saved runner states for a different "
              "runner count; the runners start fresh episodes", flush=True)
