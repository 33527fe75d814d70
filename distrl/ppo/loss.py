"""PPO's loss and update: clipped surrogate, value loss, entropy bonus, adaptive KL
penalty, minibatch SGD over one train batch. Other algorithms add their own ideas as
loss terms (LossTerm), never here: the league's magnet and reweighting are league.terms.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np
import torch

from distrl.core.learner import Learner
from distrl.core.returns import gae
from distrl.core.sequences import unroll_rows
from distrl.core.types import GAESteps, PPOBatch, standardize, to_tensor
from distrl.models.distributions import mask_logits
from distrl.ppo.config import PPOHyperparams

LossTerm = Callable[[torch.Tensor, torch.Tensor, PPOBatch],
                    tuple[torch.Tensor, dict[str, torch.Tensor]]]
"""A term added to PPO's loss: (the current distribution inputs [B, D], values [B], the
minibatch) -> (its loss, weighted as it wants; its metrics, detached). It reads the rows
it needs from ``minibatch.extra``, indexed with the rest of the batch."""


def clipped_surrogate(logp: torch.Tensor, batch: PPOBatch, clip_param: float
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """Per row [B]: PPO's clipped surrogate objective, and whether the ratio left the
    clip range (its mean is SB3's and CleanRL's clip_fraction)."""
    ratio = torch.exp(logp - batch.logp)
    adv = batch.advantages
    surrogate = torch.min(adv * ratio, adv * ratio.clamp(1 - clip_param, 1 + clip_param))
    return surrogate, (ratio - 1).abs() > clip_param


def ppo_loss(
    dist_inputs: torch.Tensor,  # [B, D] current policy
    values: torch.Tensor,  # [B] current value predictions
    batch: PPOBatch,
    cfg: PPOHyperparams,
    dist,  # Categorical or DiagGaussian
    kl_coeff: float,
    entropy_coeff: float,
    terms: Sequence[LossTerm] = (),
    value_loss: bool = True,
) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total loss and its parts (detached) for one minibatch; ``value_loss=False``: the
    values come from elsewhere (a league's state critic) and the value head is not
    trained."""
    surrogate, clipped = clipped_surrogate(dist.log_prob(dist_inputs, batch.actions), batch,
                                           cfg.clip_param)
    policy_loss = -surrogate.mean()
    entropy = dist.entropy(dist_inputs).mean()
    loss = policy_loss - entropy_coeff * entropy
    parts = {"policy_loss": policy_loss, "entropy": entropy,
             "clip_fraction": clipped.float().mean()}
    if value_loss:
        vf_err = (values - batch.value_targets).pow(2)
        if cfg.vf_clip_param is not None:
            vf_err = vf_err.clamp(max=cfg.vf_clip_param)
        parts["vf_loss"] = vf_err.mean()
        loss = loss + cfg.vf_loss_coeff * parts["vf_loss"]
    if cfg.use_kl_loss and kl_coeff > 0:  # skipped otherwise: it costs a softmax per step
        parts["kl"] = dist.kl(batch.dist_inputs, dist_inputs).mean()
        loss = loss + kl_coeff * parts["kl"]
    for term in terms:
        term_loss, term_parts = term(dist_inputs, values, batch)
        loss = loss + term_loss
        parts.update(term_parts)
    return loss, {k: v.detach() for k, v in parts.items()}


