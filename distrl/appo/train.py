"""train_appo: env runners sample without waiting; the learner in the driver consumes
fragments as they arrive, corrects their lag with V-trace and steps PPO's loss.

In process (num_env_runners=0, no Ray imported) one runner samples in a thread beside
the learner (appo/sampler.py); on Ray, actors do (appo/remote.py). An iteration is
one learner update on train_batch_size samples.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch

from distrl.appo.config import APPOConfig
from distrl.appo.loss import train_batch
from distrl.appo.sampler import Sampler, ThreadSampler
from distrl.core.callbacks import Callbacks
from distrl.core.checkpoint import Checkpoint
from distrl.core.config import RunConfig
from distrl.core.loop import Progress, start_run
from distrl.core.types import Fragment
from distrl.models.filters import return_std
from distrl.ppo.env_runner import EnvRunner, Weights
from distrl.ppo.train import LearnerSide, drive_on_policy, runner_kwargs


def train_appo(config: APPOConfig | None = None, run: RunConfig | None = None, *,
               callbacks: Callbacks | None = None) -> dict[str, Any]:
    """Train APPO until a stop condition holds; returns the final metrics and checkpoint
    path. Resume and ``callbacks`` as train_ppo."""
    start = start_run("appo", config or APPOConfig(), run or RunConfig())
    return drive_on_policy(start, _make_fragments, _iteration, callbacks)


class Fragments:
    """APPO's Samples (ppo.train): a Sampler's fragments, the pending ones checkpointed."""

    def __init__(self, sampler: Sampler):
        self.sampler = sampler
        self._held: list[Fragment] = []

    def spaces(self) -> tuple[Any, Any]:
        return self.sampler.runner.spaces()

    def restore(self, ckpt: Checkpoint) -> None:
        self.sampler.resume(ckpt.trusted("appo", "pending.pkl")["fragments"])

    def start(self, weights: Weights, version: int) -> None:
        self.sampler.publish(weights, version)

    def hold(self) -> dict[str, dict[str, Any]]:
        """Runners paused (their states match the fragments kept), the fragments taken."""
        self._held = self.sampler.pause()
        return {"appo": {"pending.pkl": {"fragments": self._held}}}

    def release(self) -> None:
        self.sampler.resume(self._held)
        self._held = []

    def get_states(self) -> list:
        return self.sampler.get_states()

    def set_states(self, states: list) -> None:
        self.sampler.set_states(states)

    def close(self) -> None:
        self.sampler.close()


def _iteration(config: APPOConfig, side: LearnerSide, samples: Fragments, p: Progress,
               device: torch.device) -> dict[str, Any]:
    sampler = samples.sampler
    t0 = time.perf_counter()
    fragments = sampler.take(config.samplers)
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


def _make_fragments(config: APPOConfig, run: RunConfig) -> tuple[Fragments, float]:
    kwargs = runner_kwargs(config, run)
    steps = config.fragment_length()
    if config.in_driver:
        runner = EnvRunner(**kwargs(0, 0))
        return Fragments(ThreadSampler(runner, steps, config.max_queued_fragments)), 0.0
    from distrl.appo.remote import RaySampler
    from distrl.runtime.cluster import init_ray

    cpus = config.num_env_runners * config.num_cpus_per_env_runner
    ray_start_s = init_ray(run.address, cpus)
    sampler = RaySampler(kwargs, config.num_env_runners, config.num_cpus_per_env_runner, run,
                         steps, config.max_queued_fragments)
    return Fragments(sampler), ray_start_s
