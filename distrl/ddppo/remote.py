"""DD-PPO workers as Ray actors: rendezvous, rounds, straggler preemption, recovery.

Each worker is an EnvRunner plus a Learner (model, Adam, the all-reduce grad hook) in
one torch.distributed group. Rank 0 hosts the group's TCPStore on a free port (on
loopback when every worker shares its node); the store also tells stragglers how many
workers finished collecting. Everything a worker reads from the store that could
change what it does (finish marks, peers, the shm path) is signed with a per-run
secret that travels through Ray, never through the store, so another local user who
connects to the store can neither force preemptions nor redirect the shared memory.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import socket
import time
import warnings
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import numpy as np
import ray
import torch
import torch.distributed as dist

from distrl.core.config import RunConfig
from distrl.core.learner import Learner, LearnerState
from distrl.core.sampling import seed_for
from distrl.core.types import PPOBatch
from distrl.ddppo.collective import (
    CollectiveError,
    Preemption,
    WeightedAllReduce,
    collective,
    min_steps_per_env,
    pooled_mean_std,
    workers_to_wait_for,
)
from distrl.ddppo.config import DDPPOConfig
from distrl.ddppo.shm_allreduce import ShmAllReduce, ShmUnavailable, shm_supported
from distrl.envs.make import VectorMode
from distrl.models.recurrent import actor_critic
from distrl.ppo.env_runner import EnvRunner
from distrl.ppo.loss import ppo_update
from distrl.runtime.supervisor import Fault, MakeKwargs, SupervisedGroup, Supervisor


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

    def __init__(self, env, config: DDPPOConfig, seed: int, secret: bytes,
                 env_config: dict[str, Any] | None = None,
                 max_episode_steps: int | None = None, vector_mode: VectorMode = "auto"):
        self.cfg = config
        self.secret = secret
        self.runner = EnvRunner(env, config.num_envs_per_worker, config.model, config.gamma,
                                config.gae_lambda, seed, env_config,
                                max_episode_steps=max_episode_steps, vector_mode=vector_mode)
        self.device = torch.device("cuda" if config.num_gpus_per_worker > 0 else "cpu")
        model = actor_critic(*self.runner.spaces(), config.model).to(self.device)
        if self.device.type == "cpu":
            self.runner.use_model(model)  # sample with the very weights being trained
        self.learner = Learner(model, config.lr_at(0), config.grad_clip, WeightedAllReduce())
        # Minibatch shuffling: a stream of its own, apart from the action sampler's.
        self.generator = torch.Generator().manual_seed(seed_for(seed, 1))
        self.store: dist.TCPStore | None = None
        self.snapshot: LearnerState | None = None
        self.rank, self.world_size = -1, 0

    def node_ip(self) -> str:
        return ray.util.get_node_ip_address()

    # --- the process group -------------------------------------------------------------

    def open_store(self, world_size: int, loopback: bool) -> tuple[str, int]:
        """As rank 0: host the group's store on a free port, bound to 127.0.0.1 when every
        worker is on this node, else to the address Ray uses for this node (never to
        every interface); returns (address to join, port)."""
        self.leave()
        ip = "127.0.0.1" if loopback else ray.util.get_node_ip_address()
        # TCPStore binds every interface unless handed a socket that is already bound.
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind((ip, 0))
        sock.listen(128)
        self.store = dist.TCPStore(ip, sock.getsockname()[1], world_size, is_master=True,
                                   timeout=self._timeout(), wait_for_workers=False,
                                   master_listen_fd=sock.detach())
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
        self.learner.grad_hook = WeightedAllReduce(self._node_local_reduce())

    def _node_local_reduce(self) -> ShmAllReduce | None:
        """A shared-memory gradient sum when every rank is on this node, else None (gloo).
        Rank 0 publishes the file's path, or "" when /dev/shm has no room for it."""
        cfg = self.cfg
        self._signed_set(f"node/{self.rank}", f"{ray.util.get_node_ip_address()} {os.getpid()}")
        peers = [self._signed_get(f"node/{r}").split() for r in range(self.world_size)]
        if (self.world_size == 1 or not cfg.shm_allreduce or cfg.backend != "gloo"
                or self.device.type != "cpu" or not shm_supported()
                or len({ip for ip, _ in peers}) > 1):
            return None
        numel = sum(p.numel() for p in self.learner.params) + 1  # + the sample count
        pids = [int(pid) for _, pid in peers]
        reduce = None
        if self.rank == 0:
            try:
                reduce = ShmAllReduce.create(self.world_size, numel, pids,
                                             cfg.collective_timeout_s)
            except ShmUnavailable as err:
                warnings.warn(str(err), stacklevel=1)
            self._signed_set("shm_path", reduce.path if reduce else "")
        else:
            path = self._signed_get("shm_path")
            reduce = path and ShmAllReduce.attach(path, self.rank, self.world_size, numel,
                                                  pids, cfg.collective_timeout_s)
        try:
            dist.barrier()  # every rank has it mapped (or knows to use gloo): the name can go
        finally:
            if self.rank == 0 and reduce:
                reduce.unlink()
        return reduce or None

    def _signed_set(self, key: str, value: str) -> None:
        with collective("the group's store"):
            self.store.set(key, f"{self._sign(key, value)} {value}")

    def _signed_get(self, key: str) -> str:
        """The value a group member set, or CollectiveError when its signature is wrong."""
        value = self._verified(key)
        if value is None:
            raise CollectiveError(f"the group's store holds a forged value for {key!r}")
        return value

    def _verified(self, key: str) -> str | None:
        """The value at ``key`` (waiting for it), or None when a group member did not sign it."""
        with collective("the group's store"):
            mac, _, value = self.store.get(key).decode().partition(" ")
        return value if hmac.compare_digest(mac, self._sign(key, value)) else None

    def _sign(self, key: str, value: str) -> str:
        return hmac.new(self.secret, f"{key}={value}".encode(), hashlib.sha256).hexdigest()

    def leave(self) -> None:
        if dist.is_initialized():
            dist.destroy_process_group()
        self.store = None

    def _timeout(self) -> timedelta:
        return timedelta(seconds=self.cfg.collective_timeout_s)

    # --- a round: sample, then minibatch SGD with all-reduced gradients -----------------

    def round(self, index: int, env_steps_total: int, send_weights: bool) -> RoundResult:
        cfg, learner = self.cfg, self.learner
        self.snapshot = learner.get_state()  # what rollback() returns to
        t0 = time.perf_counter()
        stop_early = self._preemption(index)
        rollout = self.runner.sample(cfg.rollout_fragment_length, stop_early=stop_early)
        if stop_early is not None:  # only preemption reads the marks
            self._signed_set(f"finished/{index}/{self.rank}", "1")
        t1 = time.perf_counter()
        hook = learner.grad_hook
        adv_stats = cfg.advantage_stats() or pooled_mean_std(rollout.advantages, self.device,
                                                             hook.reduce)
        batch = PPOBatch.from_rollout(rollout, self.device, adv_stats)
        learner.set_lr(cfg.lr_at(env_steps_total))
        hook.seconds = 0.0
        metrics = ppo_update(learner, batch, cfg, 0.0, cfg.entropy_coeff_at(env_steps_total),
                             self.generator, cfg.num_minibatches)
        if self.runner.model is not learner.model:  # GPU learner, CPU sampler
            self.runner.model.load_state_dict(learner.model.state_dict())
        return RoundResult(
            env_steps=rollout.env_steps, samples=rollout.size,
            preempted_samples=cfg.worker_batch_size - rollout.size,
            episode_returns=rollout.episode_returns, episode_lengths=rollout.episode_lengths,
            sample_s=t1 - t0, learn_s=time.perf_counter() - t1, allreduce_s=hook.seconds,
            learner=metrics, weights=learner.weights() if send_weights else None,
        )

    def _preemption(self, index: int) -> Preemption | None:
        needed = workers_to_wait_for(self.world_size, self.cfg.preemption_threshold)
        if needed >= self.world_size:
            return None
        finished: set[int] = set()

        def count() -> int:
            """Finished workers of this round: one store round trip per rank not yet seen."""
            for r in set(range(self.world_size)) - finished - {self.rank}:
                key = f"finished/{index}/{r}"
                with collective("the group's store"):
                    if not self.store.check([key]):
                        continue
                if self._verified(key) is not None:  # a forged mark is not counted
                    finished.add(r)
            return len(finished)

        return Preemption(needed, min_steps_per_env(self.cfg), count)

    # --- state: learner (model + optimizer), envs ------------------------------------------

    def learner_state(self) -> LearnerState:
        return self.learner.get_state()

    def set_learner_state(self, state: LearnerState) -> None:
        self.learner.set_state(state)
        if self.runner.model is not self.learner.model:
            self.runner.model.load_state_dict(state["model"])

    def rollback(self) -> None:
        """After a failed round: back to the round's start, out of the broken group."""
        if self.snapshot is not None:
            self.set_learner_state(self.snapshot)
        self.leave()

    def get_state(self) -> tuple[Any, torch.Tensor]:
        return self.runner.get_state(), self.generator.get_state()

    def set_state(self, state: tuple[Any, torch.Tensor]) -> None:
        self.runner.set_state(state[0])
        self.generator.set_state(state[1])


