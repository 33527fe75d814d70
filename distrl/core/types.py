"""Typed batches: dataclasses of arrays with their shapes, no string-keyed dicts.

B = samples in a batch, D = distribution-input width, E = finished episodes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import numpy as np
import torch

from distrl.models.filters import RunningStats


@dataclass
class Rollout:
    """What an env runner returns for one fragment: post-processed, numpy, flat."""

    obs: np.ndarray  # [B, *obs_shape]
    actions: np.ndarray  # [B] int64 (discrete) or [B, A] float32 (continuous, unclipped)
    logp: np.ndarray  # [B] log-prob of the action under the sampling policy
    dist_inputs: np.ndarray  # [B, D] sampling policy's logits / (mean, log_std)
    values: np.ndarray  # [B] V(obs) under the sampling policy
    advantages: np.ndarray  # [B] GAE advantages (not standardized)
    value_targets: np.ndarray  # [B] advantages + values
    episode_returns: np.ndarray  # [E] returns of episodes that ended in this fragment
    episode_lengths: np.ndarray  # [E]
    env_steps: int  # env steps taken, reset steps included (>= B)
    weights_version: int  # version of the weights that acted
    stats: dict[str, RunningStats] = field(default_factory=dict)  # filters' new samples
    action_mask: np.ndarray | None = None  # [B, n] bool, legal actions (games with masks)
    # Recurrent policies (see core/sequences.py): rows are whole sequences, each env's in
    # time order; a sequence starts where seq_starts is True.
    seq_starts: np.ndarray | None = None  # [B] bool
    state_in: np.ndarray | None = None  # [S, 2, state_size]: (h, c) at each sequence start
    prev_actions: np.ndarray | None = None  # [B] or [B, A]: the step's previous action
    prev_rewards: np.ndarray | None = None  # [B] float32: the step's previous reward
    # What a game's learner reads beyond PPO's rows (games.seats.GameRows: a state
    # critic's nodes, the reach of each move), concatenated by its own concat.
    game: Any = None
    # The steps each part was cut from, for a learner that recomputes GAE (PPO's
    # recompute_advantages): one per part, in the rows' order.
    steps: list[GAESteps] | None = None

    @property
    def size(self) -> int:
        return int(self.obs.shape[0])

    @staticmethod
    def concat(parts: list[Rollout]) -> Rollout:
        """One rollout from several; weights_version is the oldest that acted."""
        arrays = {}
        for f in fields(Rollout):
            if f.name in ("env_steps", "weights_version", "stats", "game", "steps"):
                continue
            xs = [getattr(p, f.name) for p in parts]
            if all(x is None for x in xs):
                continue
            if any(x is None for x in xs):
                raise ValueError(f"cannot concatenate rollouts with and without {f.name}")
            arrays[f.name] = np.concatenate(xs)
        stats = {}
        for p in parts:
            for k, v in p.stats.items():
                stats[k] = stats[k].merge(v) if k in stats else v
        games = [p.game for p in parts]
        if any(g is not None for g in games):
            if any(g is None for g in games):
                raise ValueError("cannot concatenate rollouts with and without game rows")
            arrays["game"] = type(games[0]).concat(games)
        if any(p.steps is not None for p in parts):
            if any(p.steps is None for p in parts):
                raise ValueError("cannot concatenate rollouts with and without their steps")
            arrays["steps"] = [s for p in parts for s in p.steps]
        return Rollout(
            **arrays,
            env_steps=sum(p.env_steps for p in parts),
            weights_version=min(p.weights_version for p in parts),
            stats=stats,
        )


@dataclass
class GAESteps:
    """The steps a PPO sample was cut from, time-major ``[T, N, ...]`` (layout of
    core/returns.py), and which of them it kept: enough to recompute its values and GAE
    under newer weights."""

    obs: np.ndarray  # [T, N, *obs_shape] uint8 or float32
    next_obs: np.ndarray  # [N, *obs_shape] the obs after the last step
    rewards: np.ndarray  # [T, N] float32, as trained on (scaled with normalize_rewards)
    terminated: np.ndarray  # [T, N] bool
    truncated: np.ndarray  # [T, N] bool
    kept: np.ndarray  # [B] int64 indices into [T * N] of the sample's rows, in its order


@dataclass
class Fragment:
    """What an asynchronous learner (APPO) receives from an env runner: its steps as
    sampled, time-major ``[T, N, ...]`` (layout of core/returns.py), for the learner to
    correct with V-trace under its own, newer weights."""

    obs: np.ndarray  # [T, N, *obs_shape] uint8 or float32
    actions: np.ndarray  # [T, N] int64 or [T, N, A] float32 (unclipped)
    logp: np.ndarray  # [T, N] log-prob under the sampling policy
    dist_inputs: np.ndarray  # [T, N, D] the sampling policy's logits / (mean, log_std)
    rewards: np.ndarray  # [T, N] float32 (scaled when rewards are normalized)
    terminated: np.ndarray  # [T, N] bool
    truncated: np.ndarray  # [T, N] bool
    valid: np.ndarray  # [T, N] bool: False on reset steps
    next_obs: np.ndarray  # [N, *obs_shape] the obs after the last step
    episode_returns: np.ndarray  # [E] episodes that ended in this fragment
    episode_lengths: np.ndarray  # [E]
    weights_version: int  # the learner update whose weights acted
    stats: dict[str, RunningStats] = field(default_factory=dict)  # filters' new samples

    @property
    def env_steps(self) -> int:
        """Env steps taken, reset steps included."""
        return int(self.rewards.size)

    @property
    def samples(self) -> int:
        """Valid rows: what the learner trains on."""
        return int(self.valid.sum())


@dataclass
class PPOBatch:
    """A train batch on the learner's device."""

    obs: torch.Tensor  # [B, *obs_shape]
    actions: torch.Tensor  # [B] or [B, A]
    logp: torch.Tensor  # [B]
    dist_inputs: torch.Tensor  # [B, D]
    values: torch.Tensor  # [B]
    advantages: torch.Tensor  # [B] standardized over the whole batch
    value_targets: torch.Tensor  # [B]
    action_mask: torch.Tensor | None = None  # [B, n] bool: the loss masks illegal logits
    prev_actions: torch.Tensor | None = None  # [B] or [B, A] (recurrent policies)
    prev_rewards: torch.Tensor | None = None  # [B]
    # Sequences of a recurrent policy's rows (Rollout.seq_starts): not indexed by row.
    sequences: Sequences | None = None
    # What a caller's loss terms (ppo.loss.LossTerm) read per row: a dataclass of [B, ...]
    # tensors (or None), indexed with the batch (the league's: league.terms.LeagueRows).
    extra: Any = None

    @staticmethod
    def from_rollout(r: Rollout, device: torch.device | str = "cpu",
                     adv_mean_std: tuple[float, float] | None = None) -> PPOBatch:
        """Advantages standardized with ``adv_mean_std`` (default: this rollout's own)."""
        def t(x: np.ndarray) -> torch.Tensor:
            return to_tensor(x, device)
        def maybe(x: np.ndarray | None) -> torch.Tensor | None:
            return None if x is None else t(x)

        seqs = None if r.seq_starts is None else Sequences(t(r.seq_starts), t(r.state_in))
        return PPOBatch(t(r.obs), t(r.actions), t(r.logp), t(r.dist_inputs), t(r.values),
                        t(standardize(r.advantages, adv_mean_std)), t(r.value_targets),
                        maybe(r.action_mask), maybe(r.prev_actions), maybe(r.prev_rewards),
                        seqs)

    def __len__(self) -> int:
        return int(self.obs.shape[0])

    def index(self, idx: torch.Tensor) -> PPOBatch:
        """The rows ``idx``, as a flat batch (its sequences are not kept)."""
        rows = {f.name: getattr(self, f.name)[idx] for f in fields(self)
                if f.name not in ("sequences", "extra") and getattr(self, f.name) is not None}
        return PPOBatch(**rows, extra=index_rows(self.extra, idx))


