"""Sum of one flat float32 buffer over the ranks of one node, through shared memory.

Written by hand for speed: on the reference machine (a 2-vCPU VM) a gloo all_reduce of
a CartPole policy's 9k gradients over TCP loopback takes ~1 ms, mostly hand-offs
between gloo's threads; with one all-reduce per minibatch that alone halved DD-PPO's
throughput. Here each rank writes its buffer into its own slot of a shared file in
/dev/shm, publishes a sequence number, waits until every rank has published, and sums
the slots in rank order, so every rank computes the same bits. Two slot sets take
turns: a rank can only write op k+2 into op k's slots after every rank has published
op k+1, i.e. after all have finished reading op k.

Only for ranks on one x86-64 node (its stores are seen in program order by the other
cores, which the publish step relies on); DD-PPO uses gloo otherwise.
"""

from __future__ import annotations

import os
import platform
import time

import numpy as np
import torch

from distrl.algos.ddppo import CollectiveError

SHM_DIR = "/dev/shm"
LIVENESS_EVERY_S = 0.05  # how often a waiting rank checks that its peers are alive


def shm_supported() -> bool:
    return platform.machine() in ("x86_64", "AMD64") and os.path.isdir(SHM_DIR)


class ShmAllReduce:
    """In-place sum of a float32 CPU tensor of ``numel`` elements over ``world_size`` ranks
    of one node. Rank 0 creates the file; every rank opens it before rank 0 unlinks it
    (the mappings outlive the name, and nothing is left behind after a crash)."""

    def __init__(self, path: str, rank: int, world_size: int, numel: int, peer_pids: list[int],
                 timeout_s: float, create: bool):
        self.rank = rank
        self.peer_pids = [p for r, p in enumerate(peer_pids) if r != rank]
        self.timeout_s = timeout_s
        header = 8 * world_size  # one int64 sequence number per rank
        size = header + 4 * 2 * world_size * numel
        self.mem = np.memmap(path, dtype=np.uint8, mode="w+" if create else "r+", shape=(size,))
        self.seq = self.mem[:header].view(np.int64)
        self.slots = self.mem[header:].view(np.float32).reshape(2, world_size, numel)
        self.op = 0

    def __call__(self, flat: torch.Tensor) -> None:
        """Sum ``flat`` (at most ``numel`` elements) over the ranks, in place. The slots
        are float32: a float64 buffer (the advantage statistics) travels as float32."""
        self.op += 1
        slots = self.slots[self.op % 2, :, : flat.numel()]
        slots[self.rank] = flat.numpy()
        self.seq[self.rank] = self.op  # publish: after the data, in program order
        self._wait_for_all()
        np.sum(slots, axis=0, out=flat.numpy())  # same order, same bits on every rank

    def _wait_for_all(self) -> None:
        start = last_check = time.monotonic()
        while self.seq.min() < self.op:
            os.sched_yield()  # a waiting rank must not take the CPU from the one it awaits
            now = time.monotonic()
            if now - last_check > LIVENESS_EVERY_S:
                last_check = now
                self._check_peers(now - start)

    def _check_peers(self, waited_s: float) -> None:
        for pid in self.peer_pids:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                raise CollectiveError(f"shared-memory all-reduce: peer process {pid} died") \
                    from None
        if waited_s > self.timeout_s:
            raise CollectiveError(f"shared-memory all-reduce: peers did not arrive within "
                                  f"{self.timeout_s:.0f} s")