class DDPPOWorkerGroup(SupervisedGroup):
    """The driver's handle on the workers: forms the group, runs rounds, and replaces a
    worker that dies or hangs (the survivors roll back to the round's start, a new
    worker gets their state, the group re-forms and the round is taken again)."""

    def __init__(self, make_kwargs: MakeKwargs, cfg: DDPPOConfig, run: RunConfig):
        self.cfg = cfg
        self.max_retakes = run.max_restarts + 1
        secret = secrets.token_bytes(32)  # per run; reaches the workers through Ray only
        self.sup = Supervisor(
            "ddppo_workers", DDPPOWorker,
            lambda i, restart: {**make_kwargs(i, restart), "secret": secret},
            cfg.num_workers, max_restarts=run.max_restarts, call_timeout_s=run.actor_timeout_s,
            resources={"num_cpus": cfg.num_cpus_per_worker, "num_gpus": cfg.num_gpus_per_worker},
            placement_strategy=run.placement_strategy,
            group_failure=lambda err: isinstance(err, CollectiveError))
        try:
            self._form()
        except BaseException:
            self.sup.close()
            raise

    def _form(self) -> None:
        actors = self.sup.actors
        ips = self.sup.wait_all("report its node", {i: a.node_ip.remote()
                                                    for i, a in enumerate(actors)})
        world = len(actors)
        ip, port = self.sup.wait_all("open the group's store",
                                     {0: actors[0].open_store.remote(world, len(set(ips)) == 1)})[0]
        self.sup.wait_all("join the process group",
                          {r: a.join.remote(ip, port, r, world) for r, a in enumerate(actors)})

    def set_learner_state(self, state: LearnerState) -> None:
        ref = ray.put(state)
        actors = enumerate(self.sup.actors)
        self.sup.wait_all("load the learner state",
                          {i: a.set_learner_state.remote(ref) for i, a in actors})

    def run_round(self, index: int, env_steps_total: int, send_weights: bool) -> list[RoundResult]:
        for _ in range(self.max_retakes):
            results, faults = self.sup.settle(
                {r: a.round.remote(index, env_steps_total, send_weights and r == 0)
                 for r, a in enumerate(self.sup.actors)})
            if not faults:
                return [results[r] for r in sorted(results)]
            self._recover(faults)
        raise RuntimeError(f"DD-PPO round {index} failed {self.max_retakes} times in a row; "
                           f"last faults: { {i: f.reason for i, f in faults.items()} }")

    def _recover(self, faults: dict[int, Fault]) -> None:
        """Survivors return to the round's start and leave the group; the dead and hung
        are replaced with the survivors' state; the group re-forms."""
        print(f"distrl: DD-PPO round failed ({ {i: f.reason for i, f in faults.items()} }); "
              "rolling back and re-forming the group", flush=True)
        gone = {i: f for i, f in faults.items() if f.replace}
        alive = [i for i in range(len(self.sup.actors)) if i not in gone]
        _, rollback_faults = self.sup.settle(
            {i: self.sup.actors[i].rollback.remote() for i in alive}, raise_own=False)
        gone.update(rollback_faults)
        alive = [i for i in alive if i not in rollback_faults]
        if not alive:
            raise RuntimeError(
                f"all {len(self.sup.actors)} DD-PPO workers failed in the same round, so no "
                "worker holds the last good weights; continue from the last checkpoint with "
                "--resume."
            )
        state = self.sup.wait_all("send its state",
                                  {alive[0]: self.sup.actors[alive[0]].learner_state.remote()})[0]
        self.sup.replace_all(gone)
        ref = ray.put(state)
        self.sup.wait_all("load the survivors' state",
                          {i: self.sup.actors[i].set_learner_state.remote(ref) for i in gone})
        self._form()

    def learner_state(self) -> LearnerState:
        rank0 = self.sup.actors[0]
        return self.sup.wait_all("send its state", {0: rank0.learner_state.remote()})[0]
