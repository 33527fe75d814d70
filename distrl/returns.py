"""Return estimators: pure numpy functions over time-major arrays ``[T, N]``.

Layout shared by every function here (NEXT_STEP autoreset, gymnasium's default):
row ``t`` holds the step taken from obs ``t``; ``values[t]`` is V(obs ``t``) and
``values[T]`` the value of the obs after the last step. When a step ends an episode,
the obs after it is the episode's final obs, so ``values[t + 1]`` is exactly the
value a time-limit truncation must bootstrap from; the next row is the env's reset
step, which the caller masks out as invalid.
"""

from __future__ import annotations

import numpy as np


def gae(
    rewards: np.ndarray,  # [T, N]
    values: np.ndarray,  # [T + 1, N]
    terminated: np.ndarray,  # [T, N] bool: true terminal, no bootstrap
    truncated: np.ndarray,  # [T, N] bool: time limit, bootstrap from values[t + 1]
    gamma: float,
    lambda_: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation (Schulman et al. 2016, arXiv 1506.02438).

    Returns ``(advantages [T, N], value_targets [T, N])`` with targets = A + V.
    """
    T = rewards.shape[0]
    not_term = 1.0 - terminated.astype(np.float32)
    not_done = 1.0 - (terminated | truncated).astype(np.float32)
    deltas = rewards + gamma * values[1:] * not_term - values[:-1]
    adv = np.zeros_like(deltas)
    last = np.zeros_like(deltas[0])
    for t in range(T - 1, -1, -1):
        last = deltas[t] + gamma * lambda_ * not_done[t] * last
        adv[t] = last
    return adv, adv + values[:-1]

