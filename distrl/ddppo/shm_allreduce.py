"""Sum of one flat float32 or float64 buffer over the ranks of one node, through shared
memory.

Written by hand for speed: on the reference machine (a 2-vCPU VM) a gloo all_reduce of
a CartPole policy's 9k gradients over TCP loopback takes ~1 ms, mostly hand-offs
between gloo's threads; with one all-reduce per minibatch that alone halved DD-PPO's
throughput. Here each rank writes its buffer into its own slot of a shared file in
/dev/shm, publishes a sequence number, waits until every rank has published, and sums
the slots in rank order, so every rank computes the same bits. Two slot sets take
turns: a rank can only write op k+2 into op k's slots after every rank has published
op k+1, i.e. after all have finished reading op k.

Rank 0 ``create``s the file (a random name, mode 0600, its pages reserved up front) and
passes ``path`` to the others, which ``attach`` to it after checking it is that file;
once every rank has attached, rank 0 ``unlink``s the name (the mappings outlive it, so
nothing is left behind after a crash).

Only for ranks on one x86-64 Linux node (its stores are seen in program order by the
other cores, which the publish step relies on); DD-PPO uses gloo otherwise.
"""

from __future__ import annotations

import contextlib
import errno
import mmap
import os
import platform
import secrets
import stat
import time

import numpy as np
import torch

from distrl.ddppo.collective import CollectiveError

SHM_DIR = "/dev/shm"
LIVENESS_EVERY_S = 0.05  # how often a waiting rank checks that its peers are alive
ALIGN = 64  # a cache line: no two ranks' slots share one, and float64 views are aligned
DTYPES = (np.float32, np.float64)


class ShmUnavailable(RuntimeError):
    """The shared file could not be created or reserved (no room in /dev/shm, say); the
    caller sums with gloo instead. Nothing is left in the directory."""


class ShmAttachError(RuntimeError):
    """The file at the path given is not the private one rank 0 created: refused."""


def shm_supported() -> bool:
    return (platform.machine() in ("x86_64", "AMD64") and os.path.isdir(SHM_DIR)
            and os.path.exists("/proc/self/stat"))


