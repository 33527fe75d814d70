"""DistributedLearners: the league's learners on Ray, after RLlib's DistributedLearners
(the seed), with a remove_policy that works.

A learner shard is one ReplayActor (the samples each of its policies has not trained on
yet) plus up to m PolicyLearner actors pinned to the replay actor's node, so samples move
between processes of one node only. A PolicyLearner trains PPO through the shared Learner
on what its shard's replay actor holds for it and publishes every new version to the
per-node policy store, from which env runners read it.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np
import ray
import torch
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from distrl.algos.ppo import Magnet, PolicyTrainer, PPOHyperparams
from distrl.env_runner import seed_for
from distrl.matches import RANDOM, MatchLoop, MatchResult, RandomPolicy
from distrl.multiagent import make_multiagent_env
from distrl.policy_cache import FlatLayout, PolicySpec, flatten_policy
from distrl.runtime.policy_store import PolicyReader, head_store, publish, stop_head_store
from distrl.runtime.ray_runners import init_ray
from distrl.runtime.supervisor import Supervisor
from distrl.types import Rollout


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
    """One learning policy (a PolicyTrainer) on its shard's node; publishes each version
    to the policy store, and frozen snapshots of itself under new ids."""

    def __init__(self, policy_id: str, obs_space: gym.Space, act_space: gym.Space,
                 config: PPOHyperparams, replay: Any, head: Any, seed: int,
                 magnet: Magnet):
        torch.set_num_threads(1)
        torch.manual_seed(seed)  # initial weights (and those after a reset)
        self.generator = torch.Generator().manual_seed(seed)  # minibatch shuffles
        self.policy_id, self.replay, self.head = policy_id, replay, head
        # A learner given a share of a GPU (DistributedLearners' num_gpus) trains on it.
        device = "cuda" if ray.get_gpu_ids() and torch.cuda.is_available() else "cpu"
        self.trainer = PolicyTrainer(obs_space, act_space, config, device, magnet)
        self.spec = PolicySpec(obs_space, act_space, config.model)
        self.version = self._publish(policy_id)

    def _publish(self, policy_id: str) -> int:
        return publish(self.head, policy_id, flatten_policy(self.trainer.model), self.spec)

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

    def snapshot(self, snapshot_id: str) -> int:
        """Publish the current weights as a frozen policy; the store owns them, so the
        snapshot costs this learner nothing and outlives it."""
        return self._publish(snapshot_id)

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
    nodes. ``cpus_per_learner`` is what Ray reserves for each learner. Each learner's
    weights and shuffles are seeded from ``seed`` and its policy id, so a run repeats
    whatever order policies are added in.
    """

    def __init__(self, config: PPOHyperparams, max_policies: int, num_shards: int | None = None,
                 num_gpus: float = 0.0, cpus_per_learner: float = 1.0, seed: int = 0,
                 magnet: Magnet | None = None):
        if max_policies <= 0:
            raise ValueError(f"`max_policies` ({max_policies}) must be > 0.")
        self.config, self.cpus_per_learner, self.seed = config, cpus_per_learner, seed
        self.magnet = magnet or Magnet()  # off
        shards = num_shards or min(int(num_gpus) or max_policies, max_policies)
        if not 0 < shards <= max_policies:
            raise ValueError(f"`num_shards` ({shards}) must be in 1..max_policies "
                             f"({max_policies}).")
        per_shard = math.ceil(max_policies / shards)
        self.gpus_per_policy = num_gpus / shards / per_shard
        self.head = head_store()  # on the driver's node, before any learner looks for it
        # Shards round-robin over the live nodes, the driver's first: each shard's
        # learners then use their own node's CPUs/GPUs (Ray's SPREAD is best effort and
        # stacks zero-CPU actors on one node).
        here = ray.get_runtime_context().get_node_id()
        nodes = sorted((n["NodeID"] for n in ray.nodes() if n["Alive"]),
                       key=lambda n: n != here)
        self.shards = []
        for i in range(shards):
            node = nodes[i % len(nodes)]
            replay = ReplayActor.options(
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)).remote()
            self.shards.append(Shard(replay, node, per_shard))

    def add_policy(self, policy_id: str, obs_space: gym.Space, act_space: gym.Space) -> Any:
        """A learner for the policy on the first shard with room, on its replay's node."""
        if self.get(policy_id) is not None:
            raise ValueError(f"policy {policy_id!r} already has a learner.")
        for shard in self.shards:
            if len(shard.learners) < shard.capacity:
                learner = PolicyLearner.options(
                    num_cpus=self.cpus_per_learner, num_gpus=self.gpus_per_policy,
                    scheduling_strategy=NodeAffinitySchedulingStrategy(shard.node_id,
                                                                       soft=False),
                ).remote(policy_id, obs_space, act_space, self.config, shard.replay,
                         self.head, seed_for(self.seed, zlib.crc32(policy_id.encode())),
                         self.magnet)
                ray.get(learner.node_id.remote())  # started (and published) before use
                shard.learners[policy_id] = learner
                return learner
        raise RuntimeError(f"all {len(self.shards)} learner shards are full "
                           f"({len(self)} policies): remove a policy or raise max_policies.")

    def remove_policy(self, policy_id: str) -> None:
        """Stop its learner, free its slot, drop its samples and remove it from the store
        (runners drop it from their caches at their next refresh)."""
        for shard in self.shards:
            learner = shard.learners.pop(policy_id, None)
            if learner is not None:
                ray.kill(learner)
                ray.get(shard.replay.drop.remote(policy_id))
                ray.get(self.head.remove.remote(policy_id))
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
        """Stop every learner and replay actor, and the policy store with its weights."""
        for shard in self.shards:
            for learner in shard.learners.values():
                ray.kill(learner)
            ray.kill(shard.replay)
            shard.learners.clear()
        stop_head_store(self.head)


