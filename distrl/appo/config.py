"""APPOConfig: asynchronous PPO's knobs (IMPALA's V-trace, Espeholt et al. 2018, arXiv
1802.01561, under PPO's clipped surrogate, as RLlib's APPO). Env runners sample without
waiting for the learner; the learner corrects each fragment's lag with V-trace.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from distrl.core.config import check_positive
from distrl.ppo.config import PPOConfig


@dataclass(frozen=True)
class APPOConfig(PPOConfig):
    """APPO: PPO's knobs and runners; one learner consumes fragments as they arrive."""

    lambda_: Annotated[float, tyro.conf.arg(aliases=("--lambda",))] = 1.0
    """V-trace lambda (1: IMPALA's V-trace; lower cuts the traces like GAE's lambda)."""
    use_kl_loss: bool = False
    """Add an adaptive KL(sampling || new) penalty (RLlib's APPO default: off)."""
    lr: float = 1e-3
    """Adam learning rate (ignored when lr_schedule is set)."""
    num_epochs: int = 2
    """Passes over each train batch (IMPALA makes one; PPO's clip allows a few more)."""
    minibatch_size: int = 256
    """Samples per SGD step."""
    train_batch_size: int = 1024
    """Env samples per learner update: whole fragments, rollout_fragment_length x
    max(num_env_runners, 1) x num_envs_per_env_runner (from any runners, as they come)."""
    vtrace_clip_rho: float = 1.0
    """V-trace's rho-bar: the importance weight's clip in the value targets."""
    vtrace_clip_c: float = 1.0
    """V-trace's c-bar: the trace-cutting weight's clip."""
    vtrace_clip_pg_rho: float = 1.0
    """The importance weight's clip in the policy-gradient advantage (clip_around
    "learner"; with "sampler" the surrogate's clipped ratio is the weight)."""
    clip_around: Literal["learner", "sampler"] = "learner"
    """The policy PPO's ratio (and KL) is taken against; either way the gradient on log
    pi carries one importance weight. "learner": the learner's own policy before the
    update, the lag left to V-trace's weight min(vtrace_clip_pg_rho, pi / mu) in the
    advantage, so the first step's is IMPALA's (RLlib's APPO with its target network
    refreshed every batch; decoupled PPO, Hilton et al. 2021). "sampler": the policy that
    sampled; the ratio pi / mu is the weight, clipped to 1 +- clip_param, and the
    advantage carries none: a trust region around the stale data."""
    broadcast_interval: int = 1
    """Learner updates between weight broadcasts to the env runners."""
    max_queued_fragments: int = 2
    """Fragments waiting for the learner, per runner, beyond which runners wait: bounds
    the policy lag when the learner is the slower side."""
    overlap: tyro.conf.Suppress[bool] = False
    """PPO's knob, not APPO's: its runners always sample ahead (hidden from the CLI)."""
    recompute_advantages: tyro.conf.Suppress[bool] = False
    """PPO's knob, not APPO's: V-trace values each batch once (hidden from the CLI)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        check_positive(self, "vtrace_clip_rho", "vtrace_clip_c", "vtrace_clip_pg_rho",
                       "broadcast_interval", "max_queued_fragments")
        if self.overlap:
            raise ValueError("overlap is PPO's knob: APPO's runners always sample while the "
                             "learner trains. Drop overlap.")
        if self.recompute_advantages:
            raise ValueError("recompute_advantages is PPO's knob: APPO's V-trace values each "
                             "batch once, with the learner's weights. Drop it.")
        if self.model.use_lstm:
            raise ValueError("APPO's learner takes feed-forward policies: for use_lstm, "
                             "train with `distrl train ppo`.")
