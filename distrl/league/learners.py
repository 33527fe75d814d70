"""DistributedLearners: the league's learners on Ray, after RLlib's DistributedLearners
(its multi-agent learner design, since removed), with a remove_policy that works.

A learner shard is one ReplayActor (the samples each of its policies has not trained on
yet) plus up to m PolicyLearner actors pinned to the replay actor's node, so samples move
between processes of one node only. A PolicyLearner trains PPO through the shared Learner
on what its shard's replay actor holds for it and publishes every new version to the
per-node policy store, from which env runners read it.
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distrl.core.types import Rollout
from distrl.league.config import LeagueConfig, Magnet
from distrl.league.trainer import LeagueTrainer
from distrl.league.workers import learner_seed
from distrl.runtime.cluster import check_resources
from distrl.runtime.placement import holds
from distrl.runtime.supervisor import cause, kill_and_wait, last_line
from distrl.store.policy_cache import PolicySpec, flatten_policy
from distrl.store.remote import head_store, publish, stop_head_store, wait


@ray.remote(num_cpus=0)
class ReplayActor:
    """A shard's samples, per policy id, until that policy's learner takes them."""

    def __init__(self) -> None:
        self.parts: dict[str, list[Rollout]] = {}

    def add(self, policy_id: str, rollout: Rollout) -> int:
        self.parts.setdefault(policy_id, []).append(rollout)
        return sum(r.size for r in self.parts[policy_id])

    def take(self, policy_id: str, min_samples: int) -> Rollout | None:
        """Every held sample of the policy once there are min_samples, else None."""
        parts = self.parts.get(policy_id, [])
        if sum(r.size for r in parts) < min_samples or not parts:
            return None
        self.parts[policy_id] = []
        return Rollout.concat(parts)

    def drop(self, policy_id: str) -> None:
        self.parts.pop(policy_id, None)

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


@ray.remote
class PolicyLearner:
    """One learning policy (a LeagueTrainer) on its shard's node; publishes each version
    to the policy store (frozen snapshots are put by the driver, RayWorkers)."""

    def __init__(self, policy_id: str, obs_space: gym.Space, act_space: gym.Space,
                 config: LeagueConfig, replay: Any, head: Any, seed: int,
                 magnet: Magnet, torch_threads: int = 1):
        torch.set_num_threads(torch_threads)
        self.generator = torch.Generator().manual_seed(seed)  # minibatch shuffles
        self.policy_id, self.replay, self.head = policy_id, replay, head
        # A learner given a share of a GPU (DistributedLearners' num_gpus) trains on it.
        device = "cuda" if ray.get_gpu_ids() and torch.cuda.is_available() else "cpu"
        self.trainer = LeagueTrainer(obs_space, act_space, config, device, magnet, seed)
        self.spec = PolicySpec(obs_space, act_space, config.model)
        self.version = self._publish(policy_id)

    def _publish(self, policy_id: str, version: int | None = None) -> int:
        return publish(self.head, policy_id, flatten_policy(self.trainer.model), self.spec,
                       version)

    def rehome(self, head: Any) -> int:
        """Publish to a rebuilt policy store: the current weights again, under their
        version."""
        self.head = head
        return self._publish(self.policy_id, self.version)

    def set_replay(self, replay: Any) -> None:
        """Take samples from a restarted replay actor."""
        self.replay = replay

    def train(self, min_samples: int) -> dict[str, float] | None:
        """One PPO update on the shard's samples for this policy (None: not enough yet)."""
        rollout = ray.get(self.replay.take.remote(self.policy_id, min_samples))
        if rollout is None:
            return None
        metrics = self.trainer.update(rollout, self.generator)
        self.version = self._publish(self.policy_id)
        return {**metrics, "version": self.version, "samples": rollout.size}

    def env_steps(self) -> int:
        return self.trainer.env_steps

    def reset(self) -> int:
        """Restart from fresh weights (AlphaStar's exploiter reset); publishes them."""
        self.trainer.reset()
        self.version = self._publish(self.policy_id)
        return self.version

    def get_state(self) -> dict[str, Any]:
        return self.trainer.get_state()

    def set_state(self, state: dict[str, Any]) -> int:
        self.trainer.set_state(state)
        self.version = self._publish(self.policy_id)
        return self.version

    def node_id(self) -> str:
        return ray.get_runtime_context().get_node_id()


@dataclass
class Shard:
    """One replay actor and the learners co-located with it."""

    replay: Any
    node_id: str
    capacity: int
    learners: dict[str, Any] = field(default_factory=dict)


