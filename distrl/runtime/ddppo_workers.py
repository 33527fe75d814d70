"""DD-PPO workers as Ray actors: rendezvous, rounds, straggler preemption, recovery.

Each worker is an EnvRunner plus a full learner (model, Adam) in one torch.distributed
group. Rank 0 hosts the group's TCPStore on a free port of its node; the store also
counts the workers that finished collecting, which is how stragglers learn to stop.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import ray
import torch
import torch.distributed as dist

from distrl.algos.ddppo import (
    CollectiveError,
    DDPPOConfig,
    Preemption,
    WeightedAllReduce,
    collective,
    min_steps_per_env,
    pooled_mean_std,
    workers_to_wait_for,
)
from distrl.algos.ppo import ppo_update
from distrl.algos.shm_allreduce import SHM_DIR, ShmAllReduce, shm_supported
from distrl.env_runner import EnvRunner
from distrl.nets import ActorCritic
from distrl.types import PPOBatch

LearnerState = dict[str, Any]  # {"model": state_dict, "optimizer": state_dict | None}


@dataclass
class RoundResult:
    """What one worker reports for one round."""

    env_steps: int  # env steps taken, reset steps included
    samples: int  # samples trained on (fewer than the fragment when preempted)
    preempted_samples: int  # samples not collected because the worker was preempted
    episode_returns: np.ndarray  # [E] episodes that ended this round
    episode_lengths: np.ndarray  # [E]
    sample_s: float
    learn_s: float
    allreduce_s: float  # time inside the gradient all-reduces
    learner: dict[str, float]  # ppo_update's metrics on this worker
    weights: dict[str, np.ndarray] | None  # rank 0's weights, when the driver keeps a copy


class DDPPOWorker:
    """Samples with its own envs and trains its replica; all replicas stay identical."""

    def __init__(self, env, config: DDPPOConfig, seed: int):
        torch.set_num_threads(1)  # each worker gets one CPU; small nets run fastest on one
        self.cfg = config
        self.runner = EnvRunner(env, config.num_envs_per_worker, config.model, config.gamma,
                                config.gae_lambda, seed)
        self.device = torch.device("cuda" if config.num_gpus_per_worker > 0 else "cpu")
        self.model = ActorCritic(*self.runner.spaces(), config.model).to(self.device)
        if self.device.type == "cpu":
            self.runner.model = self.model  # sample with the very weights being trained
        self.opt = torch.optim.Adam(self.model.parameters(), lr=config.lr_at(0), eps=1e-5,
                                    fused=True)
        self.generator = torch.Generator().manual_seed(seed)
        self.hook = WeightedAllReduce()
        self.store: dist.TCPStore | None = None
        self.snapshot: LearnerState | None = None
        self.rank, self.world_size = -1, 0

    def ready(self) -> bool:
        return True

    # --- the process group -------------------------------------------------------------

    def open_store(self, world_size: int) -> tuple[str, int]:
        """As rank 0: host the group's store on a free port; returns (node IP, port)."""
        self.leave()
        ip = ray.util.get_node_ip_address()
        self.store = dist.TCPStore(ip, 0, world_size, is_master=True, timeout=self._timeout(),
                                   wait_for_workers=False)
        return ip, self.store.port

    def join(self, ip: str, port: int, rank: int, world_size: int) -> None:
        if rank != 0:
            self.leave()
            self.store = dist.TCPStore(ip, port, world_size, is_master=False,
                                       timeout=self._timeout())
        dist.init_process_group(self.cfg.backend, store=self.store, rank=rank,
                                world_size=world_size, timeout=self._timeout())
        if dist.get_world_size() != world_size:  # mpi takes its world from mpirun
            raise RuntimeError(
                f"backend {self.cfg.backend!r} formed a world of {dist.get_world_size()} "
                f"processes, not the {world_size} Ray workers; use backend='gloo' or 'nccl'."
            )
        self.rank, self.world_size = rank, world_size
        self.hook = WeightedAllReduce(self._node_local_reduce())

    def _node_local_reduce(self) -> ShmAllReduce | None:
        """A shared-memory gradient sum when every rank is on this node, else None (gloo)."""
        cfg, store = self.cfg, self.store
        store.set(f"node/{self.rank}", f"{ray.util.get_node_ip_address()} {os.getpid()}")
        peers = [store.get(f"node/{r}").decode().split() for r in range(self.world_size)]
        if (self.world_size == 1 or not cfg.shm_allreduce or cfg.backend != "gloo"
                or self.device.type != "cpu" or not shm_supported()
                or len({ip for ip, _ in peers}) > 1):
            return None
        numel = sum(p.numel() for p in self.model.parameters()) + 1  # + the sample count
        path = f"{SHM_DIR}/distrl_ddppo_{os.getpid()}_{uuid.uuid4().hex}"
        if self.rank == 0:
            reduce = ShmAllReduce(path, 0, self.world_size, numel, [int(p) for _, p in peers],
                                  cfg.collective_timeout_s, create=True)
            store.set("shm_path", path)
        else:
            path = store.get("shm_path").decode()
            reduce = ShmAllReduce(path, self.rank, self.world_size, numel,
                                  [int(p) for _, p in peers], cfg.collective_timeout_s,
                                  create=False)
        dist.barrier()  # every rank has it mapped: the name can go
        if self.rank == 0:
            os.unlink(path)
        return reduce

    def leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        self.store = None

    def _timeout(self) -> timedelta:
        return timedelta(seconds=self.cfg.collective_timeout_s)

    # --- a round: sample, then minibatch SGD with all-reduced gradients -----------------

    def round(self, index: int, env_steps_total: int, send_weights: bool) -> RoundResult:
        cfg = self.cfg
        self.snapshot = self.learner_state()  # what rollback() returns to
        t0 = time.perf_counter()
        key = f"finished/{index}"
        stop_early = self._preemption(key)
        rollout = self.runner.sample(cfg.rollout_fragment_length, stop_early=stop_early)
        if stop_early is not None:  # only preemption reads the count
            self._count(key, 1)
        t1 = time.perf_counter()
        adv_stats = pooled_mean_std(rollout.advantages, self.device, self.hook.reduce)
        batch = PPOBatch.from_rollout(rollout, self.device, adv_stats)
        for group in self.opt.param_groups:
            group["lr"] = cfg.lr_at(env_steps_total)
        self.hook.seconds = 0.0
        learner = ppo_update(self.model, self.opt, batch, cfg, 0.0,
                             cfg.entropy_coeff_at(env_steps_total), self.generator, self.hook,
                             cfg.num_minibatches)
        if self.runner.model is not self.model:  # GPU learner, CPU sampler
            self.runner.model.load_state_dict(self.model.state_dict())
        return RoundResult(
            env_steps=rollout.env_steps, samples=rollout.size,
            preempted_samples=cfg.worker_batch_size - rollout.size,
            episode_returns=rollout.episode_returns, episode_lengths=rollout.episode_lengths,
            sample_s=t1 - t0, learn_s=time.perf_counter() - t1, allreduce_s=self.hook.seconds,
            learner=learner, weights=self.weights() if send_weights else None,
        )

    def _preemption(self, key: str) -> Preemption | None:
        needed = workers_to_wait_for(self.world_size, self.cfg.preemption_threshold)
        if needed >= self.world_size:
            return None
        return Preemption(needed, min_steps_per_env(self.cfg), lambda: self._count(key, 0))

    def _count(self, key: str, finished: int) -> int:
        """Add to this round's count of finished workers in rank 0's store; returns it."""
        with collective("the group's store"):
            return self.store.add(key, finished)

    # --- state: weights, learner (model + optimizer), envs --------------------------------

    def weights(self) -> dict[str, np.ndarray]:
        return {k: v.detach().cpu().numpy() for k, v in self.model.state_dict().items()}

    def learner_state(self) -> LearnerState:
        to_cpu = lambda t: t.detach().to("cpu", copy=True) if torch.is_tensor(t) else t  # noqa: E731
        return {"model": {k: to_cpu(v) for k, v in self.model.state_dict().items()},
                "optimizer": _map_tensors(self.opt.state_dict(), to_cpu)}

    def set_learner_state(self, state: LearnerState) -> None:
        self.model.load_state_dict(state["model"])
        if self.runner.model is not self.model:
            self.runner.model.load_state_dict(state["model"])
        if state.get("optimizer") is not None:
            self.opt.load_state_dict(state["optimizer"])

    def rollback(self) -> None:
        """After a failed round: back to the round's start, out of the broken group."""
        if self.snapshot is not None:
            self.set_learner_state(self.snapshot)
        self.leave()

    def get_state(self) -> tuple[bytes | None, torch.Tensor]:
        return self.runner.get_state(), self.generator.get_state()

    def set_state(self, state: tuple[bytes | None, torch.Tensor]) -> None:
        self.runner.set_state(state[0])
        self.generator.set_state(state[1])


