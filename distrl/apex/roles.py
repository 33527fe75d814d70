"""Ape-X's three roles as plain classes, no Ray: an epsilon-greedy actor that sends
n-step fragments with initial priorities, a replay shard, and the DQN learner. The rules
both engines follow (updates_due, WeightSync) live here too. The in-process mode
(num_workers=0) runs the roles in turn (LocalApex); apex/remote.py makes them
Ray actors and a learner thread.
"""

from __future__ import annotations

import copy
import math
import threading
import time
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import torch

from distrl.apex.config import ApexConfig
from distrl.apex.dqn import dqn_loss, initial_priorities, nstep_fragment
from distrl.apex.replay import PrioritizedReplay
from distrl.core.learner import Learner
from distrl.core.sampling import make_loop
from distrl.core.types import NStepFragment, Transitions, to_tensor
from distrl.envs.make import EnvSpec, VectorMode
from distrl.models.config import ModelConfig
from distrl.models.encoders import image_layout, is_image
from distrl.models.q_network import QNetwork
from distrl.store.policy_cache import readonly_tensor

Weights = dict[str, np.ndarray]


def frame_stack(obs_space: gym.Space) -> int:
    """Frames per observation for the replay: the leading axis of a uint8 image stack
    ((4, 84, 84) from FrameStackObservation), else 1. Storing each frame once is exact
    whatever the axis holds: consecutive observations share frames only when they do."""
    if not is_image(obs_space) or len(obs_space.shape) != 3:
        return 1
    _, channels_last = image_layout(tuple(obs_space.shape))
    return 1 if channels_last else int(obs_space.shape[0])