def explained_variance(values: torch.Tensor, targets: torch.Tensor) -> float:
    """1 - Var(targets - values) / Var(targets) (SB3's and CleanRL's): 1 for a perfect
    value function, 0 for a constant one; nan when the targets do not vary."""
    var = targets.var()
    return float("nan") if var == 0 else float(1 - (targets - values).var() / var)


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
    terms: Sequence[LossTerm] = (),
    value_loss: bool = True,
    refresh: Callable[[PPOBatch], PPOBatch] | None = None,
) -> dict[str, float]:
    """num_epochs of minibatch SGD on one train batch; returns mean metrics.

    Each epoch splits the batch into ``num_minibatches`` near-equal parts (default
    ceil(len / minibatch_size)); DD-PPO fixes the count so that every worker steps
    equally often (its all-reduce runs in the learner's grad hook) even when preemption
    cut its batch short. The reported ``kl`` is KL(sampling || updated policy) over the
    whole batch after the last step, the quantity the KL coefficient adapts to.

    A recurrent batch (``batch.sequences``) is split into whole sequences instead of
    rows; each minibatch runs its sequences from their stored states. ``terms`` are
    added to every minibatch's loss (ppo_loss). ``refresh`` gives the batch each epoch
    after the first trains on (PPO's recompute_advantages: with_recomputed_gae).
    """
    model = learner.model
    recurrent = batch.sequences is not None
    units = int(batch.sequences.starts.sum()) if recurrent else len(batch)
    parts_per_epoch = num_minibatches or min(-(-len(batch) // cfg.minibatch_size), units)
    sums: dict[str, torch.Tensor] = {}
    steps = 0
    compiled = cfg.compile_loss and not recurrent and not terms
    loss_of = _compiled_minibatch_loss() if compiled else minibatch_loss
    for epoch in range(cfg.num_epochs):
        if refresh is not None and epoch > 0:
            batch = refresh(batch)
        order = torch.randperm(units, generator=generator) if cfg.shuffle else torch.arange(units)
        for idx in torch.tensor_split(order, parts_per_epoch):
            if len(idx) == 0:  # DD-PPO: fewer sequences here than the ranks' shared count
                learner.step(sum(p.sum() for p in learner.params) * 0.0, 0)
                continue
            n, loss, parts = loss_of(model, batch, idx, cfg, kl_coeff, entropy_coeff, terms,
                                     value_loss)
            parts.update(learner.step(loss, n))
            for k, v in parts.items():
                sums[k] = sums.get(k, 0.0) + v
            steps += 1
    metrics = {k: float(v) / steps for k, v in sums.items()}
    with torch.no_grad():
        mb, dist_inputs, _, _ = _forward(model, batch, None, value=False)
        dist_inputs = mask_logits(dist_inputs, mb.action_mask)
        metrics["kl"] = float(model.dist.kl(mb.dist_inputs, dist_inputs).mean())
    metrics["explained_variance"] = explained_variance(batch.values, batch.value_targets)
    return metrics


def minibatch_loss(model: torch.nn.Module, batch: PPOBatch, idx: torch.Tensor,
                   cfg: PPOHyperparams, kl_coeff: float, entropy_coeff: float,
                   terms: Sequence[LossTerm] = (), value_loss: bool = True
                   ) -> tuple[int, torch.Tensor, dict[str, torch.Tensor]]:
    """(rows, loss, its parts) of the minibatch ``idx`` of ``batch`` (ppo_loss, with a
    recurrent model's auxiliary next-observation loss where it has one)."""
    mb, dist_inputs, values, aux = _forward(model, batch, idx, value_loss, next_obs_loss=True)
    if cfg.advantage_normalization == "minibatch" and len(mb) > 1:
        adv = mb.advantages
        mb.advantages = (adv - adv.mean()) / (adv.std() + 1e-8)
    dist_inputs = mask_logits(dist_inputs, mb.action_mask)
    loss, parts = ppo_loss(dist_inputs, values, mb, cfg, model.dist, kl_coeff,
                           entropy_coeff, terms, value_loss)
    if aux is not None:
        loss = loss + model.next_obs_weight * aux
        parts["next_obs_loss"] = aux.detach()
    return len(mb), loss, parts


@functools.cache
def _compiled_minibatch_loss() -> Callable:
    """minibatch_loss compiled once a process (torch.compile keeps a graph per model and
    shape; recompiles when a guarded float, e.g. an adapting KL coefficient, changes)."""
    return torch.compile(minibatch_loss, dynamic=False)


def _forward(model: torch.nn.Module, batch: PPOBatch, idx: torch.Tensor | None,
             value: bool = True, next_obs_loss: bool = False
             ) -> tuple[PPOBatch, torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """(minibatch, distribution inputs, values, auxiliary loss or None) of rows ``idx``
    (sequences, for a recurrent batch; None: all); ``value=False``: a feed-forward
    model skips its value head (zeros); ``next_obs_loss``: a recurrent model's own
    (unroll_rows)."""
    if batch.sequences is None:
        mb = batch if idx is None else batch.index(idx)
        return (mb, *model(mb.obs, value=value), None)
    dist_inputs, values, rows, aux = unroll_rows(model, batch, idx, next_obs_loss)
    return batch.index(rows), dist_inputs, values, aux



@torch.no_grad()
def recomputed_gae(model: torch.nn.Module, steps: list[GAESteps], gamma: float,
                   lambda_: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(values, advantages, value_targets), each [B] in the sample's row order: GAE over
    the steps the sample was cut from, under the model's current value function."""
    device = next(model.parameters()).device
    parts = []
    for s in steps:
        T, N = s.rewards.shape
        obs = np.concatenate([s.obs.reshape(T * N, *s.obs.shape[2:]), s.next_obs])
        values = model(to_tensor(obs, device))[1].cpu().numpy().reshape(T + 1, N)
        adv, targets = gae(s.rewards, values, s.terminated, s.truncated, gamma, lambda_)
        parts.append([x.reshape(-1)[s.kept] for x in (values[:-1], adv, targets)])
    values, adv, targets = (np.concatenate(x).astype(np.float32) for x in zip(*parts, strict=True))
    return values, adv, targets


def with_recomputed_gae(batch: PPOBatch, model: torch.nn.Module, steps: list[GAESteps],
                        cfg: PPOHyperparams) -> PPOBatch:
    """``batch`` with its values, advantages (standardized as cfg says) and value targets
    recomputed under the model's current value function."""
    values, adv, targets = recomputed_gae(model, steps, cfg.gamma, cfg.gae_lambda)
    device = batch.obs.device
    return replace(batch, values=to_tensor(values, device),
                   advantages=to_tensor(standardize(adv, cfg.advantage_stats()), device),
                   value_targets=to_tensor(targets, device))
