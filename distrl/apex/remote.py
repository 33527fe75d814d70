"""Ape-X on Ray: actors send fragments straight to replay shards, the driver keeps
sample requests in flight to every shard, a learner thread trains on what comes back,
and new priorities go back without blocking.

The driver only moves object refs: fragments go actor -> shard, batches shard ->
learner thread (in this process). Actors and shards are each a Supervisor group; a dead
or hung one is replaced, a shard's lost transitions are counted in replay/lost.
"""

from __future__ import annotations

import queue
import threading
import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distrl.apex.config import ApexConfig
from distrl.apex.roles import (
    ApexActor,
    DQNLearner,
    ReplayShard,
    WeightSync,
    batches_to_request,
    next_shard,
)
from distrl.core.config import RunConfig
from distrl.runtime.cluster import release_ray
from distrl.runtime.supervisor import Fault, MakeKwargs, Supervisor, cause, last_line


class _RemoteActor(ApexActor):
    """An actor process: each step() sends one fragment to a shard."""

    def weights_version(self) -> int:
        return self.version

    def step(self, shard: Any, steps_per_env: int, weights: Any, version: int
             ) -> dict[str, Any]:
        if weights is not None:
            self.set_weights(weights, version)
        fragment, priorities, stats = self.collect(steps_per_env)
        try:  # waiting here bounds what an actor can queue up at a slow shard
            ray.get(shard.add.remote(fragment, priorities))
        except ray.exceptions.RayActorError:
            stats["lost"] = stats["transitions"]  # the driver replaces the shard
        return stats


class LearnerThread(threading.Thread):
    """Trains on batches from ``inq``; puts (shard, indices, |td|) on ``outq``. Torch
    releases the GIL in its kernels, so the driver's loop goes on meanwhile."""

    def __init__(self, learner: DQNLearner, queue_size: int):
        super().__init__(daemon=True, name="apex-learner")
        self.learner = learner
        self.inq: queue.Queue = queue.Queue(maxsize=queue_size)
        self.outq: queue.Queue = queue.Queue()
        self.metrics: dict[str, float] = {}
        self.error: BaseException | None = None
        self.stopped = threading.Event()
        # Weights for the actors, copied here between updates when the driver asks: the
        # driver never takes the learner's lock, which an update holds while it trains.
        self.want_weights = threading.Event()
        self.published: tuple[int, dict[str, np.ndarray]] | None = None

    def run(self) -> None:
        try:
            while not self.stopped.is_set():
                self._publish()
                try:
                    shard, (batch, indices, is_weights) = self.inq.get(timeout=0.1)
                except queue.Empty:
                    continue
                td_abs, self.metrics = self.learner.update(batch, is_weights)
                self.outq.put((shard, indices, td_abs))
        except BaseException as err:  # raised in the driver's loop
            self.error = err

    def _publish(self) -> None:
        if self.want_weights.is_set():
            self.want_weights.clear()
            self.published = (self.learner.updates, self.learner.weights())

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=10)


@dataclass
class _Call:
    kind: str  # "actor" | "sample" | "stats"
    slot: int
    started: float
    shard: tuple[int, int] = (0, 0)  # an actor's: (shard, its generation) it adds to