class EpsilonGreedy:
    """sampling.Policy: a random action with probability epsilon (one per sub-env), else
    the Q-net's argmax; keeps Q(obs) for the initial priorities."""

    def __init__(self, qnet: QNetwork, epsilons: np.ndarray):
        self.qnet = qnet
        self.epsilons = torch.as_tensor(epsilons, dtype=torch.float32)

    def act(self, obs: torch.Tensor, generator: torch.Generator | None, context: Any = None
            ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        q = self.qnet(obs)
        n, num_actions = q.shape
        epsilons = self.epsilons if context is None else self.epsilons[context.rows]
        explore = torch.rand(n, generator=generator) < epsilons
        random = torch.randint(num_actions, (n,), generator=generator)
        return torch.where(explore, random, q.argmax(-1)), {"q": q}


class ApexActor:
    """Acts with its own epsilons and an inference copy of the Q-net; each collect()
    is one fragment of n-step transitions for a replay shard."""

    def __init__(self, env: EnvSpec, num_envs: int, model: ModelConfig, dueling: bool,
                 epsilons: list[float], gamma: float, n_step: int, seed: int,
                 worker_side_prioritization: bool, env_config: dict[str, Any] | None = None,
                 max_episode_steps: int | None = None, vector_mode: VectorMode = "auto"):
        self.loop = make_loop(env, num_envs, seed, env_config, max_episode_steps, vector_mode)
        obs_space, act_space = self.loop.spaces()
        self.qnet = QNetwork(obs_space, act_space, model, dueling).requires_grad_(False)
        self.policy = EpsilonGreedy(self.qnet, np.asarray(epsilons))
        self.epsilons = list(epsilons)
        self.frame_stack = frame_stack(obs_space)
        self.gamma, self.n_step = gamma, n_step
        self.prioritize = worker_side_prioritization
        self.generator = torch.Generator().manual_seed(seed)
        self.version = -1

    def set_weights(self, weights: Weights, version: int) -> None:
        if version != self.version:
            self.qnet.load_state_dict({k: readonly_tensor(v) for k, v in weights.items()})
            self.version = version

    def get_state(self) -> tuple[bytes | None, torch.Tensor, Weights, int]:
        """Envs (a trusted pickle), the sampling generator, and the weights it acts with
        (often older than the learner's) and their version."""
        weights = {k: v.numpy().copy() for k, v in self.qnet.state_dict().items()}
        return self.loop.get_state(), self.generator.get_state(), weights, self.version

    def set_state(self, state: tuple[bytes | None, torch.Tensor, Weights, int]) -> None:
        self.loop.set_state(state[0])
        self.generator.set_state(state[1])
        self.set_weights(state[2], int(state[3]))

    def collect(self, steps_per_env: int) -> tuple[NStepFragment, np.ndarray | None,
                                                   dict[str, Any]]:
        """(fragment, initial |td| priorities or None, episode stats and counts)."""
        traj = self.loop.collect(self.policy, steps_per_env, self.generator)
        fragment, rows = nstep_fragment(traj, self.gamma, self.n_step, self.frame_stack)
        priorities = None
        if self.prioritize:
            with torch.inference_mode():
                q_last = self.qnet(torch.from_numpy(traj.next_obs))
            q = np.concatenate([traj.extras["q"], q_last.numpy()[None]])  # [T + 1, N, A]
            t, env, k = rows
            priorities = initial_priorities(q[t, env], q[t + k, env], fragment.actions,
                                            fragment.rewards, fragment.discounts)
        stats = {"env_steps": traj.env_steps, "transitions": len(fragment),
                 "episode_returns": traj.episode_returns,
                 "episode_lengths": traj.episode_lengths,
                 "episode_envs": traj.episode_envs, "version": self.version}
        return fragment, priorities, stats

    def close(self) -> None:
        self.loop.close()


class ReplayShard:
    """One PrioritizedReplay with its own sampling RNG and throughput counters."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: str,
                 frame_stack: int, alpha: float, eps: float, seed: int, first_id: int = 0):
        self.replay = PrioritizedReplay(capacity, obs_shape, np.dtype(obs_dtype),
                                        frame_stack=frame_stack, alpha=alpha, eps=eps,
                                        first_id=first_id)
        self.rng = np.random.default_rng(seed)
        self.sampled = 0

    def add(self, fragment: NStepFragment, priorities: np.ndarray | None) -> int:
        self.replay.add(fragment, priorities)
        return len(fragment)

    def sample(self, n: int, beta: float) -> tuple[Transitions, np.ndarray, np.ndarray] | None:
        """A prioritized batch, or None while the shard is empty."""
        if len(self.replay) == 0:
            return None
        self.sampled += n
        return self.replay.sample(n, beta, self.rng)

    def update_priorities(self, indices: np.ndarray, td_abs: np.ndarray) -> None:
        self.replay.update_priorities(indices, td_abs)

    def priorities(self, indices: np.ndarray) -> np.ndarray:
        return self.replay.priorities(indices)

    def stats(self) -> dict[str, int]:
        return {"size": len(self.replay), "sampled": self.sampled,
                "bytes_per_transition": self.replay.bytes_per_transition()}

    def get_state(self) -> dict[str, Any]:
        """The replay as tensors and numbers (loadable with weights_only=True), its
        sampling RNG and counter."""
        replay = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                  for k, v in self.replay.state_dict().items()}
        return {"replay": replay, "rng": self.rng.bit_generator.state, "sampled": self.sampled}

    def set_state(self, state: dict[str, Any]) -> None:
        self.replay.load_state_dict({k: v.numpy() if torch.is_tensor(v) else v
                                     for k, v in state["replay"].items()})
        self.rng.bit_generator.state = state["rng"]
        self.sampled = int(state["sampled"])


class DQNLearner:
    """Online and target Q-nets and the shared Learner; ``lock`` guards the weights
    between the learner thread's updates and readers in other threads."""

    def __init__(self, obs_space: gym.Space, act_space: gym.Space, config: ApexConfig,
                 device: torch.device):
        self.config = config
        self.device = device
        self.online = QNetwork(obs_space, act_space, config.model, config.dueling).to(device)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.learner = Learner(self.online, config.lr, config.grad_clip,
                               eps=config.adam_epsilon)
        self.lock = threading.Lock()
        self.trained = 0  # transitions trained on
        self.updates = 0
        self.target_updates = 0
        self.last_target_update = 0
        self.last_metrics: dict[str, float] = {}

    def update(self, batch: Transitions, is_weights: np.ndarray
               ) -> tuple[np.ndarray, dict[str, float]]:
        """One gradient step on a replayed batch; returns the new |td| for its priorities."""
        obs, next_obs = self._tensor(batch.obs), self._tensor(batch.next_obs)
        n = len(batch)
        with self.lock:
            q_both = self.online(torch.cat([obs, next_obs]))  # one forward for both halves
            with torch.no_grad():
                q_next_target = self.target(next_obs)
            loss, td_abs, metrics = dqn_loss(
                q_both[:n], q_both[n:].detach() if self.config.double_q else None,
                q_next_target, self._tensor(batch.actions), self._tensor(batch.rewards),
                self._tensor(batch.discounts), self._tensor(is_weights),
                double_q=self.config.double_q)
            metrics.update(self.learner.step(loss, n))
            self.trained += n
            self.updates += 1
            if self.trained - self.last_target_update >= self.config.target_network_update_freq:
                self.target.load_state_dict(self.online.state_dict())
                self.last_target_update = self.trained
                self.target_updates += 1
        self.last_metrics = {k: float(v) for k, v in metrics.items()}
        return td_abs.cpu().numpy(), self.last_metrics

    def _tensor(self, x: np.ndarray) -> torch.Tensor:
        return to_tensor(x, self.device)

    def weights(self) -> Weights:
        """A consistent copy of the online net's weights (what actors load)."""
        with self.lock:
            return {k: v.detach().cpu().numpy().copy()
                    for k, v in self.online.state_dict().items()}

    def snapshot(self) -> QNetwork:
        """A frozen copy of the online net, e.g. for evaluation while training goes on."""
        with self.lock:
            return copy.deepcopy(self.online).requires_grad_(False)

    def get_state(self) -> dict[str, Any]:
        with self.lock:
            state = self.learner.get_state()
            target = {k: v.detach().cpu().clone() for k, v in self.target.state_dict().items()}
        return {**state, "target": target,
                "counters": torch.tensor([self.trained, self.updates, self.target_updates,
                                          self.last_target_update])}

    def set_state(self, state: dict[str, Any]) -> None:
        with self.lock:
            self.learner.set_state(state)
            self.target.load_state_dict(state["target"])
            (self.trained, self.updates, self.target_updates,
             self.last_target_update) = (int(x) for x in state["counters"])


class ApexEngine(Protocol):
    """What train_apex drives: LocalApex (one process) or apex.remote.ApexRuntime (Ray).
    Both follow the rules below (updates_due, WeightSync); only transport differs."""

    epsilons: list[float]
    """Each actor's epsilon (in process: each sub-env's)."""
    stored: int
    """Transitions in the replay (added, minus those lost with a shard)."""

    def iterate(self, min_time_s: float, min_env_steps: int) -> dict[str, Any]:
        """Act, store and learn for at least ``min_time_s`` and ``min_env_steps``;
        returns env_steps, returns, lengths, sampled and time_s."""
        ...

    def metrics(self) -> dict[str, float]: ...

    def close(self) -> None: ...


def updates_due(config: ApexConfig, stored: int, trained: int) -> int:
    """Learner batches owed after ``stored`` transitions of which ``trained`` were
    trained on: none before learning_starts; with training_intensity, enough that the
    learner trains on intensity x stored transitions; without it, one (in process: one
    per fragment; on Ray: the learner takes every batch the shards can send)."""
    if stored < config.learning_starts:
        return 0
    ratio = config.training_intensity
    if ratio is None:
        return 1
    return max(0, math.ceil((ratio * stored - trained) / config.train_batch_size))


def batches_to_request(config: ApexConfig, stored: int, trained: int, pending: int) -> int:
    """Replay batches the driver asks the shards for now, with ``pending`` already queued
    for the learner or requested. With training_intensity, only those still owed: more
    would train ahead of the data, on batches sampled with stale priorities, by an amount
    that depends on timing. Without, enough to fill the queue."""
    due = updates_due(config, stored, trained)
    if config.training_intensity is None:
        return config.learner_queue_size - pending if due else 0
    return min(due, config.learner_queue_size) - pending


SHARD_ID_SPAN = 1 << 48
"""Insertion ids a shard incarnation may hand out: the r-th replacement of a shard
counts its ids from r x SHARD_ID_SPAN, so a priority update still in flight for its dead
predecessor finds no id of the new shard and is dropped (PrioritizedReplay first_id)."""


def next_shard(in_flight: list[int], sampled: list[int], limit: int) -> int | None:
    """The shard to ask for the next replayed batch: of those with fewer than ``limit``
    requests in flight, the one with the fewest, then the one sampled least so far. When
    the learner is the bottleneck every shard is then sampled alike (taking free slots in
    shard order gave shard 0 nearly all of them). None when all are at the limit."""
    open_shards = [s for s, n in enumerate(in_flight) if n < limit]
    return min(open_shards, key=lambda s: (in_flight[s], sampled[s]), default=None)


@dataclass
class WeightSync:
    """When one actor gets the learner's weights: before its first fragment, then after
    every max_weight_sync_delay env steps it sent, and only when the learner has a newer
    version than the actor holds."""

    delay: int
    """ApexConfig.max_weight_sync_delay."""
    since: int = 0
    """Env steps the actor sent since its last sync."""
    version: int = -1
    """The version the actor holds; -1: none yet (a new or replaced actor)."""

    def due(self, learner_version: int) -> bool:
        """Whether to send ``learner_version`` with the actor's next fragment (the actor
        then holds it)."""
        if self.version >= 0 and self.since < self.delay:
            return False
        self.since = 0
        if learner_version == self.version:
            return False
        self.version = learner_version
        return True


class LocalApex:
    """Act, store, learn in turn in this process; no Ray."""

    def __init__(self, config: ApexConfig, learner: DQNLearner, actor: ApexActor,
                 shard: ReplayShard, reporting: set[int], epsilons: list[float]):
        self.config, self.learner, self.actor, self.shard = config, learner, actor, shard
        self.reporting = np.array(sorted(reporting))  # sub-envs whose episodes are reported
        self.epsilons = epsilons
        self.sync = WeightSync(config.max_weight_sync_delay)
        self.stored = 0
        self.weight_syncs = 0
        self.trained0 = learner.trained  # training_intensity counts from here

    def iterate(self, min_time_s: float, min_env_steps: int) -> dict[str, Any]:
        t0 = time.perf_counter()
        out = {"env_steps": 0, "returns": [], "lengths": [], "sampled": 0}
        while (time.perf_counter() - t0 < min_time_s) or out["env_steps"] < min_env_steps:
            if self.sync.due(self.learner.updates):
                self.actor.set_weights(self.learner.weights(), self.learner.updates)
                self.weight_syncs += 1
            fragment, priorities, stats = self.actor.collect(self.config.rollout_fragment_length)
            self.shard.add(fragment, priorities)
            self.stored += len(fragment)
            self.sync.since += stats["env_steps"]
            out["env_steps"] += stats["env_steps"]
            shown = np.isin(stats["episode_envs"], self.reporting)
            out["returns"].extend(stats["episode_returns"][shown].tolist())
            out["lengths"].extend(stats["episode_lengths"][shown].tolist())
            for _ in range(updates_due(self.config, self.stored,
                                       self.learner.trained - self.trained0)):
                batch, indices, is_weights = self.shard.sample(
                    self.config.train_batch_size, self.config.prioritized_replay_beta)
                td_abs, _ = self.learner.update(batch, is_weights)
                self.shard.update_priorities(indices, td_abs)
                out["sampled"] += len(batch)
        out["time_s"] = time.perf_counter() - t0
        return out

    def get_state(self) -> dict[str, Any]:
        """The shard and the loop's counters (the actor's envs are saved apart: they are a
        pickle)."""
        return {"shard": self.shard.get_state(), "stored": self.stored,
                "weight_syncs": self.weight_syncs, "trained0": self.trained0,
                "sync": [self.sync.since, self.sync.version]}

    def set_state(self, state: dict[str, Any]) -> None:
        self.shard.set_state(state["shard"])
        self.stored, self.weight_syncs = int(state["stored"]), int(state["weight_syncs"])
        self.trained0 = int(state["trained0"])
        self.sync.since, self.sync.version = (int(x) for x in state["sync"])

    def metrics(self) -> dict[str, float]:
        stats = self.shard.stats()
        return {"replay/size": float(stats["size"]),
                "replay/bytes_per_transition": float(stats["bytes_per_transition"]),
                "learner/queue_size": 0.0, "apex/weight_syncs": float(self.weight_syncs)}

    def close(self) -> None:
        self.actor.close()