def _round_up(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def _layout(world_size: int, numel: int) -> tuple[int, int]:
    """(header bytes, slot bytes): one int64 sequence number per rank, then 2 x world_size
    slots that hold numel float32s, or half as many float64s (at least 8)."""
    return _round_up(8 * world_size), _round_up(4 * numel)


def _file_size(world_size: int, numel: int) -> int:
    header, slot = _layout(world_size, numel)
    return header + 2 * world_size * slot


class ShmAllReduce:
    """In-place sum of a float32 (at most ``numel`` elements) or float64 (half as many)
    CPU tensor over ``world_size`` ranks of one node. Make one with ``create`` (rank 0)
    or ``attach`` (every other rank)."""

    def __init__(self, mm: mmap.mmap, path: str, rank: int, world_size: int, numel: int,
                 peer_pids: list[int], timeout_s: float):
        self.path, self.rank, self.timeout_s = path, rank, timeout_s
        self.peer_pids = [p for r, p in enumerate(peer_pids) if r != rank]
        header, self.slot_bytes = _layout(world_size, numel)
        self.mm = mm  # keeps the mapping alive as long as the views below
        mem = np.frombuffer(mm, dtype=np.uint8)
        self.seq = mem[:8 * world_size].view(np.int64)
        self.slots = mem[header:].reshape(2, world_size, self.slot_bytes)
        self.op = 0

    @classmethod
    def create(cls, world_size: int, numel: int, peer_pids: list[int], timeout_s: float,
               directory: str = SHM_DIR) -> ShmAllReduce:
        """Rank 0: a new file under a random name in ``directory`` (``.path``), mode 0600,
        its pages reserved now. Raises ShmUnavailable, leaving no file, when it cannot."""
        path = os.path.join(directory, f"distrl_ddppo_{secrets.token_hex(16)}")
        size = _file_size(world_size, numel)
        try:  # O_EXCL: never open a name someone else planted (a symlink, say)
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR | os.O_CLOEXEC, 0o600)
        except OSError as err:
            raise ShmUnavailable(_unavailable(f"cannot create {path}", err)) from err
        try:
            mm = _reserve_and_map(fd, size, path)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)
        return cls(mm, path, 0, world_size, numel, peer_pids, timeout_s)

    @classmethod
    def attach(cls, path: str, rank: int, world_size: int, numel: int, peer_pids: list[int],
               timeout_s: float) -> ShmAllReduce:
        """Ranks 1..: map rank 0's file at ``path`` after checking that it is a regular
        file (not a symlink) of this user, mode 0600, of the size ``create`` made.
        Raises ShmAttachError otherwise."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as err:
            what = "it is a symbolic link" if err.errno == errno.ELOOP else err.strerror
            raise ShmAttachError(f"refusing to map {path}: {what}") from err
        try:
            _check_private(fd, path, _file_size(world_size, numel))
            mm = mmap.mmap(fd, _file_size(world_size, numel))
        finally:
            os.close(fd)
        return cls(mm, path, rank, world_size, numel, peer_pids, timeout_s)

    def unlink(self) -> None:
        """Remove the file's name once every rank has attached (or on a failed set-up)."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def __call__(self, flat: torch.Tensor) -> None:
        """Sum ``flat`` over the ranks, in place, in its own dtype."""
        x = flat.numpy()
        self.op += 1
        slots = self._slots(x)
        slots[self.rank] = x
        self.seq[self.rank] = self.op  # publish: after the data, in program order
        self._wait_for_all()
        np.sum(slots, axis=0, out=x)  # same order, same bits on every rank

    def _slots(self, x: np.ndarray) -> np.ndarray:
        """This op's slot set, viewed as x's dtype, as long as x."""
        if x.dtype not in DTYPES:
            raise TypeError(f"shared-memory all-reduce sums float32 or float64, not {x.dtype}")
        if x.nbytes > self.slot_bytes:
            raise ValueError(f"a buffer of {x.nbytes} bytes does not fit the "
                             f"{self.slot_bytes}-byte slots")
        return self.slots[self.op % 2].view(x.dtype)[:, : x.size]

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
            if not _alive(pid):
                raise CollectiveError(f"shared-memory all-reduce: peer process {pid} died")
        if waited_s > self.timeout_s:
            raise CollectiveError(f"shared-memory all-reduce: peers did not arrive within "
                                  f"{self.timeout_s:.0f} s")


def _reserve_and_map(fd: int, size: int, path: str) -> mmap.mmap:
    """Pages a tmpfs cannot provide fail here, with ENOSPC, instead of as a SIGBUS in every
    rank at the first write to them."""
    try:
        os.fchmod(fd, 0o600)  # os.open's mode went through the umask
        os.posix_fallocate(fd, 0, size)
        return mmap.mmap(fd, size)
    except OSError as err:
        raise ShmUnavailable(_unavailable(
            f"cannot reserve {size / 2**20:.1f} MiB for {path} in {os.path.dirname(path)}",
            err)) from err


def _unavailable(what: str, err: OSError) -> str:
    return (f"shared-memory all-reduce unavailable: {what} ({err.strerror}); the workers "
            "sum gradients with gloo instead. In Docker, /dev/shm is 64 MB unless the "
            "container is started with a larger --shm-size.")


def _check_private(fd: int, path: str, size: int) -> None:
    st = os.fstat(fd)
    problems = []
    if not stat.S_ISREG(st.st_mode):
        problems.append("not a regular file")
    if st.st_uid != os.geteuid():
        problems.append(f"owned by uid {st.st_uid}, not {os.geteuid()}")
    if stat.S_IMODE(st.st_mode) != 0o600:
        problems.append(f"mode {stat.S_IMODE(st.st_mode):04o}, not 0600")
    if st.st_size != size:
        problems.append(f"{st.st_size} bytes, not {size}")
    if problems:
        raise ShmAttachError(f"refusing to map {path}: {', '.join(problems)}; rank 0 creates "
                             "it private to this user, so something else made or changed it")


def _alive(pid: int) -> bool:
    """Not os.kill(pid, 0): it succeeds on a zombie, a dead peer its parent (a raylet, a
    spawning test) has not reaped yet. /proc/<pid>/stat gives the state after the name."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state not in (b"Z", b"X")
