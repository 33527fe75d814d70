"""DD-PPO: decentralized PPO (Wijmans et al. 2019, arXiv 1911.00357).

Every worker samples and trains; at every minibatch the gradients are all-reduced so
all replicas stay identical; no central learner. This module holds the parts that are
maths over torch.distributed, with no Ray: the config and its rules, the gradient
hook, pooled advantage statistics and the straggler-preemption arithmetic.
distrl.runtime.ddppo_workers runs them on Ray actors.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from distrl.algos.ppo import PPOHyperparams, check_positive

BACKENDS = ("gloo", "nccl", "mpi")


@dataclass(frozen=True)
class DDPPOConfig(PPOHyperparams):
    """DD-PPO: PPO's knobs, RLlib's DD-PPO defaults, workers and straggler preemption."""

    minibatch_size: int = 50
    """Samples per SGD step on each worker; the effective minibatch is this x num_workers."""
    use_kl_loss: bool = False
    """Must stay False: see kl_coeff."""
    kl_coeff: float = 0.0
    """Must stay 0: an adaptive KL penalty needs the KL of the whole batch after every
    round, i.e. a central decision, which DD-PPO exists to avoid. Tune entropy_coeff or
    clip_param instead."""
    kl_target: float = 0.0
    """Must stay 0 (see kl_coeff)."""
    rollout_fragment_length: int = 100
    """Steps per env per round on each worker."""
    train_batch_size: int | None = None
    """Do not set: each worker trains on rollout_fragment_length x num_envs_per_worker."""
    batch_mode: Literal["truncate_episodes", "complete_episodes"] = "truncate_episodes"
    """Must be truncate_episodes: equal fragments keep every worker's collectives in step."""
    num_workers: int = 2
    """Ray actors that each sample and train (RLlib's num_workers)."""
    num_envs_per_worker: int = 5
    """Vectorised sub-envs per worker."""
    num_cpus_per_worker: float = 1.0
    """CPUs Ray reserves for each worker."""
    num_gpus_per_worker: float = 0.0
    """GPUs per worker (the driver does no learning and gets none); needed for nccl."""
    backend: Literal["gloo", "nccl", "mpi"] = "gloo"
    """torch.distributed backend: gloo (CPU), nccl (GPU workers), mpi (torch built with MPI)."""
    shm_allreduce: bool = True
    """With gloo and every worker on one node, sum gradients through shared memory
    (~0.1 ms per minibatch) instead of TCP loopback (~1 ms on the reference machine)."""
    keep_local_weights_in_sync: bool = True
    """Copy rank 0's weights to the driver after every round (else only when checkpointing)."""
    preemption_threshold: float = 0.6
    """Once this fraction of workers has a full fragment, the rest stop early; 1.0: off.
    With 2 workers only a value <= 0.5 can preempt."""
    preemption_min_share: float = 0.25
    """A preempted worker still collects at least this share of its fragment."""
    collective_timeout_s: float = 60.0
    """A collective that waits this long (a dead or frozen peer) fails the round."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.train_batch_size is not None:
            raise ValueError(
                f"Do not set `train_batch_size` ({self.train_batch_size}) for DD-PPO: each "
                "worker's batch is rollout_fragment_length x num_envs_per_worker. Set those."
            )
        if self.use_kl_loss or self.kl_coeff != 0.0 or self.kl_target != 0.0:
            raise ValueError(
                "DD-PPO has no KL penalty (set use_kl_loss=False, kl_coeff=0, kl_target=0): "
                "adapting its coefficient needs the KL of the whole batch after each round, "
                "a central decision that would un-decentralize DD-PPO. Tune entropy_coeff or "
                "clip_param instead."
            )
        if self.batch_mode != "truncate_episodes":
            raise ValueError(
                "DD-PPO needs batch_mode='truncate_episodes': every worker must bring the same "
                "number of minibatches to each round's all-reduces, so fragments have a fixed "
                "length; complete episodes would not."
            )
        if self.model.observation_filter != "NoFilter":
            raise ValueError("DD-PPO does not merge observation statistics across workers "
                             "yet: leave observation_filter at 'NoFilter' (or use PPO).")
        if self.num_workers < 1:
            raise ValueError(
                f"`num_workers` ({self.num_workers}) must be >= 1: in DD-PPO the workers do "
                "all sampling and training (there is no central learner)."
            )
        if self.backend not in BACKENDS:
            raise ValueError(f"`backend` ({self.backend!r}) must be one of {BACKENDS}.")
        if self.backend == "nccl" and self.num_gpus_per_worker <= 0:
            raise ValueError("backend='nccl' runs on GPUs: set num_gpus_per_worker > 0, or "
                             "use backend='gloo' on CPU workers.")
        check_positive(self, "rollout_fragment_length", "num_envs_per_worker",
                       "collective_timeout_s")
        if self.minibatch_size > self.worker_batch_size:
            raise ValueError(
                f"`minibatch_size` ({self.minibatch_size}) must be <= rollout_fragment_length x "
                f"num_envs_per_worker ({self.worker_batch_size}), each worker's batch."
            )
        if not 0 < self.preemption_threshold <= 1 or not 0 < self.preemption_min_share <= 1:
            raise ValueError("`preemption_threshold` and `preemption_min_share` must lie in "
                             "(0, 1]; preemption_threshold=1.0 turns preemption off.")
        if self.num_cpus_per_worker < 0 or self.num_gpus_per_worker < 0:
            raise ValueError("`num_cpus_per_worker` and `num_gpus_per_worker` must be >= 0.")

    @property
    def worker_batch_size(self) -> int:
        """Samples a worker trains on in a round without preemption."""
        return self.rollout_fragment_length * self.num_envs_per_worker

    @property
    def num_minibatches(self) -> int:
        """Minibatches per epoch, the same on every worker even when preempted."""
        return -(-self.worker_batch_size // self.minibatch_size)


class CollectiveError(RuntimeError):
    """A collective or the group's store failed: a peer died, hung, or left the group."""


