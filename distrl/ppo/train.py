"""train_ppo: sample with env runners, update one Learner in the driver, repeat.

The loop is the same in-process (num_env_runners=0, no Ray imported) and on Ray; only
the runner group differs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from distrl.core.callbacks import Callbacks
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
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
from distrl.envs.make import env_spaces
from distrl.models.filters import RunningStats, return_std, stats_from_json, stats_to_json
from distrl.models.recurrent import actor_critic
from distrl.ppo.config import PPOConfig
from distrl.ppo.env_runner import EnvRunner, LocalRunnerGroup, Weights
from distrl.ppo.loss import ppo_update, update_kl_coeff, with_recomputed_gae


def train_ppo(config: PPOConfig | None = None, run: RunConfig | None = None, *,
              callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Train PPO until a stop condition holds; returns the final metrics and checkpoint path.

    With ``run.resume`` the configs come from the checkpoint; fields set here that
    differ from the defaults change them (each change is reported). ``callbacks``: your
    functions, called between iterations (distrl.Callbacks).
    """
    start = start_run("ppo", config or PPOConfig(), run or RunConfig())
    return drive_on_policy(start, _make_rounds, _iteration, callbacks)


class Samples(Protocol):
    """Where an on-policy run's learner gets its samples: PPO's Rounds, APPO's Fragments,
    over runners in the driver's process (num_env_runners=0) or on Ray."""

    def spaces(self) -> tuple[Any, Any]:
        """The env's spaces, from the runner in the driver's process."""

    def restore(self, ckpt: Checkpoint) -> None:
        """The samples a checkpoint holds (taken, not yet trained on) come first."""

    def start(self, weights: Weights, version: int) -> None:
        """The learner's first weights, before the first iteration."""

    def hold(self) -> dict[str, dict[str, Any]] | None:
        """Wait for the samples in flight (the runners are then idle, their states those
        after them): the checkpoint component that holds them."""

    def release(self) -> None:
        """Sample on after a checkpoint."""

    def get_states(self) -> list: ...

    def set_states(self, states: list) -> None: ...

    def close(self) -> None: ...


