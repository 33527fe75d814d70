"""DQN maths for Ape-X, no Ray: the loss (double Q, IS-weighted Huber), the actors'
epsilon ladder and initial priorities, and the fragment builder that turns a Trajectory
into n-step transitions whose frames are stored once.
"""

from __future__ import annotations

import numpy as np
import torch
from torch.nn import functional as F

from distrl.core.returns import n_step
from distrl.core.sampling import Trajectory
from distrl.core.types import NStepFragment


def epsilon_ladder(num_workers: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X's per-actor exploration: eps_i = base ** (1 + alpha * i / (N - 1)); a single
    actor gets ``base``. Every actor has its own, also at default settings (ray#7478)."""
    if num_workers == 1:
        return np.array([base])
    i = np.arange(num_workers)
    return base ** (1.0 + alpha * i / (num_workers - 1))


def low_epsilon_workers(epsilons: np.ndarray) -> np.ndarray:
    """Indices of the ``max(1, N // 3)`` actors with the lowest epsilon, lowest first:
    their episodes show what the policy can do (RLlib's Ape-X reports those); the others
    explore too much."""
    count = max(1, len(epsilons) // 3)
    return np.argsort(epsilons, kind="stable")[:count]


def compact_frames(obs_seq: np.ndarray, frame_stack: int) -> tuple[np.ndarray, np.ndarray]:
    """``obs_seq [L, *obs_shape]`` -> ``(frames [F, ...], idx [L, S])`` with
    ``frames[idx[i]] == obs_seq[i]`` (S = frame_stack; stacks along axis 0).

    A stack that continues the previous one (``obs[i+1][:-1] == obs[i][1:]``) adds only
    its last frame; any other (the first, an episode start) adds its distinct frames.
    """
    L = obs_seq.shape[0]
    if frame_stack > 1 and obs_seq.shape[1] != frame_stack:
        raise ValueError(f"frame_stack={frame_stack} but observations have shape "
                         f"{obs_seq.shape[1:]}: stacked frames must lie along the first axis "
                         "(gymnasium's FrameStackObservation); use frame_stack=1 otherwise.")
    if frame_stack == 1:
        return obs_seq, np.arange(L, dtype=np.int64)[:, None]
    frames: list[np.ndarray] = []
    idx = np.empty((L, frame_stack), dtype=np.int64)
    for i in range(L):
        stack = obs_seq[i]
        if i > 0 and np.array_equal(stack[:-1], obs_seq[i - 1][1:]):
            idx[i, :-1] = idx[i - 1, 1:]
            idx[i, -1] = len(frames)
            frames.append(stack[-1])
            continue
        for j in range(frame_stack):  # reset stacks repeat one frame: store it once
            if j > 0 and np.array_equal(stack[j], stack[j - 1]):
                idx[i, j] = idx[i, j - 1]
            else:
                idx[i, j] = len(frames)
                frames.append(stack[j])
    return np.stack(frames), idx


def nstep_fragment(traj: Trajectory, gamma: float, n: int, frame_stack: int
                   ) -> tuple[NStepFragment, tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The n-step transitions of a Trajectory (time-major order, see returns.n_step) and
    their ``(t, env, k)`` rows (for priorities). Each env's obs sequence is its T rows
    then next_obs; frames keep the obs dtype and are compacted per env, then concatenated
    (env-major), so a transition's next_idx is the obs k steps later or next_obs."""
    t, env, k, rewards, discounts = n_step(traj.rewards, traj.terminated, traj.truncated,
                                           traj.valid, gamma, n)
    N = traj.rewards.shape[1]
    parts, col_idx, offset = [], [], 0
    for j in range(N):
        seq = np.concatenate([traj.obs[:, j], traj.next_obs[j][None]])
        frames, idx = compact_frames(seq, frame_stack)
        parts.append(frames)
        col_idx.append(idx + offset)
        offset += len(frames)
    idx = np.stack(col_idx, axis=1)  # [T + 1, N, S]
    fragment = NStepFragment(
        frames=np.concatenate(parts), obs_idx=idx[t, env], next_idx=idx[t + k, env],
        actions=traj.actions[t, env].astype(np.int64), rewards=rewards, discounts=discounts)
    return fragment, (t, env, k)


def initial_priorities(q: np.ndarray, q_next: np.ndarray, actions: np.ndarray,
                       rewards: np.ndarray, discounts: np.ndarray) -> np.ndarray:
    """|td| an actor computes with its own online net (no target net, as in RLlib):
    ``|r + discount * max_a Q(next) - Q(obs, a)|``; q, q_next [B, A]."""
    target = rewards + discounts * q_next.max(-1)
    return np.abs(target - q[np.arange(len(actions)), actions])


def dqn_loss(q: torch.Tensor, q_next_online: torch.Tensor | None, q_next_target: torch.Tensor,
             actions: torch.Tensor, rewards: torch.Tensor, discounts: torch.Tensor,
             is_weights: torch.Tensor, double_q: bool = True, huber_delta: float = 1.0
             ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
    """IS-weighted Huber loss of the n-step TD error; returns (loss, |td| detached, metrics).

    q [B, A] = Q_online(obs); the target is ``rewards + discounts * Q_target(next, a*)``
    with a* = argmax Q_online(next) (double Q, van Hasselt et al. 2016) or argmax
    Q_target(next) (plain); the target carries no gradient.
    """
    if double_q and q_next_online is None:
        raise ValueError("double_q needs q_next_online, the online net's Q(next_obs).")
    with torch.no_grad():
        if double_q:
            best = q_next_online.argmax(-1, keepdim=True)
            q_next = q_next_target.gather(-1, best).squeeze(-1)
        else:
            q_next = q_next_target.max(-1).values
        target = rewards + discounts * q_next
    q_taken = q.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)
    td = q_taken - target
    per_sample = F.huber_loss(q_taken, target, reduction="none", delta=huber_delta)
    loss = (is_weights * per_sample).mean()
    td_abs = td.detach().abs()
    metrics = {"loss": loss.detach(), "mean_q": q_taken.detach().mean(),
               "mean_td_abs": td_abs.mean()}
    return loss, td_abs, metrics
