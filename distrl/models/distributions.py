"""Action distributions as tiny stateless classes over a tensor of "distribution inputs"
(logits, or mean and log-std), so that batches carry plain tensors and the KL to the
sampling policy can be computed from stored inputs. They skip torch.distributions'
argument validation and object construction: on CartPole-sized nets that overhead
is a large share of a forward pass.
"""

from __future__ import annotations

import math

import torch

MASKED_LOGIT = -1e9
"""Logit of an illegal action: exp() underflows to exactly 0, yet stays finite, so
entropies and KLs see 0 * finite, never 0 * inf = nan."""


def mask_logits(logits: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """Logits with illegal actions (mask False) set to MASKED_LOGIT; unchanged without a
    mask. Sampling, the PPO loss and evaluation all apply it, so a masked action is never
    drawn and carries no probability mass in the gradient."""
    return logits if mask is None else logits.masked_fill(~mask.bool(), MASKED_LOGIT)


class Categorical:
    """Discrete actions; inputs are logits [B, n]."""

    @staticmethod
    def log_prob(inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(inputs, dim=-1)
        return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)

    @staticmethod
    def entropy(inputs: torch.Tensor) -> torch.Tensor:
        logp = torch.log_softmax(inputs, dim=-1)
        return -(logp.exp() * logp).sum(-1)

    @staticmethod
    def kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        """KL(old || new) per row."""
        old_logp = torch.log_softmax(old, dim=-1)
        return (old_logp.exp() * (old_logp - torch.log_softmax(new, dim=-1))).sum(-1)

    @staticmethod
    def sample(inputs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        # Gumbel-max: one rand + argmax, cheaper than torch.multinomial on small batches.
        u = torch.rand(inputs.shape, generator=generator).clamp_(1e-12, 1.0)
        return torch.argmax(inputs - torch.log(-torch.log(u)), dim=-1)

    @staticmethod
    def greedy(inputs: torch.Tensor) -> torch.Tensor:
        return torch.argmax(inputs, dim=-1)


class DiagGaussian:
    """Continuous actions; inputs are [mean, log_std] concatenated on the last axis."""

    @staticmethod
    def _split(inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        mean, log_std = torch.chunk(inputs, 2, dim=-1)
        return mean, log_std

    @staticmethod
    def log_prob(inputs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        mean, log_std = DiagGaussian._split(inputs)
        z = (actions - mean) / log_std.exp()
        return (-0.5 * z.pow(2) - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)

    @staticmethod
    def entropy(inputs: torch.Tensor) -> torch.Tensor:
        _, log_std = DiagGaussian._split(inputs)
        return (log_std + 0.5 * math.log(2 * math.pi * math.e)).sum(-1)

    @staticmethod
    def kl(old: torch.Tensor, new: torch.Tensor) -> torch.Tensor:
        m0, s0 = DiagGaussian._split(old)
        m1, s1 = DiagGaussian._split(new)
        var0, var1 = (2 * s0).exp(), (2 * s1).exp()
        return (s1 - s0 + (var0 + (m0 - m1).pow(2)) / (2 * var1) - 0.5).sum(-1)

    @staticmethod
    def sample(inputs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        mean, log_std = DiagGaussian._split(inputs)
        return mean + log_std.exp() * torch.randn(mean.shape, generator=generator)

    @staticmethod
    def greedy(inputs: torch.Tensor) -> torch.Tensor:
        return DiagGaussian._split(inputs)[0]


def sde_log_std(latent: torch.Tensor, log_std: torch.Tensor) -> torch.Tensor:
    """gSDE's per-action log-std given the state: the noise latent @ E, E ~ N(0, std^2)
    entry-wise ([features, actions]), has variance latent^2 @ std^2. The features are
    detached here, as in SB3 (its learn_features=False): exploration does not shape them.
    The 1e-6 keeps the log finite where every feature is 0 (ReLU)."""
    var = latent.detach().pow(2) @ (2 * log_std).exp()
    return 0.5 * torch.log(var + 1e-6)


class SDENoise:
    """gSDE's exploration for N envs stepped together: actions = mean + latent @ (Z * std)
    with Z [N, features, actions] standard normal, redrawn every ``freq`` calls (and when N
    changes). Over Z the noise is the Gaussian sde_log_std describes, so the policy's
    distribution inputs ([mean, sde_log_std]) give DiagGaussian's log-prob, entropy and KL
    unchanged; only the draws are correlated in time. Z is kept apart from std so that new
    weights take effect at once."""

    def __init__(self, freq: int):
        self.freq, self.z, self.calls = freq, None, 0

    def sample(self, dist_inputs: torch.Tensor, latent: torch.Tensor, log_std: torch.Tensor,
               generator: torch.Generator | None) -> torch.Tensor:
        latent = latent.reshape(-1, latent.shape[-1])  # a recurrent step's [1, N, F]
        n, features = latent.shape
        if self.z is None or self.z.shape[0] != n or self.calls % self.freq == 0:
            self.z, self.calls = torch.randn((n, features, log_std.shape[1]),
                                             generator=generator), 0
        self.calls += 1
        noise = torch.einsum("nf,nfa->na", latent, self.z.to(latent.device) * log_std.exp())
        return DiagGaussian.greedy(dist_inputs) + noise

    def get_state(self) -> tuple:
        """The held map and its age (a checkpoint's, for an exact resume)."""
        return None if self.z is None else self.z.numpy().copy(), self.calls

    def set_state(self, state: tuple) -> None:
        z, self.calls = state
        self.z = None if z is None else torch.as_tensor(z)


Distribution = type[Categorical] | type[DiagGaussian]