def drive_on_policy(start: Start, make_samples: Callable[[Any, RunConfig], tuple[Any, float]],
                    iteration: Callable[..., dict[str, Any]],
                    callbacks: Callbacks | None) -> dict[str, Any]:
    """PPO's and APPO's one driver: the learner in the driver, its Samples from
    ``make_samples(config, run)`` (with the seconds Ray took to start), each iteration
    ``iteration(config, side, samples, progress, device)``; a checkpoint also holds the
    samples in flight."""
    config, run = start.config, start.run
    device = learner_device(run.device)
    # With Ray runners, one env made here first: a bad env or env_config is then one line
    # from the driver, before any actor starts.
    spaces = env_spaces(run.env, run.env_config) if not config.in_driver else None
    samples, ray_start_s = make_samples(config, run)
    try:
        obs_space, act_space = spaces or samples.spaces()
        side = LearnerSide.create(start, obs_space, act_space, device)
        model = side.learner.model
        progress = start.progress()
        if start.ckpt is not None:
            restore_runners(start, samples)
            samples.restore(start.ckpt)
        samples.start(side.learner.weights(), progress.iteration)
    except BaseException:
        samples.close()
        raise

    def iterate() -> dict[str, Any]:
        return iteration(config, side, samples, progress, device)

    def save() -> Path:
        held = samples.hold()
        try:
            return save_run(start, progress,
                            policy_files(model.state_dict(), obs_space, act_space, config.model),
                            side.learner_state(), samples.get_states(), side.algo_state(), held)
        finally:
            samples.release()

    return drive(start, Closures(progress, iterate, save, samples.close, lambda: model,
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

    def spaces(self) -> tuple[Any, Any]:
        return self.runners.runner.spaces()

    def restore(self, ckpt: Checkpoint) -> None:
        self.pending = saved_pending(ckpt)

    def start(self, weights: Weights, version: int) -> None:
        """Nothing to do: each round sends the weights it samples with."""

    def hold(self) -> dict[str, dict[str, Any]] | None:
        """The batch sampled and not yet trained on, the one in flight waited for (the
        runners are then idle, their states those after it): a resume trains on it
        first."""
        if self.runners.in_flight:
            self.pending = self.runners.collect()
        return {"ppo": {"pending.pkl": {"rollouts": self.pending}}} if self.pending else None

    def release(self) -> None:
        """Nothing to do: the next round launches as it would have."""

    def metrics(self) -> dict[str, float]:
        return self.runners.metrics()

    def get_states(self) -> list:
        return self.runners.get_states()

    def set_states(self, states: list) -> None:
        self.runners.set_states(states)

    def close(self) -> None:
        self.runners.close()


def _iteration(config: PPOConfig, side: LearnerSide, rounds: Rounds, p: Progress,
               device: torch.device) -> dict[str, Any]:
    t0 = time.perf_counter()
    reward_std = return_std(side.returns)
    rollout = Rollout.concat(rounds.next_batch(side.learner.weights(), p.iteration,
                                               config.fragment_length(), reward_std))
    lag = p.iteration - rollout.weights_version
    t1 = time.perf_counter()
    lr = config.lr_at(p.env_steps)
    side.learner.set_lr(lr)
    batch = PPOBatch.from_rollout(rollout, device, config.advantage_stats())
    learned = side.update(config, batch, rollout, config.entropy_coeff_at(p.env_steps))
    t2 = time.perf_counter()
    return {
        **p.add(rollout.env_steps, rollout.episode_returns, rollout.episode_lengths),
        "time/sample_s": t1 - t0,
        "time/learn_s": t2 - t1,
        "env/steps_per_s": rollout.env_steps / (t2 - t0),
        **rounds.metrics(),
        **learned,
        "learner/policy_lag": float(lag),
        "learner/lr": lr,
        "learner/reward_std": reward_std,
    }


def runner_kwargs(config: PPOConfig, run: RunConfig) -> Callable[[int, int], dict[str, Any]]:
    """The EnvRunner of slot ``index``'s constructor arguments (a fresh seed per restart);
    APPO's runners are PPO's."""
    def kwargs(index: int, restart: int) -> dict[str, Any]:
        return dict(env=run.env, num_envs=config.num_envs_per_env_runner, model=config.model,
                    gamma=config.gamma, lambda_=config.gae_lambda,
                    seed=seed_for(run.seed, index, restart), env_config=run.env_config,
                    normalize_rewards=config.normalize_rewards,
                    max_episode_steps=run.max_episode_steps, vector_mode=run.vector_mode,
                    keep_steps=config.recompute_advantages)

    return kwargs


def _make_rounds(config: PPOConfig, run: RunConfig) -> tuple[Rounds, float]:
    kwargs = runner_kwargs(config, run)
    if config.in_driver:
        # Overlap in process samples in a thread, as APPO's sampler does: the same lag
        # and checkpoints as on Ray, without Ray (it pays where stepping or the learner's
        # kernels release the GIL).
        group = LocalRunnerGroup(EnvRunner(**kwargs(0, 0)), threaded=config.overlap)
        return Rounds(group, config.overlap), 0.0
    from distrl.ppo.remote import RayRunnerGroup
    from distrl.runtime.cluster import init_ray

    cpus = config.num_env_runners * config.num_cpus_per_env_runner
    ray_start_s = init_ray(run.address, cpus)
    group = RayRunnerGroup(kwargs, config.num_env_runners, config.num_cpus_per_env_runner, run)
    return Rounds(group, config.overlap), ray_start_s


def saved_pending(ckpt: Checkpoint) -> list[Rollout] | None:
    """The batch a run with overlap had sampled and not trained on when it saved."""
    try:
        return ckpt.trusted("ppo", "pending.pkl")["rollouts"]
    except FileNotFoundError:  # saved with nothing in flight
        return None


def restore_runners(start: Start, runners) -> None:
    """The runners' states from the checkpoint, where it has one per runner (APPO's too)."""
    runner_states = start.ckpt.runner_states()
    if len(runner_states) == start.config.samplers:
        runners.set_states(runner_states)
    else:
        print(f"distrl: resume: {len(runner_states)} saved runner states for a different "
              "runner count; the runners start fresh episodes", flush=True)


@dataclass
class LearnerSide:
    """What PPO and APPO keep in the driver between iterations: the learner (network and
    optimizer), its minibatch-shuffling generator, the adaptive KL coefficient and the
    returns' statistics that scale rewards."""

    learner: Learner
    generator: torch.Generator
    kl_coeff: float
    returns: RunningStats

    @classmethod
    def create(cls, start: Start, obs_space, act_space, device: torch.device) -> LearnerSide:
        """A new network, or the checkpoint's learner, generator and statistics."""
        config, state = start.config, start.algo_state()
        model = actor_critic(obs_space, act_space, config.model).to(device)
        side = cls(Learner(model, config.lr_at(0), config.grad_clip),
                   torch.Generator().manual_seed(start.run.seed),
                   state.get("kl_coeff", config.kl_coeff), stats_from_json(state.get("returns")))
        if start.ckpt is not None:
            saved = start.ckpt.learner_state()
            side.learner.set_state({"model": start.ckpt.policy_weights(),
                                    "optimizer": saved["optimizer"]})
            side.generator.set_state(saved["generator"])
        return side

    def update(self, config: PPOConfig, batch: PPOBatch, rollout: Rollout,
               entropy_coeff: float) -> dict[str, Any]:
        """One PPO update; then the KL coefficient adapts and the observation filter and
        return statistics take the rollout's (after: the batch was learned with those it
        was sampled with). Its metrics as logged."""
        used = self.kl_coeff
        refresh = None
        if config.recompute_advantages:
            def refresh(b: PPOBatch) -> PPOBatch:
                return with_recomputed_gae(b, self.learner.model, rollout.steps, config)
        metrics = ppo_update(self.learner, batch, config, used, entropy_coeff, self.generator,
                             refresh=refresh)
        if config.use_kl_loss:
            self.kl_coeff = update_kl_coeff(used, metrics["kl"], config.kl_target)
        if "obs" in rollout.stats:
            self.learner.model.update_obs_filter(rollout.stats["obs"])
        if "returns" in rollout.stats:
            self.returns = self.returns.merge(rollout.stats["returns"])
        return {**{f"learner/{k}": v for k, v in metrics.items()},
                "learner/kl_coeff": used, "learner/entropy_coeff": entropy_coeff,
                "learner/batch_size": len(batch)}

    def learner_state(self) -> dict[str, Any]:
        return {"optimizer": self.learner.get_state()["optimizer"],
                "generator": self.generator.get_state()}

    def algo_state(self) -> dict[str, Any]:
        return {"kl_coeff": self.kl_coeff, "returns": stats_to_json(self.returns)}
