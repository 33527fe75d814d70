"""The node-local shared-memory all-reduce: sums, identical bits, float64, a dead or late
peer, a /dev/shm too small, and a file that is private to its user."""

import errno
import mmap
import os
import secrets
import shutil
import stat
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from distrl.ddppo import shm_allreduce
from distrl.ddppo.collective import CollectiveError
from distrl.ddppo.shm_allreduce import ShmAllReduce, ShmAttachError, ShmUnavailable, shm_supported

pytestmark = pytest.mark.skipif(not shm_supported(), reason="x86-64 Linux with /dev/shm only")
NUMEL, OPS = 1000, 300


def inputs(rank: int, op: int) -> torch.Tensor:
    """Rank's buffer at op: sizes vary (a shorter buffer uses a prefix of the slots), and
    every 4th op is float64 with values float32 cannot hold."""
    g = np.random.default_rng([rank, op])
    if op % 4 == 0:
        return torch.from_numpy(g.normal(size=NUMEL // 2) / 3)
    return torch.from_numpy(g.normal(size=NUMEL if op % 3 else 3).astype(np.float32))


def naive_sum(xs: list[torch.Tensor]) -> torch.Tensor:
    total = xs[0].clone()
    for x in xs[1:]:  # rank order, as every rank sums
        total += x
    return total


def _rank(rank: int, world_size: int, path: str, out: str) -> None:
    reduce = ShmAllReduce.attach(path, rank, world_size, NUMEL, [os.getppid()] * world_size,
                                 30.0)
    results = []
    for op in range(OPS):
        x = inputs(rank, op)
        reduce(x)
        results.append(x)
    stats = torch.tensor([rank + 0.5, 3.0], dtype=torch.float64)  # as pooled_mean_std sends
    reduce(stats)
    results.append(stats)
    torch.save(results, f"{out}/rank{rank}.pt")


def run_ranks(world_size: int, tmp_path) -> list[list[torch.Tensor]]:
    reduce = ShmAllReduce.create(world_size, NUMEL, [], 1.0, directory=str(tmp_path))
    try:
        mp.spawn(_rank, args=(world_size, reduce.path, str(tmp_path)), nprocs=world_size)
    finally:
        reduce.unlink()
    return [torch.load(tmp_path / f"rank{r}.pt") for r in range(world_size)]


def test_two_ranks_sum_every_op_to_the_same_bits(tmp_path):
    r0, r1 = run_ranks(2, tmp_path)
    for op in range(OPS):
        assert torch.equal(r0[op], r1[op]), op
        torch.testing.assert_close(r0[op], inputs(0, op) + inputs(1, op))
    assert r0[OPS].dtype == torch.float64 and r0[OPS].tolist() == [2.0, 6.0]


def test_four_ranks_equal_a_naive_sum_bit_for_bit_over_consecutive_ops(tmp_path):
    results = run_ranks(4, tmp_path)
    for op in range(OPS):  # consecutive ops: the two slot sets take turns
        expected = naive_sum([inputs(r, op) for r in range(4)])
        for rank, mine in enumerate(results):
            assert mine[op].dtype == expected.dtype and torch.equal(mine[op], expected), \
                (op, rank)
    assert results[0][OPS].tolist() == [8.0, 12.0]


def sum_in_threads(reducers: list[ShmAllReduce], xs: list[torch.Tensor]) -> None:
    """Every rank's call at once, ranks 1.. in threads of this process."""
    threads = [threading.Thread(target=r, args=(x,))
               for r, x in zip(reducers[1:], xs[1:], strict=True)]
    for t in threads:
        t.start()
    reducers[0](xs[0])
    for t in threads:
        t.join()


def test_float64_is_summed_in_float64(tmp_path):
    pids = [os.getpid()] * 2
    r0 = ShmAllReduce.create(2, 4, pids, 10.0, directory=str(tmp_path))
    r1 = ShmAllReduce.attach(r0.path, 1, 2, 4, pids, 10.0)
    r0.unlink()
    xs = [torch.tensor([1 / 3 + 1e-12, 0.1, 1 + 2.0**-40], dtype=torch.float64),
          torch.tensor([2 / 3, 0.2, 1e-17 + 5], dtype=torch.float64)]
    assert not any(torch.equal(x, x.float().double()) for x in xs)  # float32 cannot hold them
    expected = xs[0] + xs[1]
    sum_in_threads([r0, r1], xs)
    assert torch.equal(xs[0], expected) and torch.equal(xs[1], expected)


def test_a_buffer_larger_than_a_slot_is_refused(tmp_path):
    reduce = ShmAllReduce.create(1, 16, [os.getpid()], 1.0, directory=str(tmp_path))
    reduce(torch.ones(16))  # 16 float32 fit, and 8 float64
    reduce(torch.ones(8, dtype=torch.float64))
    with pytest.raises(ValueError, match="bytes"):
        reduce(torch.ones(9, dtype=torch.float64))


# --- failures: dead and late peers -------------------------------------------------------

def test_a_dead_peer_is_detected_quickly(tmp_path, monkeypatch):
    monkeypatch.setattr(shm_allreduce, "LIVENESS_EVERY_S", 0.05)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    reduce = ShmAllReduce.create(2, 4, [os.getpid(), dead.pid], 30.0, directory=str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(CollectiveError, match=f"peer process {dead.pid} died"):
        reduce(torch.ones(4))
    assert time.monotonic() - t0 < 2.0


def test_a_peer_dying_during_the_wait_is_detected_within_2_s_even_unreaped(tmp_path,
                                                                             monkeypatch):
    """Nobody reaps the peer while this rank waits: it stays a zombie, which os.kill(pid, 0)
    still reports alive. A Ray worker's raylet, or mp.spawn's parent, reaps late too."""
    monkeypatch.setattr(shm_allreduce, "LIVENESS_EVERY_S", 0.05)
    life_s = 0.3
    peer = subprocess.Popen(["sleep", str(life_s)])
    reduce = ShmAllReduce.create(2, 4, [os.getpid(), peer.pid], 5.0, directory=str(tmp_path))
    t0 = time.monotonic()
    try:
        with pytest.raises(CollectiveError, match=f"peer process {peer.pid} died"):
            reduce(torch.ones(4))
    finally:
        peer.wait()
    assert time.monotonic() - t0 < life_s + 2.0


def test_a_late_peer_times_out(tmp_path):
    reduce = ShmAllReduce.create(2, 4, [os.getpid()] * 2, 0.2, directory=str(tmp_path))
    reduce.unlink()
    with pytest.raises(CollectiveError, match="did not arrive within"):
        reduce(torch.ones(4))


# --- creating the file: room reserved up front, private, never someone else's ------------

@pytest.fixture
def small_shm(tmp_path, monkeypatch):
    """A 1 MiB tmpfs (as Docker's 64 MB /dev/shm is for a large model) when this process
    may mount one, else a directory whose fallocate finds no room."""
    mnt = tmp_path / "shm"
    mnt.mkdir()
    mounted = os.geteuid() == 0 and shutil.which("mount") is not None and subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)],
        capture_output=True).returncode == 0
    if not mounted:
        def no_room(fd: int, offset: int, length: int) -> None:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        monkeypatch.setattr(os, "posix_fallocate", no_room)
    yield str(mnt)
    if mounted:
        subprocess.run(["umount", str(mnt)], check=True)


