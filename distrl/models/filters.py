"""Running statistics for observation normalization (RLlib's MeanStdFilter, SB3's
VecNormalize) and reward scaling (divide by the std of the discounted return), pure
numpy. Env runners collect the statistics of one iteration's samples; the driver merges
them (Chan et al.'s parallel formula: the merge equals the statistics of the
concatenated samples) and the runners act with the merged ones from the next iteration.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RunningStats:
    """Count, mean and sum of squared deviations (M2) per dimension, float64."""

    count: float
    mean: np.ndarray
    m2: np.ndarray

    @staticmethod
    def zeros(shape: tuple[int, ...]) -> RunningStats:
        return RunningStats(0.0, np.zeros(shape), np.zeros(shape))

    @staticmethod
    def of(x: np.ndarray) -> RunningStats:
        """The statistics of samples ``x [B, *shape]``."""
        x = np.asarray(x, dtype=np.float64)
        if len(x) == 0:
            return RunningStats.zeros(x.shape[1:])
        mean = x.mean(0)
        return RunningStats(float(len(x)), mean, ((x - mean) ** 2).sum(0))

    def merge(self, other: RunningStats) -> RunningStats:
        n = self.count + other.count
        if n == 0:
            return self
        delta = other.mean - self.mean
        mean = self.mean + delta * (other.count / n)
        m2 = self.m2 + other.m2 + delta**2 * (self.count * other.count / n)
        return RunningStats(n, mean, m2)

    @property
    def var(self) -> np.ndarray:
        """Population variance; 1 before any sample (normalization is then the identity
        up to the mean, which is 0)."""
        return self.m2 / self.count if self.count > 0 else np.ones_like(self.mean)


def stats_to_json(stats: RunningStats) -> dict:
    return {"count": stats.count, "mean": stats.mean.tolist(), "m2": stats.m2.tolist()}


def stats_from_json(d: dict | None, shape: tuple[int, ...] = (1,)) -> RunningStats:
    """The saved statistics, or empty ones of ``shape`` (a fresh run)."""
    if d is None:
        return RunningStats.zeros(shape)
    return RunningStats(float(d["count"]), np.asarray(d["mean"]), np.asarray(d["m2"]))


def discounted_returns(rewards: np.ndarray, dones: np.ndarray, running: np.ndarray,
                       gamma: float) -> tuple[np.ndarray, np.ndarray]:
    """The running discounted return after each step ``[T, N]`` (reset after an episode
    end) and the carry for the next fragment: what SB3/CleanRL's NormalizeReward divides
    rewards by the std of. ``running [N]`` is the carry from the previous fragment."""
    out = np.empty_like(rewards, dtype=np.float64)
    g = running.astype(np.float64)
    for t in range(len(rewards)):
        g = gamma * g + rewards[t]
        out[t] = g
        g = np.where(dones[t], 0.0, g)
    return out, g


def return_std(returns: RunningStats) -> float:
    """What reward scaling divides rewards by: the std of the discounted returns seen so
    far (1 before any)."""
    return float(np.sqrt(returns.var[0] + 1e-8)) if returns.count else 1.0
