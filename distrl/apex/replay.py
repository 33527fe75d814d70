"""Prioritized replay (Schaul et al. 2016, proportional variant) for Ape-X, pure numpy.

Written here rather than taken from a library: the trees work on whole batches
(one numpy op per tree level for 512 samples, no Python loop per sample), and frames
are stored once (an Atari transition costs about one 84x84 frame instead of two stacks
of four). bench/replay_throughput.py compares it with cpprb.
"""

from __future__ import annotations

import math

import numpy as np

from distrl.core.types import NStepFragment, Transitions

FRAME_SLACK = 1.1
TOP_NODES = 1024  # SumTree.find: nodes of the level searched with one searchsorted
"""Frame-ring slots per transition slot: a fragment carries a few frames more than
transitions (the next obs at its end, stacks at episode starts)."""


class _Tree:
    """A complete binary tree over a power-of-two number of leaves in one flat array
    (root at 1, leaf i at size + i); ``combine`` makes a parent from its children."""

    def __init__(self, capacity: int, combine: np.ufunc, empty: float):
        self.size = 1 << max(0, math.ceil(math.log2(max(capacity, 1))))
        self.depth = self.size.bit_length() - 1
        self.combine = combine
        self.tree = np.full(2 * self.size, empty, dtype=np.float64)

    def update(self, idx: np.ndarray, values: np.ndarray) -> None:
        """Set leaves ``idx`` (a repeated index keeps its last value), then recompute
        their ancestors level by level. Repeated parents get the same value from their
        children, so no deduplication is needed."""
        tree, top = self.tree, min(TOP_NODES, self.size)
        i = np.asarray(idx, dtype=np.int64) + self.size
        tree[i] = values
        for _ in range(self.depth - (top.bit_length() - 1)):
            i >>= 1
            tree[i] = self.combine(tree[2 * i], tree[2 * i + 1])
        n = top // 2  # the small top levels: whole levels from strided children, no gathers
        while n:
            tree[n:2 * n] = self.combine(tree[2 * n:4 * n:2], tree[2 * n + 1:4 * n:2])
            n //= 2

    def values(self, idx: np.ndarray) -> np.ndarray:
        return self.tree[np.asarray(idx, dtype=np.int64) + self.size]


class SumTree(_Tree):
    def __init__(self, capacity: int):
        super().__init__(capacity, np.add, 0.0)

    def total(self) -> float:
        return float(self.tree[1])

    def find(self, prefix: np.ndarray) -> np.ndarray:
        """For each prefix in [0, total): the leaf i with cumsum[i-1] <= prefix <
        cumsum[i] (np.searchsorted(cumsum, prefix, side="right")), never a leaf of
        priority 0, also when float round-off pushes a prefix past the last one.

        Numpy calls over the whole batch cost more than their arithmetic, so the top
        levels are one searchsorted over the cumulative sums of a level of up to
        TOP_NODES nodes, and only the levels below it are descended one by one.
        """
        prefix = np.array(prefix, dtype=np.float64)
        tree = self.tree
        top = min(TOP_NODES, self.size)  # the level of `top` nodes starts at index `top`
        bounds = np.cumsum(tree[top:2 * top])
        j = np.minimum(np.searchsorted(bounds, prefix, side="right"), top - 1)
        prefix -= np.where(j > 0, bounds[j - 1], 0.0)
        i = top + j
        for _ in range(self.depth - (top.bit_length() - 1)):
            i <<= 1
            left_sum = tree[i]
            right = prefix >= left_sum
            prefix -= left_sum * right
            i += right
        found = i - self.size
        for q in np.flatnonzero(tree[i] <= 0):  # round-off ran past the mass (rare):
            found[q] = np.flatnonzero(tree[self.size:i[q]] > 0)[-1]  # the last leaf with any
        return found


class MinTree(_Tree):
    def __init__(self, capacity: int):
        super().__init__(capacity, np.minimum, np.inf)

    def min(self) -> float:
        return float(self.tree[1])