def test_a_too_small_shm_raises_shm_unavailable_and_leaves_no_file(small_shm):
    with pytest.raises(ShmUnavailable, match=f"(?s){small_shm}.*No space left.*gloo"):
        ShmAllReduce.create(2, 1_000_000, [os.getpid()] * 2, 1.0, directory=small_shm)
    assert os.listdir(small_shm) == []


def test_a_failed_mapping_leaves_no_file(tmp_path, monkeypatch):
    def no_memory(*args, **kwargs):
        raise OSError(errno.ENOMEM, os.strerror(errno.ENOMEM))
    monkeypatch.setattr(mmap, "mmap", no_memory)
    with pytest.raises(ShmUnavailable, match="gloo"):
        ShmAllReduce.create(2, 4, [os.getpid()] * 2, 1.0, directory=str(tmp_path))
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("umask", [0o000, 0o022, 0o277])
def test_the_file_is_created_private_whatever_the_umask(tmp_path, umask):
    old = os.umask(umask)
    try:
        reduce = ShmAllReduce.create(2, 4, [os.getpid()] * 2, 1.0, directory=str(tmp_path))
    finally:
        os.umask(old)
    st = os.lstat(reduce.path)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.geteuid() and os.path.dirname(reduce.path) == str(tmp_path)
    reduce.unlink()
    assert not os.path.exists(reduce.path)


def test_create_never_opens_a_file_that_already_exists(tmp_path, monkeypatch):
    """A planted name (here a symlink to a file of the victim's) is not followed, written
    or removed."""
    monkeypatch.setattr(secrets, "token_hex", lambda n=None: "planted")
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    shm = tmp_path / "shm"
    shm.mkdir()
    reduce = ShmAllReduce.create(1, 4, [os.getpid()], 1.0, directory=str(shm))
    reduce.unlink()
    os.symlink(victim, reduce.path)
    with pytest.raises(ShmUnavailable, match="exists"):
        ShmAllReduce.create(1, 4, [os.getpid()], 1.0, directory=str(shm))
    assert os.path.islink(reduce.path) and victim.read_bytes() == b"keep"


def _make_other_mode(path: str, tmp_path) -> str:
    os.chmod(path, 0o644)
    return path


def _make_other_owner(path: str, tmp_path) -> str:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file away")
    os.chown(path, 65534, 65534)
    return path


def _make_symlink(path: str, tmp_path) -> str:
    link = str(tmp_path / "link")
    os.symlink(path, link)
    return link


@pytest.mark.parametrize("tamper, reason", [
    (_make_other_mode, "mode 0644, not 0600"), (_make_other_owner, "owned by uid 65534"),
    (_make_symlink, "symbolic link"),
])
def test_attach_refuses_a_file_that_is_not_the_private_one(tmp_path, tamper, reason):
    reduce = ShmAllReduce.create(2, 4, [os.getpid()] * 2, 1.0, directory=str(tmp_path))
    path = tamper(reduce.path, tmp_path)
    with pytest.raises(ShmAttachError, match=reason):
        ShmAllReduce.attach(path, 1, 2, 4, [os.getpid()] * 2, 1.0)


def test_attach_checks_the_size_it_expects(tmp_path):
    reduce = ShmAllReduce.create(2, 4, [os.getpid()] * 2, 1.0, directory=str(tmp_path))
    with pytest.raises(ShmAttachError, match="bytes, not"):
        ShmAllReduce.attach(reduce.path, 1, 2, 4000, [os.getpid()] * 2, 1.0)
