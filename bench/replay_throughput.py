"""Transitions per second of one prioritized replay shard holding 500,000 CartPole-sized
transitions: add(50), sample(512) and update_priorities(512), distrl's PrioritizedReplay
next to cpprb's PrioritizedReplayBuffer (C++/Cython) in the same run; plus the bytes an
Atari transition (4 stacked 84x84 frames) costs in distrl's replay.

Medians of several repeats; human lines on stderr, the summary JSON as the last line.

    python bench/replay_throughput.py [--size 500000] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np
from _extra import need

from distrl.apex.replay import PrioritizedReplay
from distrl.core.types import NStepFragment

ALPHA, BETA, FRAGMENT, BATCH = 0.6, 0.4, 50, 512


def cartpole_fragment(rng: np.random.Generator) -> NStepFragment:
    frames = rng.random((FRAGMENT + 1, 4), dtype=np.float32)
    return NStepFragment(frames=frames, obs_idx=np.arange(FRAGMENT)[:, None],
                         next_idx=np.arange(1, FRAGMENT + 1)[:, None],
                         actions=rng.integers(0, 2, FRAGMENT),
                         rewards=np.ones(FRAGMENT, np.float32),
                         discounts=np.full(FRAGMENT, 0.97, np.float32))


def timed(fn, calls: int) -> float:
    """Seconds per call."""
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    return (time.perf_counter() - t0) / calls


def bench_distrl(size: int, repeats: int) -> dict[str, float]:
    rng = np.random.default_rng(0)
    replay = PrioritizedReplay(size, (4,), np.float32, alpha=ALPHA)
    frag = cartpole_fragment(rng)
    for _ in range(size // FRAGMENT):
        replay.add(frag, rng.random(FRAGMENT))
    ids = replay.sample(BATCH, BETA, rng)[1]
    td = rng.random(BATCH)
    add = [timed(lambda: replay.add(frag, rng.random(FRAGMENT)), 200) for _ in range(repeats)]
    sample = [timed(lambda: replay.sample(BATCH, BETA, rng), 200) for _ in range(repeats)]
    update = [timed(lambda: replay.update_priorities(ids, td), 200) for _ in range(repeats)]
    return summarize(add, sample, update)


def bench_cpprb(size: int, repeats: int) -> dict[str, float]:
    from cpprb import PrioritizedReplayBuffer

    rng = np.random.default_rng(0)
    buf = PrioritizedReplayBuffer(size, {"obs": {"shape": 4}, "next_obs": {"shape": 4},
                                         "act": {"shape": 1, "dtype": np.int64},
                                         "rew": {}, "done": {}}, alpha=ALPHA)
    batch = {"obs": rng.random((FRAGMENT, 4)), "next_obs": rng.random((FRAGMENT, 4)),
             "act": rng.integers(0, 2, (FRAGMENT, 1)), "rew": np.ones(FRAGMENT),
             "done": np.zeros(FRAGMENT)}
    for _ in range(size // FRAGMENT):
        buf.add(**batch, priorities=rng.random(FRAGMENT))
    ids = buf.sample(BATCH, beta=BETA)["indexes"]
    td = rng.random(BATCH)
    add = [timed(lambda: buf.add(**batch, priorities=rng.random(FRAGMENT)), 200)
           for _ in range(repeats)]
    sample = [timed(lambda: buf.sample(BATCH, beta=BETA), 200) for _ in range(repeats)]
    update = [timed(lambda: buf.update_priorities(ids, td), 200) for _ in range(repeats)]
    return summarize(add, sample, update)


def summarize(add: list[float], sample: list[float], update: list[float]) -> dict[str, float]:
    a, s, u = (statistics.median(x) for x in (add, sample, update))
    return {"add_per_s": FRAGMENT / a, "sample_per_s": BATCH / s, "update_per_s": BATCH / u,
            "sample_ms": s * 1e3}


def atari_bytes_per_transition(capacity: int = 10_000) -> dict[str, float]:
    """A replay of stacked Pong-sized frames filled by fragments of 50 steps (each with its
    3 extra stack frames and the next obs at its end), as the actors send them."""
    rng = np.random.default_rng(1)
    replay = PrioritizedReplay(capacity, (4, 84, 84), np.uint8, frame_stack=4)
    frames = rng.integers(0, 256, (FRAGMENT + 4, 84, 84), dtype=np.uint8)
    stacks = np.arange(FRAGMENT + 1)[:, None] + np.arange(4)[None]  # [51, 4] sliding
    frag = NStepFragment(frames=frames, obs_idx=stacks[:-1], next_idx=stacks[1:],
                         actions=np.zeros(FRAGMENT, np.int64),
                         rewards=np.zeros(FRAGMENT, np.float32),
                         discounts=np.ones(FRAGMENT, np.float32))
    for _ in range(3 * capacity // FRAGMENT):  # wrap the rings
        replay.add(frag)
    naive = 2 * 4 * 84 * 84  # obs and next_obs as separate stacks
    return {"atari_bytes_per_transition": replay.bytes_per_transition(),
            "atari_naive_bytes_per_transition": naive,
            "atari_stored_transitions": len(replay)}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=500_000)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    ours = bench_distrl(args.size, args.repeats)
    print(f"distrl: {ours}", file=sys.stderr)
    cpprb = bench_cpprb(args.size, args.repeats)
    print(f"cpprb:  {cpprb}", file=sys.stderr)
    out = {**{f"distrl_{k}": v for k, v in ours.items()},
           **{f"cpprb_{k}": v for k, v in cpprb.items()},
           "ratio": ours["sample_per_s"] / cpprb["sample_per_s"],
           "add_ratio": ours["add_per_s"] / cpprb["add_per_s"],
           "update_ratio": ours["update_per_s"] / cpprb["update_per_s"],
           "size": args.size, **atari_bytes_per_transition()}
    print(json.dumps(out))


if __name__ == "__main__":
    need("cpprb")
    main()