class MatchRunner:
    """Plays matches on Ray: a MatchLoop whose seats act through PolicyReader views of
    this node's policy store (a new opponent costs the runner no copy), seated from
    mappings the driver's league drew; learning seats' samples go to their shard's
    replay actor."""

    def __init__(self, game: Any, env_config: dict[str, Any], num_envs: int, seed: int,
                 head: Any, mappings: list[dict[str, str]], gamma: float, lambda_: float,
                 max_cached_policies: int = 64):
        torch.set_num_threads(1)
        self.gamma, self.lambda_ = gamma, lambda_
        self.reader = PolicyReader(head, max_cached_policies)
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator().manual_seed(seed)
        self.mappings, self.next = list(mappings), 0
        envs = [make_multiagent_env(game, env_config) for _ in range(num_envs)]
        space = envs[0].action_space(envs[0].possible_agents[0])
        self.random = RandomPolicy(int(space.n)) if hasattr(space, "n") else None
        self.loop = MatchLoop(envs, self._choose, seed)

    def ready(self) -> bool:
        return True

    def _choose(self, env_index: int) -> dict[str, str]:
        """The next mapping the league drew; once they run out, one of them again at
        random (they are independent draws, so the mix stays the league's)."""
        if self.next < len(self.mappings):
            self.next += 1
            return self.mappings[self.next - 1]
        return self.mappings[int(self.rng.integers(len(self.mappings)))]

    def play(self, mappings: list[dict[str, str]], replays: dict[str, Any],
             min_samples: int) -> tuple[list[MatchResult], int]:
        """Seat new games from ``mappings`` (games under way keep theirs) with the
        newest published weights, play until the finished seats of the learners in
        ``replays`` hold min_samples moves, hand each learner's samples to its replay."""
        self.mappings, self.next = list(mappings), 0
        seated = {s.policy_id for seats in self.loop.seats for s in seats.values()}
        self.reader.refresh(sorted(({p for m in mappings for p in m.values()} | seated)
                                   - {RANDOM}))
        batch = self.loop.collect(self._policy, set(replays), min_samples, self.gamma,
                                  self.lambda_, self.generator)
        ray.get([replays[pid].add.remote(pid, r) for pid, r in batch.rollouts.items()])
        return batch.results, batch.env_steps

    def _policy(self, policy_id: str) -> Any:
        if policy_id == RANDOM and self.random is not None:
            return self.random
        return self.reader.policy(policy_id)

    def versions(self) -> dict[str, int]:
        """Version of each policy this runner acts with now."""
        return {pid: self.reader.cache.version(pid) for pid in self.reader.cache.ids()}


