"""AlphaZero's loss (Silver et al. 2018): cross-entropy of the network's policy to the
search's visit distribution plus the squared error of its value to the target. Weight
decay is the optimizer's, not a term here."""

from __future__ import annotations

import torch


def alphazero_loss(logits: torch.Tensor,  # [B, A] the network's policy logits
                   values: torch.Tensor,  # [B] its value of the position, for the mover
                   search_policy: torch.Tensor,  # [B, A] visit fractions, rows sum to 1
                   value_targets: torch.Tensor,  # [B] outcome (mixed with the search's value)
                   ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """Total loss and its two parts (detached) for one batch of positions."""
    policy_loss = -(search_policy * torch.log_softmax(logits, -1)).sum(-1).mean()
    value_loss = (values - value_targets).pow(2).mean()
    return policy_loss + value_loss, {"policy_loss": policy_loss.detach(),
                                      "value_loss": value_loss.detach()}