@contextmanager
def collective(what: str) -> Iterator[None]:
    """Marks failures inside ``what`` as the group's, not this worker's own: the driver
    then re-forms the group instead of reporting a bug."""
    try:
        yield
    except RuntimeError as err:  # gloo, nccl and the TCPStore raise RuntimeError kinds
        raise CollectiveError(f"{what} failed: {err}") from err


def workers_to_wait_for(world_size: int, threshold: float) -> int:
    """Finished workers after which the others are preempted (world_size: never)."""
    # round(): 0.6 x 5 is 3.0000000000000004 in floating point, which must not mean 4.
    return min(world_size, max(1, math.ceil(round(threshold * world_size, 9))))


def min_steps_per_env(cfg: DDPPOConfig) -> int:
    """Steps per env a preempted worker still takes: its minimum share, and at least one
    sample for each of the minibatches every worker must step through."""
    share = math.ceil(round(cfg.preemption_min_share * cfg.rollout_fragment_length, 9))
    per_minibatch = -(-cfg.num_minibatches // cfg.num_envs_per_worker)
    return min(cfg.rollout_fragment_length, max(share, per_minibatch))


class Preemption:
    """EnvRunner.sample's stop_early for one round: yes once this worker has its minimum
    share and enough workers have finished. ``count_finished`` is a round trip to the
    group's store, so it is asked at most every ``poll_s``."""

    def __init__(self, needed: int, min_steps: int, count_finished: Callable[[], int],
                 poll_s: float = 1e-3):
        self.needed, self.min_steps, self.poll_s = needed, min_steps, poll_s
        self.count_finished = count_finished
        self.last_poll = -math.inf

    def __call__(self, steps_per_env: int) -> bool:
        if steps_per_env < self.min_steps:
            return False
        now = time.perf_counter()
        if now - self.last_poll < self.poll_s:
            return False
        self.last_poll = now
        return self.count_finished() >= self.needed


class WeightedAllReduce:
    """Gradient hook for ppo_update: every rank's minibatch gradient, weighted by its
    sample count, summed in one all-reduce of one flat buffer and divided by the total
    count. The result is the gradient of the loss over the pooled minibatch, and it is
    the same on every rank, so identical optimizers keep identical replicas.

    The parameters' .grad are views into that buffer (DDP's gradient_as_bucket_view),
    so nothing is copied in or out; ppo_update keeps them by zeroing grads in place.
    ``reduce(flat)`` sums in place over the ranks: torch.distributed's all_reduce by
    default, or a node-local ShmAllReduce.
    """

    def __init__(self, reduce: Callable[[torch.Tensor], None] | None = None):
        self.reduce = reduce or dist.all_reduce
        self.seconds = 0.0  # time spent in the collective, for ddppo/allreduce_s
        self.flat: torch.Tensor | None = None  # [sum of numels + 1]: grads, then the count

    def __call__(self, params: list[nn.Parameter], n: int) -> None:
        if not self._bound(params):
            self._bind(params)
        flat = self.flat
        flat[-1] = 1.0
        flat.mul_(n)
        t0 = time.perf_counter()
        with collective("gradient all_reduce"):
            self.reduce(flat)
            if flat.is_cuda:
                torch.cuda.synchronize(flat.device)
        self.seconds += time.perf_counter() - t0
        flat[:-1].div_(flat[-1:])

    def _bound(self, params: list[nn.Parameter]) -> bool:
        return self.flat is not None and all(
            p.grad is not None and p.grad.data_ptr() == ptr
            for p, ptr in zip(params, self._ptrs, strict=True))

    def _bind(self, params: list[nn.Parameter]) -> None:
        """Move the grads into views of one flat buffer (a param without a grad gets 0)."""
        p0 = params[0]
        self.flat = torch.zeros(sum(p.numel() for p in params) + 1, dtype=p0.dtype,
                                device=p0.device)
        offset = 0
        for p in params:
            view = self.flat[offset:offset + p.numel()].view_as(p)
            if p.grad is not None:
                view.copy_(p.grad)
            p.grad = view
            offset += p.numel()
        self._ptrs = [p.grad.data_ptr() for p in params]


def pooled_mean_std(x: np.ndarray, device: torch.device,
                    reduce: Callable[[torch.Tensor], None] | None = None) -> tuple[float, float]:
    """Mean and (population) std of ``x`` pooled over all ranks, in one all-reduce
    (``reduce``, default torch.distributed's), so advantages are standardized as on the
    pooled batch."""
    x64 = x.astype(np.float64)
    stats = torch.tensor([x64.sum(), (x64 * x64).sum(), x.size], dtype=torch.float64,
                         device=device)
    with collective("advantage statistics all_reduce"):
        (reduce or dist.all_reduce)(stats)
    total, total_sq, count = stats.tolist()
    mean = total / count
    return mean, math.sqrt(max(total_sq / count - mean * mean, 0.0))