class DistributedLearners:
    """Learner shards for up to ``max_policies`` learning policies.

    Shards: ``num_shards`` or, as in the seed, min(num_gpus or max_policies,
    max_policies); each holds ceil(max_policies / shards) learners and its GPUs split
    evenly among them (fractions allowed); shards go round-robin over the cluster's
    nodes. ``cpus_per_learner`` is what Ray reserves for each learner, ``torch_threads``
    its torch intra-op threads (more than one pays where the learners update while
    runners wait, as a league without overlap_learning does). Each learner's
    weights and shuffles are seeded from ``seed`` and its policy id, so a run repeats
    whatever order policies are added in. Every wait ends within ``timeout_s``; a
    request the cluster cannot hold at all is refused before anything starts.
    """

    def __init__(self, config: LeagueConfig, max_policies: int, num_shards: int | None = None,
                 num_gpus: float = 0.0, cpus_per_learner: float = 1.0, seed: int = 0,
                 magnet: Magnet | None = None, timeout_s: float = 600.0,
                 torch_threads: int = 1):
        if max_policies <= 0:
            raise ValueError(f"`max_policies` ({max_policies}) must be > 0.")
        check_resources({"GPU": num_gpus, "CPU": cpus_per_learner * max_policies},
                        f"{max_policies} learners")
        self.config, self.cpus_per_learner, self.seed = config, cpus_per_learner, seed
        self.timeout_s, self.torch_threads = timeout_s, torch_threads
        self.spaces: dict[str, tuple[gym.Space, gym.Space]] = {}
        self.magnet = magnet or Magnet()  # off
        shards = num_shards or min(int(num_gpus) or max_policies, max_policies)
        if not 0 < shards <= max_policies:
            raise ValueError(f"`num_shards` ({shards}) must be in 1..max_policies "
                             f"({max_policies}).")
        per_shard = math.ceil(max_policies / shards)
        self.gpus_per_policy = num_gpus / shards / per_shard
        self.head = head_store()  # on the driver's node, before any learner looks for it
        # Shards round-robin over the live nodes that can hold a learner (a head started
        # with --num-cpus 0 cannot), the driver's first: each shard's learners then use
        # their own node's CPUs/GPUs (Ray's SPREAD is best effort and stacks zero-CPU
        # actors on one node).
        here = ray.get_runtime_context().get_node_id()
        need = {"CPU": self.cpus_per_learner, "GPU": self.gpus_per_policy}
        nodes = sorted((n["NodeID"] for n in ray.nodes()
                        if n["Alive"] and holds(n["Resources"], need)), key=lambda n: n != here)
        if not nodes:
            raise ValueError(f"no Ray node has {need} for one league learner: lower "
                             "--num-cpus-per-learner or --num-gpus-for-learners.")
        self.shards = []
        for i in range(shards):
            node = nodes[i % len(nodes)]
            self.shards.append(Shard(_replay_on(node), node, per_shard))

    def add_policy(self, policy_id: str, obs_space: gym.Space, act_space: gym.Space) -> Any:
        """A learner for the policy on the first shard with room, on its replay's node."""
        return self.add_policies({policy_id: (obs_space, act_space)})[policy_id]

    def add_policies(self, spaces: dict[str, tuple[gym.Space, gym.Space]]) -> dict[str, Any]:
        """Learners for several policies (id: observation and action space), started
        together: each start is a process importing torch, seconds apiece one after
        another. If one fails to start, none of them is kept."""
        for policy_id in spaces:
            if self.get(policy_id) is not None:
                raise ValueError(f"policy {policy_id!r} already has a learner.")
        if len(spaces) > sum(shard.capacity - len(shard.learners) for shard in self.shards):
            raise RuntimeError(f"all {len(self.shards)} learner shards are full "
                               f"({len(self)} policies): remove a policy or raise "
                               "max_policies.")
        launched: dict[str, tuple[Shard, Any]] = {}
        for policy_id, pair in spaces.items():
            shard = next(s for s in self.shards if len(s.learners) < s.capacity)
            self.spaces[policy_id] = pair
            shard.learners[policy_id] = self._launch(shard, policy_id)
            launched[policy_id] = shard, shard.learners[policy_id]
        try:
            for policy_id, (shard, learner) in launched.items():
                self._started(shard, learner, policy_id)
        except BaseException:
            for policy_id, (shard, _) in launched.items():
                shard.learners.pop(policy_id)
                self.spaces.pop(policy_id)
            kill_and_wait([learner for _, learner in launched.values()])
            raise
        return {policy_id: learner for policy_id, (_, learner) in launched.items()}

    def restart_policy(self, policy_id: str) -> Any:
        """A new learner in place of the policy's (dead or hung) one, on the same shard,
        with fresh weights: the caller restores its state (PolicyLearner.set_state)."""
        for shard in self.shards:
            if policy_id in shard.learners:
                ray.kill(shard.learners[policy_id])
                learner = self._started(shard, self._launch(shard, policy_id), policy_id)
                shard.learners[policy_id] = learner
                return learner
        raise KeyError(f"no learner for policy {policy_id!r}.")

    def _launch(self, shard: Shard, policy_id: str) -> Any:
        return PolicyLearner.options(
            num_cpus=self.cpus_per_learner, num_gpus=self.gpus_per_policy,
            scheduling_strategy=NodeAffinitySchedulingStrategy(shard.node_id, soft=False),
        ).remote(policy_id, *self.spaces[policy_id], self.config, shard.replay, self.head,
                 learner_seed(self.seed, policy_id), self.magnet, self.torch_threads)

    def _started(self, shard: Shard, learner: Any, policy_id: str) -> Any:
        """The learner once its constructor ran (it published its weights), before use."""
        try:
            ray.get(learner.node_id.remote(), timeout=self.timeout_s)
        except ray.exceptions.RayActorError as err:  # its constructor raised
            raise RuntimeError(f"the learner of {policy_id!r} failed to start: "
                               f"{last_line(cause(err))}") from None
        except ray.exceptions.GetTimeoutError:
            ray.kill(learner)
            raise RuntimeError(
                f"the learner of {policy_id!r} did not start within {self.timeout_s:g} s; "
                f"it asks for {self.cpus_per_learner:g} CPUs and {self.gpus_per_policy:g} "
                f"GPUs on node {shard.node_id[:8]}, whose cluster has "
                f"{ray.available_resources()} free.") from None
        return learner

    def heal(self) -> list[str]:
        """Replace the policy store and each replay actor that died or hangs; the
        learners move to the new ones (publishing their weights again to a new store).
        Returns what was replaced: "policy_store", "replay_<shard>". A lost replay's
        samples are lost; so are the weights a lost store owned, except the learners'
        own (republished here) and what others own (the caller republishes those)."""
        lost = []
        if not self._alive(self.head):
            stop_head_store(self.head)
            self.head = head_store()
            lost.append("policy_store")
            self._tell([learner.rehome.remote(self.head) for _, learner, _ in self])
        for k, shard in enumerate(self.shards):
            if not self._alive(shard.replay):
                ray.kill(shard.replay)
                shard.replay = _replay_on(shard.node_id)
                lost.append(f"replay_{k}")
                self._tell([learner.set_replay.remote(shard.replay)
                            for learner in shard.learners.values()])
        return lost

    def _tell(self, refs: list[Any]) -> None:
        """Wait for calls to learners; a dead learner is left to whoever restarts it
        (restart_policy starts it on the current store and replay)."""
        for ref in refs:
            with contextlib.suppress(ray.exceptions.RayActorError):
                ray.get(ref, timeout=self.timeout_s)

    def _alive(self, actor: Any) -> bool:
        try:
            ray.get(actor.node_id.remote(), timeout=self.timeout_s)
            return True
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
            return False

    def remove_policy(self, policy_id: str) -> None:
        """Stop its learner, free its slot, drop its samples and remove it from the store
        (runners drop it from their caches at their next refresh)."""
        for shard in self.shards:
            learner = shard.learners.pop(policy_id, None)
            if learner is not None:
                self.spaces.pop(policy_id, None)
                ray.kill(learner)
                ray.get(shard.replay.drop.remote(policy_id), timeout=self.timeout_s)
                wait(self.head.remove.remote(policy_id), f"remove {policy_id!r}")
                return
        raise KeyError(f"no learner for policy {policy_id!r}.")

    def get(self, policy_id: str) -> tuple[Any, Any] | None:
        """(learner, replay actor) of a policy, or None."""
        for shard in self.shards:
            if policy_id in shard.learners:
                return shard.learners[policy_id], shard.replay
        return None

    def policy_id_of(self, learner: Any) -> str | None:
        for pid, actor, _ in self:
            if actor == learner:
                return pid
        return None

    def __iter__(self) -> Iterator[tuple[str, Any, Any]]:
        for shard in self.shards:
            for pid, learner in shard.learners.items():
                yield pid, learner, shard.replay

    def __len__(self) -> int:
        return sum(len(s.learners) for s in self.shards)

    def stop(self) -> None:
        """Stop every learner and replay actor, and the policy store with its weights;
        returns once they are dead (their CPUs free for the next run)."""
        actors = [a for shard in self.shards for a in (*shard.learners.values(), shard.replay)]
        for shard in self.shards:
            shard.learners.clear()
        timeout_s = 30.0
        if alive := kill_and_wait(actors, timeout_s):
            warnings.warn(f"{len(alive)} killed learner or replay actors still answer after "
                          f"{timeout_s:g} s; Ray frees their resources when they end",
                          stacklevel=2)
        stop_head_store(self.head)


def _replay_on(node_id: str) -> Any:
    return ReplayActor.options(
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False)).remote()