def _map_tensors(tree: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(tree, dict):
        return {k: _map_tensors(v, fn) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_map_tensors(v, fn) for v in tree)
    return fn(tree)


class DDPPOWorkerGroup:
    """The driver's handle on the workers: forms the group, runs rounds, and replaces a
    worker that dies (the survivors roll back to the round's start, a new worker gets
    their state, the group re-forms and the round is taken again)."""

    def __init__(self, make_kwargs: Callable[[int, int], dict[str, Any]], cfg: DDPPOConfig,
                 start_timeout_s: float = 120.0):
        self.cfg = cfg
        self._make_kwargs = make_kwargs  # (worker index, restart count) -> DDPPOWorker kwargs
        self._cls = ray.remote(num_cpus=cfg.num_cpus_per_worker,
                               num_gpus=cfg.num_gpus_per_worker)(DDPPOWorker)
        self.start_timeout_s = start_timeout_s
        self.restarts = [0] * cfg.num_workers
        self.actors = [self._cls.remote(**make_kwargs(i, 0)) for i in range(cfg.num_workers)]
        self._await("start", {i: a.ready.remote() for i, a in enumerate(self.actors)})
        self._form()

    def _form(self) -> None:
        world = len(self.actors)
        ip, port = ray.get(self.actors[0].open_store.remote(world))
        self._await("join the process group",
                    {r: a.join.remote(ip, port, r, world) for r, a in enumerate(self.actors)})

    def _await(self, what: str, futures: dict[int, ray.ObjectRef]) -> list[Any]:
        """Every result, or the first worker's error as soon as it comes: a worker that
        fails to set up must not leave the others waiting for it until a timeout."""
        index = {f: i for i, f in futures.items()}
        pending, results = list(futures.values()), {}
        deadline = time.monotonic() + self.start_timeout_s
        while pending:
            done, pending = ray.wait(pending, num_returns=1,
                                     timeout=max(0.0, deadline - time.monotonic()))
            if not done:
                late = sorted(index[f] for f in pending)
                cpus, gpus = self.cfg.num_cpus_per_worker, self.cfg.num_gpus_per_worker
                raise RuntimeError(
                    f"DD-PPO workers {late} did not {what} within {self.start_timeout_s:.0f} s. "
                    f"Each asks for {cpus} CPU and {gpus} GPU; the cluster has "
                    f"{ray.cluster_resources()}. Lower num_workers or the per-worker resources."
                )
            try:
                results[index[done[0]]] = ray.get(done[0])
            except Exception as err:
                detail = str(_cause(err)).strip()  # a traceback whose last line says why
                raise RuntimeError(f"DD-PPO worker {index[done[0]]} failed to {what}: "
                                   f"{detail.splitlines()[-1]}\n\n{detail}") from err
        return [results[i] for i in sorted(results)]

    def set_learner_state(self, state: LearnerState) -> None:
        ref = ray.put(state)
        self._await("load the learner state",
                    {i: a.set_learner_state.remote(ref) for i, a in enumerate(self.actors)})

    def run_round(self, index: int, env_steps_total: int, send_weights: bool) -> list[RoundResult]:
        for _attempt in range(self.cfg.max_worker_restarts + 1):
            futures = [a.round.remote(index, env_steps_total, send_weights and r == 0)
                       for r, a in enumerate(self.actors)]
            outcomes, failed = self._settle(futures)
            if not failed:
                return outcomes
            dead = [i for i, e in failed.items() if isinstance(e, ray.exceptions.RayActorError)]
            self._recover(dead, failed)
        raise RuntimeError(f"DD-PPO round {index} failed {self.cfg.max_worker_restarts + 1} "
                           f"times in a row; last errors: {failed}")

    def _settle(self, futures: list[ray.ObjectRef]) -> tuple[list[Any], dict[int, Exception]]:
        """Every worker's result or error. A worker's own error (a NaN from its env, say)
        is raised at once; a death or a failed collective is waited out on every worker
        (the survivors' collectives fail within collective_timeout_s) for recovery."""
        index = {f: i for i, f in enumerate(futures)}
        outcomes: list[Any] = [None] * len(futures)
        pending = list(futures)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            outcome = outcomes[index[done[0]]] = _outcome(done[0])
            if isinstance(outcome, Exception) and not _is_group_failure(outcome):
                raise _cause(outcome)
        return outcomes, {i: o for i, o in enumerate(outcomes) if isinstance(o, Exception)}

    def _recover(self, dead: list[int], failed: dict[int, Exception]) -> None:
        print(f"distrl: DD-PPO round failed (dead workers {dead}; errors: "
              f"{ {i: type(_cause(e)).__name__ for i, e in failed.items()} }); rolling back "
              "and re-forming the group", flush=True)
        alive = []
        for i, a in enumerate(self.actors):
            if i in dead:
                continue
            try:
                ray.get(a.rollback.remote(), timeout=self.cfg.collective_timeout_s + 30)
                alive.append(i)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                dead.append(i)
        if not alive:
            raise RuntimeError(
                f"all {len(self.actors)} DD-PPO workers died in the same round, so no worker "
                "holds the last good weights; continue from the last checkpoint with --resume."
            )
        state = ray.get(self.actors[alive[0]].learner_state.remote())
        for i in dead:
            if self.restarts[i] >= self.cfg.max_worker_restarts:
                raise RuntimeError(f"DD-PPO worker {i} died {self.restarts[i] + 1} times; giving "
                                   f"up. Last error: {_cause(failed.get(i, 'unresponsive'))}")
            self.restarts[i] += 1
            ray.kill(self.actors[i])
            self.actors[i] = self._cls.remote(**self._make_kwargs(i, self.restarts[i]))
            print(f"distrl: DD-PPO worker {i} replaced (restart {self.restarts[i]}/"
                  f"{self.cfg.max_worker_restarts})", flush=True)
        ref = ray.put(state)
        self._await("load the survivors' state",
                    {i: self.actors[i].set_learner_state.remote(ref) for i in dead})
        self._form()

    def learner_state(self) -> LearnerState:
        return ray.get(self.actors[0].learner_state.remote())

    def get_states(self) -> list[Any]:
        return ray.get([a.get_state.remote() for a in self.actors])

    def set_states(self, states: list[Any]) -> None:
        ray.get([a.set_state.remote(s) for a, s in zip(self.actors, states, strict=True)])

    def close(self) -> None:
        for a in self.actors:
            ray.kill(a)


def _outcome(future: ray.ObjectRef) -> Any:
    try:
        return ray.get(future)
    except Exception as err:  # sorted out by the caller
        return err


def _is_group_failure(err: Exception) -> bool:
    """A dead worker, or a collective or store that failed because of one."""
    return isinstance(err, ray.exceptions.RayActorError) or isinstance(_cause(err), CollectiveError)


def _cause(err: Any) -> Any:
    """The worker's own exception inside Ray's wrapper."""
    return getattr(err, "cause", None) or err
