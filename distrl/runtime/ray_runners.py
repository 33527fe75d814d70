"""Env runners as Ray actors: parallel sampling, one weights put per round, restarts."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from typing import Any

import ray
import torch

from distrl.env_runner import EnvRunner, Weights
from distrl.types import Rollout

MAX_RESTARTS = 3


def init_ray(address: str | None, cpus_needed: float = 0.0) -> float:
    """Join ``address`` (or $RAY_ADDRESS), else start an embedded local cluster with at
    least ``cpus_needed`` logical CPUs (more runners than cores then share the cores
    instead of waiting for ones that never come).

    Returns the seconds it took, so start-up can be reported apart from training.
    """
    if ray.is_initialized():
        return 0.0
    t0 = time.perf_counter()
    if address or os.environ.get("RAY_ADDRESS"):
        ray.init(address=address, log_to_driver=True)
    else:
        cpus = max(os.cpu_count() or 1, math.ceil(cpus_needed))
        ray.init(num_cpus=cpus, include_dashboard=False, log_to_driver=True)
    return time.perf_counter() - t0


class _RemoteEnvRunner(EnvRunner):
    """EnvRunner inside an actor: one torch thread, since each runner gets one CPU."""

    def __init__(self, *args: Any, **kwargs: Any):
        torch.set_num_threads(1)
        super().__init__(*args, **kwargs)

    def ready(self) -> bool:
        return True


class RayRunnerGroup:
    """N remote EnvRunners; a runner that dies is replaced and its sample retaken."""

    def __init__(self, make_kwargs: Callable[[int, int], dict[str, Any]], num_runners: int,
                 num_cpus: float, ready_timeout_s: float = 120.0):
        self._make_kwargs = make_kwargs  # (runner index, restart count) -> EnvRunner kwargs
        self._cls = ray.remote(num_cpus=num_cpus)(_RemoteEnvRunner)
        self.restarts = [0] * num_runners
        self.actors = [self._cls.remote(**make_kwargs(i, 0)) for i in range(num_runners)]
        ready = [a.ready.remote() for a in self.actors]
        done, _ = ray.wait(ready, num_returns=len(ready), timeout=ready_timeout_s)
        if len(done) < len(ready):
            cpus = ray.cluster_resources().get("CPU", 0)
            raise RuntimeError(
                f"only {len(done)} of {num_runners} env runners started within "
                f"{ready_timeout_s:.0f} s; each asks for {num_cpus} CPU and the cluster has "
                f"{cpus:g}. Lower --num-env-runners or --num-cpus-per-env-runner."
            )
        ray.get(done)  # raises a runner's construction error (bad env, space) here

    def sample(self, weights: Weights, version: int, steps_per_env: int) -> list[Rollout]:
        ref = ray.put(weights)  # one shared copy per round, read by every runner
        futures = [a.sample.remote(steps_per_env, ref, version) for a in self.actors]
        return [self._get_or_restart(i, f, ref, version, steps_per_env)
                for i, f in enumerate(futures)]

    def _get_or_restart(self, i: int, future: ray.ObjectRef, ref: ray.ObjectRef, version: int,
                        steps_per_env: int) -> Rollout:
        while True:
            try:
                return ray.get(future)
            except ray.exceptions.RayActorError as err:
                if self.restarts[i] >= MAX_RESTARTS:
                    raise RuntimeError(
                        f"env runner {i} died {MAX_RESTARTS + 1} times; giving up. "
                        f"Last error: {err}"
                    ) from err
                self.restarts[i] += 1
                print(f"distrl: env runner {i} died ({type(err).__name__}); restart "
                      f"{self.restarts[i]}/{MAX_RESTARTS}, retaking its sample", flush=True)
                self.actors[i] = self._cls.remote(**self._make_kwargs(i, self.restarts[i]))
                future = self.actors[i].sample.remote(steps_per_env, ref, version)

    def get_states(self) -> list[bytes]:
        return ray.get([a.get_state.remote() for a in self.actors])

    def set_states(self, states: list[bytes]) -> None:
        ray.get([a.set_state.remote(s) for a, s in zip(self.actors, states, strict=True)])

    def close(self) -> None:
        for a in self.actors:
            ray.kill(a)

