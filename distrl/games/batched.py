"""One forward pass for many policies of one architecture: a league's opponents.

A league seats many distinct opponents at once (64 games, 64 snapshots); one small
forward pass each costs 64 times the Python and kernel-launch overhead of one. Policies
that share an architecture instead run as one: their weights stacked along a new first
dimension, each layer one batched matmul (torch.baddbmm) of every policy's observations
with its own weights. torch.func.vmap over the module did the same and was slower than
the loop here (its batching rules cost more than 32 small forwards).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable, Sequence
from typing import Any

import torch


def batch_key(pi: Any) -> Hashable | None:
    """Policies with equal keys can act in one stacked forward; None: it acts alone
    (bots, the random player, recurrent policies with their per-seat states, networks
    forward_stacked does not cover)."""
    if getattr(pi, "recurrent", False) or getattr(pi, "bot", False):
        return None
    if not getattr(getattr(pi, "functional", None), "stackable", False):
        return None
    return pi.arch


def act_together(policy: Callable[[str], Any], where: dict[str, Any], learning: set[str],
                 greedy: Collection[str]) -> list[list[str]]:
    """The policies acting now, grouped: opponents with one batch_key (architecture),
    greediness and number of seats act together (equal counts: nothing to pad); learning
    policies (they need values) and the rest alone."""
    groups: dict[Hashable, list[str]] = {}
    for pid, seats in where.items():
        key = None if pid in learning else batch_key(policy(pid))
        group = (pid,) if key is None else (key, pid in greedy, len(seats))
        groups.setdefault(group, []).append(pid)
    return list(groups.values())


def stacked_forward(policies: Sequence[Any], obs: torch.Tensor) -> torch.Tensor:
    """The distribution inputs of each policy k for its own observations ``obs[k]``
    (``obs`` [K, n, ...]), as rows [K * n, D] in that order; value heads are skipped.
    The policies share ``arch`` and give ``layers()``, their weights as ``functional``
    (an ActorCritic: ``forward_stacked``) takes them."""
    out = policies[0].functional.forward_stacked(obs, [p.layers() for p in policies])
    return out.reshape(-1, out.shape[-1])
