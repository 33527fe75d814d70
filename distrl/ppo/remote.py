"""Env runners as Ray actors: parallel sampling, one weights put per round; a runner
that dies or hangs is replaced by the Supervisor and its sample retaken."""

from __future__ import annotations

from collections.abc import Callable

import ray

from distrl.core.config import RunConfig
from distrl.core.types import Rollout
from distrl.ppo.env_runner import EnvRunner, Weights
from distrl.runtime.supervisor import MakeKwargs, SupervisedGroup, Supervisor


class RayRunnerGroup(SupervisedGroup):
    """N remote EnvRunners under one Supervisor."""

    def __init__(self, make_kwargs: MakeKwargs, num_runners: int, num_cpus: float,
                 run: RunConfig):
        self.sup = Supervisor("env_runners", EnvRunner, make_kwargs, num_runners,
                              max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s,
                              resources={"num_cpus": num_cpus},
                              placement_strategy=run.placement_strategy)
        self._round: tuple[Callable, dict[int, ray.ObjectRef]] | None = None  # launched

    def sample(self, weights: Weights, version: int, steps_per_env: int,
               reward_std: float = 1.0) -> list[Rollout]:
        self.launch(weights, version, steps_per_env, reward_std)
        return self.collect()

    def launch(self, weights: Weights, version: int, steps_per_env: int,
               reward_std: float = 1.0) -> None:
        """Ask every runner for its next sample and return at once (the learner may
        train meanwhile); collect() waits for them."""
        ref = ray.put(weights)  # one shared copy per round, read by every runner

        def call(i: int, actor) -> ray.ObjectRef:
            return actor.sample.remote(steps_per_env, ref, version, reward_std=reward_std)

        self._round = (call, {i: call(i, a) for i, a in enumerate(self.sup.actors)})

    @property
    def in_flight(self) -> bool:
        return self._round is not None

    def collect(self) -> list[Rollout]:
        """The launched round's samples in slot order; a runner that died or hung is
        replaced and asked again (Supervisor.call_all's rule)."""
        call, futures = self._round
        self._round = None
        results: dict[int, Rollout] = {}
        while futures:
            done, faults = self.sup.settle(futures)
            results.update(done)
            futures = {i: call(i, a) for i, a in self.sup.replace_all(faults).items()}
        return [results[i] for i in sorted(results)]
