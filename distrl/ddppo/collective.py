"""DD-PPO's maths over torch.distributed, with no Ray: the gradient hook
(WeightedAllReduce), pooled advantage statistics and the straggler-preemption
arithmetic. ddppo/remote.py runs them on Ray actors.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from distrl.ddppo.config import DDPPOConfig


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