def standardize(adv: np.ndarray, mean_std: tuple[float, float] | None) -> np.ndarray:
    """Advantages standardized with ``mean_std`` (None: their own), as float32."""
    mean, std = mean_std or (adv.mean(), adv.std())
    return ((adv - mean) / (std + 1e-8)).astype(np.float32)


def index_rows(rows: Any, idx: torch.Tensor) -> Any:
    """A dataclass of per-row tensors with only the rows ``idx`` (None stays None)."""
    if rows is None:
        return None
    return replace(rows, **{f.name: x[idx] for f in fields(rows)
                            if (x := getattr(rows, f.name)) is not None})


def to_tensor(x: np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
    """``x`` as a tensor. Arrays from ray.get are read-only views of shared memory;
    torch warns on those, and a batch is small next to its epochs of SGD, so they are
    copied."""
    return torch.as_tensor(x if x.flags.writeable else x.copy(), device=device)


@dataclass
class Sequences:
    """A recurrent batch's sequences: where each starts (rows in time order per env) and
    the state its first step acted from."""

    starts: torch.Tensor  # [B] bool
    state_in: torch.Tensor  # [S, 2, state_size]


@dataclass
class NStepFragment:
    """What an Ape-X actor sends to a replay shard: n-step transitions whose
    observations are rows of ``frames``, each distinct frame stored once.

    S = frames per observation: the stack depth for frame-stacked image observations
    (obs = ``frames[obs_idx[i]]``, shape ``[S, *frame_shape]``), 1 otherwise (then a frame
    is a whole observation). Consecutive stacks share S-1 frames, and ``next_obs`` is
    another transition's ``obs``: indices instead of copies keep a stored Atari transition
    at about one 84x84 frame.
    """

    frames: np.ndarray  # [F, *frame_shape] in the observation's dtype (uint8 for images)
    obs_idx: np.ndarray  # [B, S] int64 rows of ``frames`` that make the observation
    next_idx: np.ndarray  # [B, S] int64 rows that make the observation k steps later
    actions: np.ndarray  # [B] int64 action index
    rewards: np.ndarray  # [B] float32 sum_{j<k} gamma**j r_{t+j}
    discounts: np.ndarray  # [B] float32 gamma**k; 0 when the episode terminated

    def __len__(self) -> int:
        return int(self.actions.shape[0])


@dataclass
class Transitions:
    """Sampled n-step transitions with observations rebuilt from their frames (numpy)."""

    obs: np.ndarray  # [B, *obs_shape]
    actions: np.ndarray  # [B] int64
    rewards: np.ndarray  # [B] float32
    next_obs: np.ndarray  # [B, *obs_shape]
    discounts: np.ndarray  # [B] float32: the bootstrap's weight, gamma**k or 0

    def __len__(self) -> int:
        return int(self.actions.shape[0])
