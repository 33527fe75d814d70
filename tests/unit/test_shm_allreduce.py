"""The node-local shared-memory all-reduce: sums, identical bits, a dead or late peer."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from distrl.algos.ddppo import CollectiveError
from distrl.algos.shm_allreduce import ShmAllReduce, shm_supported

pytestmark = pytest.mark.skipif(not shm_supported(), reason="x86-64 with /dev/shm only")
NUMEL, OPS = 1000, 300


def inputs(rank: int, op: int) -> torch.Tensor:
    """Rank's buffer at op: sizes vary (a shorter buffer uses a prefix of the slots)."""
    g = np.random.default_rng([rank, op])
    return torch.from_numpy(g.normal(size=NUMEL if op % 3 else 3).astype(np.float32))


def _rank(rank: int, path: str, out: str) -> None:
    reduce = ShmAllReduce(path, rank, 2, NUMEL, [os.getppid()] * 2, 30.0, create=False)
    results = []
    for op in range(OPS):
        x = inputs(rank, op)
        reduce(x)
        results.append(x)
    stats = torch.tensor([rank + 0.5, 3.0], dtype=torch.float64)  # as pooled_mean_std sends
    reduce(stats)
    results.append(stats)
    torch.save(results, f"{out}/rank{rank}.pt")


def test_two_ranks_sum_every_op_to_the_same_bits(tmp_path):
    path = f"/dev/shm/distrl_test_{os.getpid()}"
    ShmAllReduce(path, 0, 2, NUMEL, [], 1.0, create=True)
    try:
        mp.spawn(_rank, args=(path, str(tmp_path)), nprocs=2, join=True)
    finally:
        os.unlink(path)
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt") for r in range(2))
    for op in range(OPS):
        assert torch.equal(r0[op], r1[op]), op
        torch.testing.assert_close(r0[op], inputs(0, op) + inputs(1, op))
    assert r0[OPS].dtype == torch.float64 and r0[OPS].tolist() == [2.0, 6.0]


def test_a_dead_peer_is_detected_quickly(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    reduce = ShmAllReduce(str(tmp_path / "buf"), 0, 2, 4, [os.getpid(), dead.pid], 30.0,
                          create=True)
    with pytest.raises(CollectiveError, match=f"peer process {dead.pid} died"):
        reduce(torch.ones(4))


def test_a_late_peer_times_out():
    reduce = ShmAllReduce("/dev/shm/distrl_test_late", 0, 2, 4, [os.getpid()] * 2, 0.2,
                          create=True)
    os.unlink("/dev/shm/distrl_test_late")
    with pytest.raises(CollectiveError, match="did not arrive within"):
        reduce(torch.ones(4))
