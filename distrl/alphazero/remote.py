"""Self-play workers as Ray actors: each plays its own games with the weights of the
iteration (one put per iteration, read by every worker); a worker that dies or hangs is
replaced by the Supervisor and its share played again by the replacement."""

from __future__ import annotations

from typing import Any

import numpy as np
import ray

from distrl.alphazero.self_play import SelfPlayer
from distrl.core.config import RunConfig
from distrl.runtime.cluster import release_ray
from distrl.runtime.supervisor import MakeKwargs, Supervisor


class RaySelfPlayers:
    """N remote SelfPlayers under one Supervisor."""

    def __init__(self, make_kwargs: MakeKwargs, num_workers: int, num_cpus: float,
                 run: RunConfig):
        self.size = num_workers
        self.sup = Supervisor("self_play", SelfPlayer, make_kwargs, num_workers,
                              max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s,
                              resources={"num_cpus": num_cpus},
                              placement_strategy=run.placement_strategy)

    def play(self, weights: dict[str, np.ndarray] | None, rounds: int) -> list[tuple]:
        ref = ray.put(weights)
        games = self.sup.call_all(lambda i, a: a.play.remote(ref, rounds))
        return [game for share in games.values() for game in share]

    def metrics(self) -> dict[str, Any]:
        return self.sup.metrics()

    def close(self) -> None:
        self.sup.close()
        release_ray()