class ApexRuntime:
    """The driver's side: supervised actors and shards, the learner thread, and the
    event loop that keeps all of them busy."""

    def __init__(self, config: ApexConfig, run: RunConfig, learner: DQNLearner,
                 actor_kwargs: MakeKwargs, shard_kwargs: MakeKwargs, reporting: set[int],
                 epsilons: list[float]):
        self.config, self.run, self.epsilons = config, run, epsilons
        self.reporting = reporting  # actors whose episodes are reported
        self.learner = learner
        timeouts = dict(max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s)
        shards = {"num_cpus": config.num_cpus_per_replay_shard}
        strategy = run.placement_strategy if shards["num_cpus"] else None
        if config.replay_buffer_shards_colocated_with_driver:
            # The driver runs where it was started, outside any placement group: the
            # shards follow it by node affinity (the seed's learner + shards bundle).
            here = ray.get_runtime_context().get_node_id()
            shards["scheduling_strategy"] = NodeAffinitySchedulingStrategy(here, soft=False)
            strategy = None
        self.shards = Supervisor("replay_shards", ReplayShard, shard_kwargs, config.num_shards,
                                 resources=shards, placement_strategy=strategy, **timeouts)
        try:
            self.actors = Supervisor("apex_actors", _RemoteActor, actor_kwargs,
                                     config.num_workers,
                                     resources={"num_cpus": config.num_cpus_per_worker},
                                     placement_strategy=run.placement_strategy, **timeouts)
        except BaseException:
            self.shards.close()
            raise
        self.thread = LearnerThread(learner, config.learner_queue_size)
        # The weights actors get: the newest the learner thread published, one put each.
        self.weights_ref = (learner.updates, ray.put(learner.weights()))
        self.thread.start()
        self.calls: dict[ray.ObjectRef, _Call] = {}
        self.busy_actors: set[int] = set()
        self.sample_requests = [0] * config.num_shards  # requests in flight per shard
        self.sampled = [0] * config.num_shards  # transitions sampled from each shard
        self.syncs = [WeightSync(config.max_weight_sync_delay)
                      for _ in range(config.num_workers)]
        self.next_shard = list(range(config.num_workers))  # round robin, offset per actor
        self.shard_sizes = [0] * config.num_shards  # as of the last stats call
        # What a dead shard took is counted from the fragments whose adds succeeded, not
        # from its last stats: fragments in flight when an iteration ends land after those.
        # A fragment that reaches the driver after its shard was replaced is counted then.
        self.shard_generation = [0] * config.num_shards
        self.shard_added = [0] * config.num_shards
        self.dead_room: dict[tuple[int, int], int] = {}  # a dead shard's unused capacity
        self.shard_stats: list[dict[str, int] | None] = [None] * config.num_shards
        self.stored = 0  # transitions sent to shards, minus those lost with a shard
        self.counts = Counter()
        self.trained0 = learner.trained  # training_intensity counts from here

    # -- one iteration -------------------------------------------------------------------

    def iterate(self, min_time_s: float, min_env_steps: int) -> dict[str, Any]:
        """Run the event loop for at least ``min_time_s`` and ``min_env_steps``; returns
        the env steps and episodes it collected and the counters."""
        t0 = time.perf_counter()
        out = {"env_steps": 0, "returns": [], "lengths": []}
        for key in ("sampled_by_shards", "lag_sum", "fragments"):  # per iteration
            self.counts[key] = 0
        while (time.perf_counter() - t0 < min_time_s) or out["env_steps"] < min_env_steps:
            self._launch()
            done, _ = ray.wait(list(self.calls), num_returns=1, timeout=0.02)
            for ref in done:
                self._handle(ref, out)
            self._send_priorities()
            self._check()
        self._refresh_shard_sizes()
        dt = time.perf_counter() - t0
        out["sampled"] = self.counts["sampled_by_shards"]
        out["time_s"] = dt
        return out

    def _launch(self) -> None:
        for i in range(self.config.num_workers):
            if i not in self.busy_actors:
                self._launch_actor(i)
        free = batches_to_request(self.config, self.stored, self.learner.trained - self.trained0,
                                  self.thread.inq.qsize() + sum(self.sample_requests))
        while free > 0:
            s = next_shard(self.sample_requests, self.sampled,
                           self.config.replay_requests_per_shard)
            if s is None:
                return
            ref = self.shards.actors[s].sample.remote(self.config.train_batch_size,
                                                      self.config.prioritized_replay_beta)
            self.calls[ref] = _Call("sample", s, time.monotonic())
            self.sample_requests[s] += 1
            free -= 1

    def _launch_actor(self, i: int) -> None:
        version, ref = self._newest_weights()
        weights = None
        if self.syncs[i].due(version):
            weights = ref
            self.counts["weight_syncs"] += 1
        shard = self.next_shard[i] % self.config.num_shards
        self.next_shard[i] += 1
        ref = self.actors.actors[i].step.remote(self.shards.actors[shard],
                                                self.config.rollout_fragment_length,
                                                weights, version)
        self.calls[ref] = _Call("actor", i, time.monotonic(),
                                (shard, self.shard_generation[shard]))
        self.busy_actors.add(i)

    def _newest_weights(self) -> tuple[int, ray.ObjectRef]:
        """The newest weights the learner thread published (one ray.put per version,
        shared by every actor that syncs to it), and a request for a copy after its next
        update if it trained since. Never waits for an update in progress: that would
        hold every actor's next fragment."""
        published = self.thread.published
        if published is not None and published[0] != self.weights_ref[0]:
            self.weights_ref = (published[0], ray.put(published[1]))
        if self.learner.updates != self.weights_ref[0]:
            self.thread.want_weights.set()
        return self.weights_ref

    def _handle(self, ref: ray.ObjectRef, out: dict[str, Any]) -> None:
        call = self.calls.pop(ref)
        try:
            result = ray.get(ref)
        except ray.exceptions.RayActorError as err:
            self._replace(call, Fault(f"died: {last_line(err)}", True))
            return
        except Exception as err:
            raise cause(err) from None
        if call.kind == "actor":
            self.busy_actors.discard(call.slot)
            self._count_fragment(call, result, out)
        elif call.kind == "sample":
            self.sample_requests[call.slot] -= 1
            if result is not None:
                self.counts["sampled_by_shards"] += self.config.train_batch_size
                self.sampled[call.slot] += self.config.train_batch_size
                self.thread.inq.put((call.slot, result))

    def _count_fragment(self, call: _Call, stats: dict[str, Any], out: dict[str, Any]
                        ) -> None:
        i = call.slot
        self.syncs[i].since += stats["env_steps"]
        out["env_steps"] += stats["env_steps"]
        self.counts[f"env_steps/{i}"] += stats["env_steps"]
        # How stale the acting weights were, in learner updates, when the fragment landed.
        self.counts["lag_sum"] += self.learner.updates - stats["version"]
        self.counts["fragments"] += 1
        self._count_stored(call.shard, stats["transitions"], stats.get("lost", 0))
        if i in self.reporting:
            out["returns"].extend(stats["episode_returns"].tolist())
            out["lengths"].extend(stats["episode_lengths"].tolist())

    def _send_priorities(self) -> None:
        while True:
            try:
                shard, indices, td_abs = self.thread.outq.get_nowait()
            except queue.Empty:
                return
            # Fire and forget: ids that were overwritten meanwhile are ignored by the shard.
            self.shards.actors[shard].update_priorities.remote(indices, td_abs)

    def _check(self) -> None:
        if self.thread.error is not None:
            raise self.thread.error
        now = time.monotonic()
        for ref, call in list(self.calls.items()):
            if now - call.started > self.run.actor_timeout_s:
                self.calls.pop(ref)
                self._replace(call, Fault(f"hung: no answer within "
                                          f"{self.run.actor_timeout_s:g} s", True))

    def _replace(self, call: _Call, fault: Fault) -> None:
        if call.kind == "actor":
            self.busy_actors.discard(call.slot)
            self.actors.replace(call.slot, fault)
            self.syncs[call.slot] = WeightSync(self.config.max_weight_sync_delay)
            return
        self.sample_requests[call.slot] = 0
        for ref, other in list(self.calls.items()):  # its other requests die with it
            if other.kind != "actor" and other.slot == call.slot:
                self.calls.pop(ref)
        s = call.slot
        # Counted from reported adds: a fragment whose actor died after its add landed
        # was never reported, so it is missing here (at most one per actor death).
        held = min(self.shard_added[s], self.config.shard_capacity)
        self.stored -= held
        self.counts["lost"] += held
        self.dead_room[(s, self.shard_generation[s])] = self.config.shard_capacity - held
        self.shard_generation[s] += 1
        self.shard_added[s] = self.shard_sizes[s] = 0
        self.shards.replace(s, fault)

    def _count_stored(self, shard: tuple[int, int], transitions: int, lost: int) -> None:
        """Count a fragment's transitions as stored, or as lost: the actor found its shard
        dead (``lost``), or its add landed in a shard that has been replaced since."""
        s, generation = shard
        added = transitions - lost
        if generation != self.shard_generation[s]:  # they died with that shard
            held = min(added, self.dead_room.get(shard, 0))  # past it, they evicted
            self.dead_room[shard] = self.dead_room.get(shard, 0) - held  # counted ones
            lost, added = lost + held, 0
        self.stored += added
        self.shard_added[s] += added
        self.counts["lost"] += lost

    def _refresh_shard_sizes(self) -> None:
        refs = {s: a.stats.remote() for s, a in enumerate(self.shards.actors)}
        results, faults = self.shards.settle(refs)
        for s, fault in faults.items():
            self._replace(_Call("stats", s, 0.0), fault)
        self.shard_stats = [results.get(s) for s in range(self.config.num_shards)]
        for s, st in results.items():
            self.shard_sizes[s] = st["size"]

    # -- reporting and shutdown ----------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        sizes = [st["size"] for st in self.shard_stats if st]
        bytes_per = [st["bytes_per_transition"] for st in self.shard_stats if st]
        return {"replay/size": float(sum(sizes)), "replay/lost": float(self.counts["lost"]),
                "replay/bytes_per_transition": float(np.mean(bytes_per)) if bytes_per else 0.0,
                "learner/queue_size": float(self.thread.inq.qsize()),
                "apex/weight_syncs": float(self.counts["weight_syncs"]),
                "apex/policy_lag": self.counts["lag_sum"] / max(self.counts["fragments"], 1),
                **{f"apex/{k}": float(v) for k, v in self.counts.items()
                   if k.startswith("env_steps/")},
                **{f"replay/sampled/{s}": float(n) for s, n in enumerate(self.sampled)},
                **self.actors.metrics(), **self.shards.metrics()}

    def close(self) -> None:
        self.thread.stop()
        self.actors.close()
        self.shards.close()
        release_ray()
