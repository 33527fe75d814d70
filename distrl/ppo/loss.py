"""PPO's loss and update: clipped surrogate, value loss, entropy bonus, adaptive KL
penalty (and a league's magnet term), minibatch SGD over one train batch.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from distrl.core.learner import Learner
from distrl.core.sequences import unroll_rows
from distrl.core.types import PPOBatch
from distrl.models.distributions import mask_logits
from distrl.ppo.config import PPOHyperparams


def ppo_loss(
    dist_inputs: torch.Tensor,  # [B, D] current policy
    values: torch.Tensor,  # [B] current value predictions
    batch: PPOBatch,
    cfg: PPOHyperparams,
    dist,  # Categorical or DiagGaussian
    kl_coeff: float,
    entropy_coeff: float,
    magnet_coeff: float = 0.0,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total loss and its parts (detached) for one minibatch."""
    logp = dist.log_prob(dist_inputs, batch.actions)
    ratio = torch.exp(logp - batch.logp)
    adv = batch.advantages
    surrogate = torch.min(adv * ratio, adv * ratio.clamp(1 - cfg.clip_param, 1 + cfg.clip_param))
    policy_loss = -_weighted_mean(batch.pg_weights)(surrogate)
    reg_mean = _weighted_mean(batch.reg_weights)  # the magnet's and entropy's terms
    entropy = reg_mean(dist.entropy(dist_inputs))
    vf_loss = torch.zeros(())
    if cfg.vf_loss_coeff > 0:  # 0: the values come from elsewhere (league state critics)
        vf_err = (values - batch.value_targets).pow(2)
        if cfg.vf_clip_param is not None:
            vf_err = vf_err.clamp(max=cfg.vf_clip_param)
        vf_loss = vf_err.mean()
    loss = policy_loss + cfg.vf_loss_coeff * vf_loss - entropy_coeff * entropy
    parts = {"policy_loss": policy_loss, "vf_loss": vf_loss, "entropy": entropy}
    if cfg.use_kl_loss and kl_coeff > 0:  # skipped otherwise: it costs a softmax per step
        parts["kl"] = dist.kl(batch.dist_inputs, dist_inputs).mean()
        loss = loss + kl_coeff * parts["kl"]
    if magnet_coeff > 0 and batch.magnet_dist_inputs is not None:
        parts["magnet_kl"] = reg_mean(dist.kl(dist_inputs, batch.magnet_dist_inputs))
        loss = loss + magnet_coeff * parts["magnet_kl"]
    return loss, {k: v.detach() for k, v in parts.items()}


def _weighted_mean(weights: torch.Tensor | None) -> Callable[[torch.Tensor], torch.Tensor]:
    """Mean over rows, each weighted (weights of mean 1; None: the plain mean)."""
    if weights is None:
        return torch.mean
    return lambda x: (x * weights).mean()


def update_kl_coeff(kl_coeff: float, kl: float, kl_target: float) -> float:
    """RLlib's adaptive rule: x1.5 above 2 x target, x0.5 below target / 2."""
    if kl > 2.0 * kl_target:
        return kl_coeff * 1.5
    if kl < 0.5 * kl_target:
        return kl_coeff * 0.5
    return kl_coeff


def ppo_update(
    learner: Learner,
    batch: PPOBatch,
    cfg: PPOHyperparams,
    kl_coeff: float,
    entropy_coeff: float,
    generator: torch.Generator | None = None,
    num_minibatches: int | None = None,
    magnet_coeff: float = 0.0,
) -> dict[str, float]:
    """num_epochs of minibatch SGD on one train batch; returns mean metrics.

    Each epoch splits the batch into ``num_minibatches`` near-equal parts (default
    ceil(len / minibatch_size)); DD-PPO fixes the count so that every worker steps
    equally often (its all-reduce runs in the learner's grad hook) even when preemption
    cut its batch short. The reported ``kl`` is KL(sampling || updated policy) over the
    whole batch after the last step, the quantity the KL coefficient adapts to.

    A recurrent batch (``batch.sequences``) is split into whole sequences instead of
    rows; each minibatch runs its sequences from their stored states.
    """
    model = learner.model
    recurrent = batch.sequences is not None
    units = int(batch.sequences.starts.sum()) if recurrent else len(batch)
    parts_per_epoch = num_minibatches or min(-(-len(batch) // cfg.minibatch_size), units)
    sums: dict[str, torch.Tensor] = {}
    steps = 0
    for _ in range(cfg.num_epochs):
        order = torch.randperm(units, generator=generator) if cfg.shuffle else torch.arange(units)
        for idx in torch.tensor_split(order, parts_per_epoch):
            if len(idx) == 0:  # DD-PPO: fewer sequences here than the ranks' shared count
                learner.step(sum(p.sum() for p in learner.params) * 0.0, 0)
                continue
            mb, dist_inputs, values = _forward(model, batch, idx, cfg.vf_loss_coeff > 0)
            if cfg.advantage_normalization == "minibatch" and len(mb) > 1:
                adv = mb.advantages
                mb.advantages = (adv - adv.mean()) / (adv.std() + 1e-8)
            dist_inputs = mask_logits(dist_inputs, mb.action_mask)
            loss, parts = ppo_loss(dist_inputs, values, mb, cfg, model.dist, kl_coeff,
                                   entropy_coeff, magnet_coeff)
            parts.update(learner.step(loss, len(mb)))
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + v
            steps += 1
    metrics = {k: float(v) / steps for k, v in sums.items()}
    with torch.no_grad():
        mb, dist_inputs, _ = _forward(model, batch, None, value=False)
        dist_inputs = mask_logits(dist_inputs, mb.action_mask)
        metrics["kl"] = float(model.dist.kl(mb.dist_inputs, dist_inputs).mean())
    return metrics


def _forward(model: torch.nn.Module, batch: PPOBatch, idx: torch.Tensor | None,
             value: bool = True) -> tuple[PPOBatch, torch.Tensor, torch.Tensor]:
    """(minibatch, distribution inputs, values) of rows ``idx`` (sequences, for a
    recurrent batch; None: all); ``value=False``: a feed-forward model skips its value
    head (zeros)."""
    if batch.sequences is None:
        mb = batch if idx is None else batch.index(idx)
        return (mb, *model(mb.obs, value=value))
    dist_inputs, values, rows = unroll_rows(model, batch, idx)
    return batch.index(rows), dist_inputs, values

