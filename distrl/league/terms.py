"""The league's additions to PPO's loss, as loss terms (ppo.loss.LossTerm): magnetic
mirror descent's KL to a magnet, and Magnet.counterfactual's row weights (sequence-form
MMD), with the per-row tensors they read (LeagueRows, PPOBatch.extra).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from distrl.ppo.loss import LossTerm, clipped_surrogate


@dataclass
class LeagueRows:
    """Per-row tensors of a league learner's terms; each weight has mean 1 over the batch."""

    magnet: torch.Tensor | None = None  # [B, D] the magnet's masked distribution inputs
    pg_weights: torch.Tensor | None = None  # [B] of the policy term (None: all 1)
    reg_weights: torch.Tensor | None = None  # [B] of the magnet and entropy terms


def magnet_term(dist, coeff: float) -> LossTerm:
    """coeff x KL(policy || magnet), each row weighted by reg_weights."""
    def term(dist_inputs, values, mb):
        rows: LeagueRows = mb.extra
        kl = _weighted_mean(dist.kl(dist_inputs, rows.magnet), rows.reg_weights)
        return coeff * kl, {"magnet_kl": kl.detach()}
    return term


def reweighting_term(dist, clip_param: float, entropy_coeff: float) -> LossTerm:
    """What turns PPO's plain means of its clipped surrogate and entropy bonus into means
    weighted by pg_weights and reg_weights: the weights' excess over 1 times each row's
    term (PPO's term plus this one is the weighted term)."""
    def term(dist_inputs, values, mb):
        rows: LeagueRows = mb.extra
        surrogate, _ = clipped_surrogate(dist.log_prob(dist_inputs, mb.actions), mb,
                                         clip_param)
        entropy = dist.entropy(dist_inputs)
        loss = surrogate.new_zeros(())
        metrics = {}
        if rows.pg_weights is not None:
            loss = loss - ((rows.pg_weights - 1) * surrogate).mean()
            metrics["weighted_policy_loss"] = -(rows.pg_weights * surrogate).mean().detach()
        if rows.reg_weights is not None:
            loss = loss - entropy_coeff * ((rows.reg_weights - 1) * entropy).mean()
            metrics["weighted_entropy"] = (rows.reg_weights * entropy).mean().detach()
        return loss, metrics
    return term


def _weighted_mean(x: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    return x.mean() if weights is None else (x * weights).mean()


def counterfactual_weights(reach_logp: np.ndarray, device: torch.device
                           ) -> tuple[torch.Tensor, torch.Tensor]:
    """Magnet.counterfactual's row weights from [B, 2] (own, others') log-probabilities
    of the game so far: 1 / own and 1 / (own x others), each over its mean."""
    def inverse(logp: np.ndarray) -> torch.Tensor:
        w = np.exp(logp.max() - logp)  # scaled by the largest probability: no overflow
        return torch.as_tensor(w / w.mean(), dtype=torch.float32, device=device)
    x = reach_logp.astype(np.float64)
    return inverse(x[:, 0]), inverse(x.sum(1))


def visit_weights(obs: np.ndarray, device: torch.device) -> torch.Tensor:
    """Magnet.regulariser "visits": 1 / (the rows with the same observation), over its
    mean, so each distinct observation in the batch weighs alike."""
    flat = np.ascontiguousarray(obs.reshape(len(obs), -1))
    # Rows as opaque bytes: a 1-D unique, 20x faster than unique(axis=0)'s row sort
    # (bytes compare -0.0 and 0.0 apart; observations here are one-hot / counts).
    rows = flat.view(np.dtype((np.void, flat.shape[1] * flat.itemsize))).ravel()
    _, inverse, counts = np.unique(rows, return_inverse=True, return_counts=True)
    w = 1.0 / counts[inverse]
    return torch.as_tensor(w / w.mean(), dtype=torch.float32, device=device)
