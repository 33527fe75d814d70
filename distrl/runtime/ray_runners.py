"""Env runners as Ray actors: parallel sampling, one weights put per round; a runner
that dies or hangs is replaced by the Supervisor and its sample retaken."""

from __future__ import annotations

import math
import os
import socket
import time
import uuid
from typing import Any

import ray
import torch

from distrl.config import RunConfig
from distrl.env_runner import EnvRunner, Weights
from distrl.runtime.supervisor import MakeKwargs, Supervisor
from distrl.types import Rollout

CONNECT_TIMEOUT_S = 5.0


def init_ray(address: str | None, cpus_needed: float = 0.0) -> float:
    """Join ``address`` (or $RAY_ADDRESS), else start an embedded local cluster with at
    least ``cpus_needed`` logical CPUs (more runners than cores then share the cores
    instead of waiting for ones that never come). Each run gets its own namespace, so
    named actors (the policy store) of two jobs on one cluster never meet.

    Returns the seconds it took, so start-up can be reported apart from training.
    """
    if ray.is_initialized():
        return 0.0
    t0 = time.perf_counter()
    namespace = f"distrl-{uuid.uuid4().hex[:12]}"
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        _check_reachable(address)
        ray.init(address=address, namespace=namespace, log_to_driver=True)
    else:
        cpus = max(os.cpu_count() or 1, math.ceil(cpus_needed))
        ray.init(num_cpus=cpus, namespace=namespace, include_dashboard=False,
                 log_to_driver=True)
    return time.perf_counter() - t0


def _check_reachable(address: str) -> None:
    """One line naming the address, instead of Ray retrying for minutes and then
    printing a traceback."""
    if "://" in address or ":" not in address:  # ray://, "auto", "local": Ray's own forms
        return
    host, port = address.rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except (OSError, ValueError) as err:
        raise RuntimeError(
            f"cannot reach a Ray cluster at {address!r} ({err}). Pass the head node's "
            "host:port (`ray start --head` prints it; default port 6379), or leave "
            "--address and $RAY_ADDRESS unset to start a local cluster."
        ) from None


class _RemoteEnvRunner(EnvRunner):
    """EnvRunner inside an actor: one torch thread, since each runner gets one CPU."""

    def __init__(self, *args: Any, **kwargs: Any):
        torch.set_num_threads(1)
        super().__init__(*args, **kwargs)

    def ready(self) -> bool:
        return True


class RayRunnerGroup:
    """N remote EnvRunners under one Supervisor."""

    def __init__(self, make_kwargs: MakeKwargs, num_runners: int, num_cpus: float,
                 run: RunConfig):
        self.sup = Supervisor("env_runners", _RemoteEnvRunner, make_kwargs, num_runners,
                              max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s,
                              resources={"num_cpus": num_cpus})

    def sample(self, weights: Weights, version: int, steps_per_env: int,
               reward_std: float = 1.0) -> list[Rollout]:
        ref = ray.put(weights)  # one shared copy per round, read by every runner
        actors = dict(enumerate(self.sup.actors))
        results: dict[int, Rollout] = {}
        while actors:
            done, faults = self.sup.settle(
                {i: a.sample.remote(steps_per_env, ref, version, reward_std=reward_std)
                 for i, a in actors.items()})
            results.update(done)
            actors = {i: self.sup.replace(i, fault) for i, fault in faults.items()}
        return [results[i] for i in sorted(results)]

    def metrics(self) -> dict[str, float]:
        return self.sup.metrics()

    def get_states(self) -> list:
        return self.sup.wait_all("save its state",
                                 {i: a.get_state.remote() for i, a in enumerate(self.sup.actors)})

    def set_states(self, states: list) -> None:
        pairs = enumerate(zip(self.sup.actors, states, strict=True))
        self.sup.wait_all("load its state", {i: a.set_state.remote(s) for i, (a, s) in pairs})

    def close(self) -> None:
        self.sup.close()
