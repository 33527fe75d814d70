"""Env runners as Ray actors: parallel sampling, one weights put per round; a runner
that dies or hangs is replaced by the Supervisor and its sample retaken."""

from __future__ import annotations

import ray

from distrl.core.config import RunConfig
from distrl.core.types import Rollout
from distrl.ppo.env_runner import EnvRunner, Weights
from distrl.runtime.cluster import release_ray
from distrl.runtime.supervisor import MakeKwargs, Supervisor


class RayRunnerGroup:
    """N remote EnvRunners under one Supervisor."""

    def __init__(self, make_kwargs: MakeKwargs, num_runners: int, num_cpus: float,
                 run: RunConfig):
        self.sup = Supervisor("env_runners", EnvRunner, make_kwargs, num_runners,
                              max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s,
                              resources={"num_cpus": num_cpus},
                              placement_strategy=run.placement_strategy)

    def sample(self, weights: Weights, version: int, steps_per_env: int,
               reward_std: float = 1.0) -> list[Rollout]:
        ref = ray.put(weights)  # one shared copy per round, read by every runner
        return list(self.sup.call_all(
            lambda i, a: a.sample.remote(steps_per_env, ref, version, reward_std=reward_std)
        ).values())

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
        release_ray()