class PrioritizedReplay:
    """A ring of n-step transitions with proportional priorities; observations are rows
    of a frame ring (see types.NStepFragment), each frame stored once.

    Sampled ``indices`` are absolute insertion ids (slot = id % capacity), counted from
    ``first_id``: a priority update for a slot overwritten since it was sampled is ignored
    (RLlib bug ray#6534), and so is one for an id below ``first_id`` (a replaced shard
    starts past every id its predecessor handed out).
    """

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], obs_dtype: np.dtype,
                 frame_stack: int = 1, alpha: float = 0.6, eps: float = 1e-6,
                 first_id: int = 0):
        if capacity < 1:
            raise ValueError(f"replay `capacity` ({capacity}) must be >= 1.")
        self.capacity, self.alpha, self.eps = capacity, alpha, eps
        self.obs_shape = tuple(obs_shape)
        self.frame_stack = frame_stack
        frame_shape = self.obs_shape[1:] if frame_stack > 1 else self.obs_shape
        self.frame_capacity = math.ceil(capacity * FRAME_SLACK) + 64 * frame_stack
        self.frames = np.zeros((self.frame_capacity, *frame_shape), dtype=obs_dtype)
        # One row per slot, so a sampled slot costs one cache line or two, not one per
        # field: [obs frame ids (S) | next-obs frame ids (S) | id | action], absolute ids.
        s = frame_stack
        self.obs_cols, self.next_cols = slice(0, s), slice(s, 2 * s)
        self.ID, self.ACTION = 2 * s, 2 * s + 1
        self.index = np.zeros((capacity, 2 * s + 2), dtype=np.int64)
        self.index[:, self.ID] = -1
        self.reward_discount = np.zeros((capacity, 2), dtype=np.float32)
        self.first_frame = np.zeros(capacity, dtype=np.int64)  # of the transition's fragment
        self.sum_tree, self.min_tree = SumTree(capacity), MinTree(capacity)
        self.added = first_id  # the next id: first_id + transitions ever added
        self.valid_from = first_id  # ids below this are gone (ring or frame overwrite)
        self.frames_written = 0
        self.max_priority = 1.0
        self.evicted_by_frames = 0

    def __len__(self) -> int:
        return self.added - self.valid_from

    def add(self, fragment: NStepFragment, priorities: np.ndarray | None = None) -> None:
        """Store a fragment; ``priorities`` are its |td| (None: the max priority so far)."""
        n, f = len(fragment), len(fragment.frames)
        if f > self.frame_capacity or n > self.capacity:
            raise ValueError(f"a fragment of {n} transitions and {f} frames does not fit a "
                             f"replay of capacity {self.capacity}; send smaller fragments.")
        base = self.frames_written
        self.frames[(base + np.arange(f)) % self.frame_capacity] = fragment.frames
        self.frames_written += f
        ids = self.added + np.arange(n)
        slots = ids % self.capacity
        self.index[slots, self.obs_cols] = fragment.obs_idx + base
        self.index[slots, self.next_cols] = fragment.next_idx + base
        self.index[slots, self.ID] = ids
        self.index[slots, self.ACTION] = fragment.actions
        self.first_frame[slots] = base
        self.reward_discount[slots, 0] = fragment.rewards
        self.reward_discount[slots, 1] = fragment.discounts
        self.added += n
        self.valid_from = max(self.valid_from, self.added - self.capacity)
        p = (np.full(n, self.max_priority) if priorities is None
             else self._priority(priorities))
        self._set(slots, p)
        self._drop_overwritten_frames()

    def _priority(self, td_abs: np.ndarray) -> np.ndarray:
        p = (np.abs(np.asarray(td_abs, dtype=np.float64)) + self.eps) ** self.alpha
        self.max_priority = max(self.max_priority, float(p.max(initial=0.0)))
        return p

    def _set(self, slots: np.ndarray, p: np.ndarray) -> None:
        self.sum_tree.update(slots, p)
        self.min_tree.update(slots, p)

    def _drop_overwritten_frames(self) -> None:
        """Transitions whose fragment had a frame overwritten are never sampled again.
        Fragments arrive in order, so these are always the oldest ids."""
        oldest_kept = self.frames_written - self.frame_capacity
        start = self.valid_from
        while self.valid_from < self.added:
            ids = np.arange(self.valid_from, min(self.added, self.valid_from + 1024))
            stale = self.first_frame[ids % self.capacity] < oldest_kept
            keep = np.flatnonzero(~stale)
            self.valid_from = int(ids[keep[0]] if len(keep) else ids[-1] + 1)
            if len(keep):
                break
        if self.valid_from > start:
            dead = np.arange(start, self.valid_from) % self.capacity
            self.sum_tree.update(dead, np.zeros(len(dead)))
            self.min_tree.update(dead, np.full(len(dead), np.inf))
            self.evicted_by_frames += self.valid_from - start

    def sample(self, n: int, beta: float, rng: np.random.Generator
               ) -> tuple[Transitions, np.ndarray, np.ndarray]:
        """``n`` transitions drawn with probability ~ priority, one per equal segment of
        the priority mass; returns (batch, absolute ids, IS weights normalized by the
        largest weight over the whole buffer)."""
        if len(self) == 0:
            raise ValueError("cannot sample from an empty replay buffer; add transitions first.")
        total = self.sum_tree.total()
        prefix = (np.arange(n) + rng.random(n)) * (total / n)
        slots = self.sum_tree.find(prefix)
        probs = self.sum_tree.values(slots) / total
        size = len(self)
        weights = (size * probs) ** -beta
        max_weight = (size * self.min_tree.min() / total) ** -beta
        # np.take along axis 0 is several times faster than fancy indexing of 2-D rows.
        rows = np.take(self.index, slots, axis=0)
        rd = np.take(self.reward_discount, slots, axis=0)
        batch = Transitions(obs=self._obs(rows[:, self.obs_cols]), actions=rows[:, self.ACTION],
                            rewards=rd[:, 0], next_obs=self._obs(rows[:, self.next_cols]),
                            discounts=rd[:, 1])
        return batch, rows[:, self.ID], (weights / max_weight).astype(np.float32)

    def _obs(self, frame_ids: np.ndarray) -> np.ndarray:
        frames = np.take(self.frames, frame_ids % self.frame_capacity, axis=0)  # [n, S, ...]
        return frames.reshape(len(frame_ids), *self.obs_shape)

    def update_priorities(self, indices: np.ndarray, td_abs: np.ndarray) -> None:
        """New priorities (|td| + eps) ** alpha for sampled ids still stored."""
        indices = np.asarray(indices, dtype=np.int64)
        slots = indices % self.capacity
        alive = (self.index[slots, self.ID] == indices) & (indices >= self.valid_from)
        if alive.any():
            self._set(slots[alive], self._priority(np.asarray(td_abs)[alive]))

    def priorities(self, indices: np.ndarray) -> np.ndarray:
        """Stored priorities of ids (0 for ids no longer stored)."""
        indices = np.asarray(indices, dtype=np.int64)
        slots = indices % self.capacity
        alive = (self.index[slots, self.ID] == indices) & (indices >= self.valid_from)
        return np.where(alive, self.sum_tree.values(slots), 0.0)

    def bytes_per_transition(self) -> float:
        """Allocated bytes of everything the buffer holds, per transition slot."""
        arrays = (self.frames, self.index, self.reward_discount, self.first_frame,
                  self.sum_tree.tree,
                  self.min_tree.tree)
        return sum(a.nbytes for a in arrays) / self.capacity

    def stats(self) -> dict[str, int]:
        return {"size": len(self), "added": self.added,
                "evicted_by_frames": self.evicted_by_frames}

    _ARRAYS = ("frames", "index", "reward_discount", "first_frame")
    _COUNTERS = ("added", "valid_from", "frames_written", "max_priority", "evicted_by_frames")

    def state_dict(self) -> dict[str, np.ndarray | int | float]:
        """Plain arrays and numbers (torch.save-able, loadable with weights_only=True)."""
        return {**{k: getattr(self, k) for k in self._ARRAYS + self._COUNTERS},
                "sum_tree": self.sum_tree.tree, "min_tree": self.min_tree.tree}

    def load_state_dict(self, state: dict[str, np.ndarray | int | float]) -> None:
        for k in self._ARRAYS:
            getattr(self, k)[...] = state[k]
        for k in self._COUNTERS:
            setattr(self, k, type(getattr(self, k))(state[k]))
        self.sum_tree.tree[...] = state["sum_tree"]
        self.min_tree.tree[...] = state["min_tree"]
