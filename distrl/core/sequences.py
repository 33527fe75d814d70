"""Sequences for recurrent policies: where they start in a fragment, the padded index
that batches them, and the forward pass over a batch's rows through them.

A fragment's rows are cut into sequences at each env's first row, at every episode's
first step, and every ``max_seq_len`` steps within an episode (truncated backprop
through time). Rows are laid out env-major, each env's in time order, so a sequence is
a run of consecutive rows and rollouts concatenate without splitting one.
"""

from __future__ import annotations

import numpy as np
import torch

from distrl.core.sampling import Trajectory
from distrl.core.types import PPOBatch, Rollout


def sequence_starts(first: np.ndarray, max_seq_len: int) -> np.ndarray:
    """``first [T, N]`` (the row starts an episode) -> ``[T, N]`` bool sequence starts:
    row 0, every episode start, and every ``max_seq_len`` rows after a start."""
    starts = np.zeros(first.shape, bool)
    run = np.zeros(first.shape[1], np.int64)  # rows since the current sequence began
    for t in range(first.shape[0]):
        starts[t] = (t == 0) | first[t] | (run >= max_seq_len)
        run = np.where(starts[t], 1, run + 1)
    return starts


def env_major(x: np.ndarray) -> np.ndarray:
    """``[T, N, ...]`` -> ``[N * T, ...]``: each env's rows together, in time order."""
    return np.ascontiguousarray(x.swapaxes(0, 1)).reshape(-1, *x.shape[2:])


def to_sequences(rollout: Rollout, traj: Trajectory, max_seq_len: int) -> Rollout:
    """A recurrent runner's rollout (rows ``[k, N]`` time-major, gae_rollout's layout)
    rearranged env-major with its sequence starts, the state each sequence starts from,
    and each row's previous action and reward (from the policy's extras)."""
    k, n = traj.steps_per_env, traj.obs.shape[1]

    def arrange(x: np.ndarray) -> np.ndarray:
        return env_major(x.reshape(k, n, *x.shape[1:]))

    def extra(key: str) -> np.ndarray:
        return env_major(extra_tm(traj, key, k, n))

    starts = env_major(sequence_starts(extra_tm(traj, "first", k, n), max_seq_len))
    for name in ("obs", "actions", "logp", "dist_inputs", "values", "advantages",
                 "value_targets"):
        setattr(rollout, name, arrange(getattr(rollout, name)))
    rollout.seq_starts = starts
    rollout.state_in = extra("state_in")[starts]
    rollout.prev_actions, rollout.prev_rewards = extra("prev_actions"), extra("prev_rewards")
    return rollout


def extra_tm(traj: Trajectory, key: str, k: int, n: int) -> np.ndarray:
    """A policy extra at each env's first k valid rows, ``[k, N, ...]`` time-major."""
    x = traj.extras[key]
    return traj.first_valid(x).reshape(k, n, *x.shape[2:])


def padded_index(starts: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sequence starts ``[B]`` -> (rows ``[L, S]``, mask ``[L, S]``): column s holds the
    rows of sequence s, padded after its end (row 0, masked out) to the longest, L."""
    begin = torch.nonzero(starts).squeeze(1)
    ends = torch.cat([begin[1:], begin.new_tensor([starts.shape[0]])])
    lengths = ends - begin
    offsets = torch.arange(int(lengths.max()), device=starts.device)[:, None]
    mask = offsets < lengths[None]
    return torch.where(mask, begin[None] + offsets, torch.zeros_like(offsets)), mask


def unroll_rows(model: torch.nn.Module, batch: PPOBatch, seqs: torch.Tensor | None = None,
                next_obs_loss: bool = False
                ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """The recurrent model over sequences ``seqs`` (indices; default all) of ``batch``:
    (distribution inputs [n, D], values [n], rows [n]) for their n real rows, in the
    same order, and with ``next_obs_loss`` the model's auxiliary loss over them (None
    where it has no such head). Padded steps run after each sequence's last one and are
    dropped, so they reach no output and no loss term."""
    rows, mask = padded_index(batch.sequences.starts)
    state = batch.sequences.state_in
    if seqs is not None:
        rows, mask, state = rows[:, seqs], mask[:, seqs], state[seqs]
        keep = mask.any(dim=1)  # shorten to the longest chosen sequence
        rows, mask = rows[keep], mask[keep]
    obs = batch.obs[rows]
    dist_inputs, values, features = model.unroll(obs, (state[:, 0], state[:, 1]),
                                                 batch.prev_actions[rows],
                                                 batch.prev_rewards[rows])
    aux = (model.next_obs_loss(features, obs, batch.actions[rows], mask)
           if next_obs_loss and model.next_obs is not None else None)
    return dist_inputs[mask], values[mask], rows[mask], aux
