"""Self-play workers as Ray actors: each plays its own games with the weights it is sent
(one put per call, read by every worker); a worker that dies or hangs is replaced by the
Supervisor and its share played again by the replacement."""

from __future__ import annotations

import numpy as np
import ray

from distrl.alphazero.self_play import SelfPlayer
from distrl.core.config import RunConfig
from distrl.runtime.cluster import init_ray, release_ray
from distrl.runtime.supervisor import MakeKwargs, SupervisedGroup, Supervisor


class RaySelfPlayers(SupervisedGroup):
    """N remote SelfPlayers under one Supervisor, on the Ray this joins or starts
    (ray_start_s: the seconds that took)."""

    def __init__(self, make_kwargs: MakeKwargs, num_workers: int, num_cpus: float,
                 run: RunConfig):
        self.size = num_workers
        self.ray_start_s = init_ray(run.address, num_workers * num_cpus)
        try:
            self.sup = Supervisor("self_play", SelfPlayer, make_kwargs, num_workers,
                                  max_restarts=run.max_restarts,
                                  call_timeout_s=run.actor_timeout_s,
                                  resources={"num_cpus": num_cpus},
                                  placement_strategy=run.placement_strategy)
        except BaseException:  # a worker that cannot start leaves no Ray of ours running
            release_ray()
            raise

    def play(self, weights: dict[str, np.ndarray] | None, rounds: int) -> list[tuple]:
        ref = ray.put(weights)
        games = self.sup.call_all(lambda i, a: a.play.remote(ref, rounds))
        return [game for share in games.values() for game in share]