class RayPlayers:
    """A league's learners and games on Ray: ``num_env_runners`` MatchRunners (one
    Supervisor group) and DistributedLearners, which publish every version and every
    frozen snapshot to the policy store the runners read."""

    def __init__(self, cfg: Any, obs_space: gym.Space, act_space: gym.Space, run: Any,
                 choose: Callable[[], dict[str, str]]):
        ids = [pid for pid, _ in cfg.learner_ids()]
        init_ray(run.address, cfg.num_env_runners * cfg.num_cpus_per_env_runner
                 + len(ids) * cfg.num_cpus_per_learner)
        self.cfg, self.choose, self.ids = cfg, choose, ids
        self.timeout = run.actor_timeout_s
        self.spec = PolicySpec(obs_space, act_space, cfg.model)
        self.learners = DistributedLearners(cfg, len(ids), cfg.num_learner_shards,
                                            cfg.num_gpus_for_learners, cfg.num_cpus_per_learner,
                                            run.seed, cfg.magnet)
        try:  # a failed start leaves no learners, replays or store behind
            for pid in ids:
                self.learners.add_policy(pid, obs_space, act_space)
            self.reader = PolicyReader(self.learners.head)
            self.random = RandomPolicy(int(act_space.n))
            self.runners = self._start_runners(run)
        except BaseException:
            self.learners.stop()
            raise

    def _start_runners(self, run: Any) -> Supervisor:
        cfg = self.cfg

        def kwargs(index: int, restart: int) -> dict[str, Any]:
            return dict(game=run.env, env_config=run.env_config, num_envs=cfg.num_envs,
                        seed=seed_for(run.seed, index, restart), head=self.learners.head,
                        mappings=self._draw(cfg.num_envs), gamma=cfg.gamma,
                        lambda_=cfg.gae_lambda, max_cached_policies=cfg.max_cached_policies)

        return Supervisor("match_runners", MatchRunner, kwargs, cfg.num_env_runners,
                          max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s,
                          resources={"num_cpus": cfg.num_cpus_per_env_runner})

    def _get(self, refs: Any) -> Any:
        """Results of learner and store calls, with the run's actor timeout: a hung
        learner stops the run with an error instead of hanging it (learners are not
        replaced: their optimizer state would be lost; resume from the checkpoint)."""
        return ray.get(refs, timeout=self.timeout)

    def _draw(self, n: int) -> list[dict[str, str]]:
        return [self.choose() for _ in range(n)]

    def play(self, learners: list[str], min_samples: int) -> tuple[list[MatchResult], int]:
        """Every runner plays its share; a runner that dies or hangs is replaced and its
        share retaken."""
        share = -(-min_samples // self.cfg.num_env_runners)
        replays = {pid: self.learners.get(pid)[1] for pid in learners}
        # Enough draws for games as short as 4 of a learner's moves.
        draws = self.cfg.num_envs + share // 4
        actors = dict(enumerate(self.runners.actors))
        out: dict[int, tuple[list[MatchResult], int]] = {}
        while actors:
            done, faults = self.runners.settle(
                {i: a.play.remote(self._draw(draws), replays, share) for i, a in actors.items()})
            out.update(done)
            actors = {i: self.runners.replace(i, f) for i, f in faults.items()}
        results = [r for i in sorted(out) for r in out[i][0]]
        return results, sum(steps for _, steps in out.values())

    def train(self) -> dict[str, dict[str, float]]:
        """Every learner trains on what its replay received, all at once."""
        futures = {pid: learner.train.remote(1) for pid, learner, _ in self.learners}
        return {pid: m for pid, m in zip(futures, self._get(list(futures.values())), strict=True)
                if m is not None}

    def env_steps(self) -> dict[str, int]:
        futures = {pid: learner.env_steps.remote() for pid, learner, _ in self.learners}
        return dict(zip(futures, self._get(list(futures.values())), strict=True))

    def freeze(self, pid: str, snap: str) -> None:
        self._get(self.learners.get(pid)[0].snapshot.remote(snap))

    def reset(self, pid: str) -> None:
        self._get(self.learners.get(pid)[0].reset.remote())

    def acting(self) -> StoreView:
        self.reader.refresh(self.ids)  # the learners' newest versions
        return StoreView(self.reader, self.random)

    def module(self, pid: str) -> torch.nn.Module:
        module = self.spec.build()
        module.load_state_dict(self._weights([pid])[pid])
        return module

    def _weights(self, ids: list[str]) -> dict[str, dict[str, torch.Tensor]]:
        """State dicts (copies) of published policies, read from the store."""
        entries = self._get(self.learners.head.latest.remote(ids))
        flats = self._get([box[0] for _, box, _ in entries.values()])
        out = {}
        for (pid, (_, _, spec)), flat in zip(entries.items(), flats, strict=True):
            views = FlatLayout.of(spec.build()).views(flat)
            out[pid] = {k: v.clone() for k, v in views.items()}
        return out

    def metrics(self) -> dict[str, float]:
        return self.runners.metrics()

    def get_state(self) -> dict[str, Any]:
        """Every policy's weights (snapshots from the store); the learners' optimizer,
        KL coefficient and steps."""
        futures = {pid: learner.get_state.remote() for pid, learner, _ in self.learners}
        trainers = dict(zip(futures, self._get(list(futures.values())), strict=True))
        frozen = [p for p in self._get(self.learners.head.versions.remote()) if p not in trainers]
        weights = {pid: t.pop("model") for pid, t in trainers.items()}
        return {"weights": {**weights, **self._weights(frozen)}, "trainers": trainers}

    def set_state(self, saved: dict[str, Any]) -> None:
        """Learners load their state and republish; snapshots are published again."""
        futures = []
        for pid, weights in saved["weights"].items():
            found = self.learners.get(pid)
            if found is not None:
                futures.append(found[0].set_state.remote({**saved["trainers"][pid],
                                                          "model": weights}))
            else:
                flat = FlatLayout.of(self.spec.build()).flatten(weights)
                futures.append(self.learners.head.publish.remote(pid, flat, self.spec))
        self._get(futures)

    def close(self) -> None:
        self.runners.close()
        self.learners.stop()


@dataclass
class StoreView:
    """Policies by id for evaluation in the driver: the store's, and the random player."""

    reader: PolicyReader
    random: RandomPolicy

    def __getitem__(self, policy_id: str) -> Any:
        return self.random if policy_id == RANDOM else self.reader.policy(policy_id)
