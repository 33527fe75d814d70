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
    gamma: float | np.ndarray,  # or [T, N]: a discount per step
    lambda_: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Generalized advantage estimation (Schulman et al. 2016, arXiv 1506.02438).

    Returns ``(advantages [T, N], value_targets [T, N])`` with targets = A + V.
    """
    T = rewards.shape[0]
    not_term = 1.0 - terminated.astype(np.float32)
    not_done = 1.0 - (terminated | truncated).astype(np.float32)
    gamma = np.broadcast_to(np.asarray(gamma, np.float32), rewards.shape)
    deltas = rewards + gamma * values[1:] * not_term - values[:-1]
    adv = np.zeros_like(deltas)
    last = np.zeros_like(deltas[0])
    for t in range(T - 1, -1, -1):
        last = deltas[t] + gamma[t] * lambda_ * not_done[t] * last
        adv[t] = last
    return adv, adv + values[:-1]


def n_step(
    rewards: np.ndarray,  # [T, N]
    terminated: np.ndarray,  # [T, N] bool
    truncated: np.ndarray,  # [T, N] bool
    valid: np.ndarray,  # [T, N] bool: False on reset rows
    gamma: float,
    n: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """n-step transitions, one per valid row: ``(t, env, k, reward, discount)``, each [B],
    ordered time-major.

    ``reward = sum_{j<k} gamma**j r[t+j]`` over ``k <= n`` steps that stop at the step
    ending the episode (included) and at the fragment's end (``t + k <= T``): the
    bootstrap obs is ``obs[t + k]`` (the fragment's next_obs when ``t + k == T``).
    ``discount = gamma**k``, or 0 when the episode terminated within the k steps (a
    truncation bootstraps).
    """
    if n < 1:
        raise ValueError(f"n_step needs n >= 1 (got {n}): n is the most rewards a "
                         "transition sums before it bootstraps.")
    T, N = rewards.shape
    done = terminated | truncated
    reward = np.zeros((T, N), dtype=np.float64)
    k = np.zeros((T, N), dtype=np.int64)
    open_ = np.ones((T, N), dtype=bool)  # still summing
    ended_term = np.zeros((T, N), dtype=bool)
    rows = np.arange(T)
    for j in range(n):  # a loop over n; every (t, env) moves one step at a time
        idx = rows + j
        inside = idx < T
        live = open_ & inside[:, None]
        src = np.minimum(idx, T - 1)
        reward += np.where(live, gamma**j * rewards[src], 0.0)
        k += live
        stop = live & done[src]
        ended_term |= live & terminated[src]
        open_ &= ~stop & inside[:, None]
    t, env = np.nonzero(valid)
    kk = k[t, env]
    discount = np.where(ended_term[t, env], 0.0, gamma ** kk.astype(np.float64))
    return (t, env, kk, reward[t, env].astype(np.float32), discount.astype(np.float32))


def vtrace(
    rewards: np.ndarray,  # [T, N]
    values: np.ndarray,  # [T + 1, N]: the learner's values of the sampled obs
    terminated: np.ndarray,  # [T, N] bool
    truncated: np.ndarray,  # [T, N] bool
    log_ratios: np.ndarray,  # [T, N]: log pi(a|x) - log mu(a|x), learner vs sampler
    gamma: float,
    lambda_: float = 1.0,
    clip_rho: float = 1.0,
    clip_c: float = 1.0,
    clip_pg_rho: float | None = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """V-trace (Espeholt et al. 2018, arXiv 1802.01561, eq. 1 and the remark on lambda):
    off-policy value targets for a fragment that a lagging policy mu sampled.

    ``v_s - V(x_s) = delta_s + gamma c_s (v_{s+1} - V(x_{s+1}))`` with
    ``delta_s = rho_s (r_s + gamma V(x_{s+1}) - V(x_s))``, ``rho_s = min(clip_rho, ratio)``,
    ``c_s = lambda min(clip_c, ratio)``; an episode's end cuts the trace (a truncation
    bootstraps from V of its final obs, a termination from 0). Returns
    ``(value_targets v_s [T, N], pg_advantages [T, N])`` with the policy-gradient
    advantage ``min(clip_pg_rho, ratio) (r_s + gamma v_{s+1} - V(x_s))``, without the
    weight for ``clip_pg_rho=None`` (a loss whose ratio to mu is the importance weight
    already). On-policy (ratio 1, clips >= 1) the targets are GAE(lambda)'s.
    """
    T = rewards.shape[0]
    ratio = np.exp(log_ratios)
    rho = np.minimum(clip_rho, ratio)
    c = lambda_ * np.minimum(clip_c, ratio)
    not_term = 1.0 - terminated.astype(np.float32)
    not_done = 1.0 - (terminated | truncated).astype(np.float32)
    deltas = rho * (rewards + gamma * values[1:] * not_term - values[:-1])
    correction = np.zeros_like(deltas)  # v_s - V(x_s)
    last = np.zeros_like(deltas[0])
    for t in range(T - 1, -1, -1):
        last = deltas[t] + gamma * c[t] * not_done[t] * last
        correction[t] = last
    targets = values[:-1] + correction
    # v_{s+1}: the next row's target inside an episode; V of the final obs at a
    # truncation (a termination is zeroed by not_term) and at the fragment's end.
    next_correction = np.concatenate([correction[1:], np.zeros_like(correction[:1])])
    next_targets = values[1:] + not_done * next_correction
    advantages = rewards + gamma * not_term * next_targets - values[:-1]
    if clip_pg_rho is not None:
        advantages = np.minimum(clip_pg_rho, ratio) * advantages
    return targets, advantages
