"""Run settings shared by every algorithm: env, seed, stopping, logging, Ray, device.

How many workers sample (and train) is the algorithm's: PPOConfig.num_env_runners,
DDPPOConfig.num_workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

import tyro

from distrl.envs import EnvSpec


@dataclass(frozen=True)
class RunConfig:
    """Where and how long a run goes: env, stopping, logging, checkpoints, Ray."""

    env: Annotated[EnvSpec, tyro.conf.arg(constructor=str, metavar="ENV_ID")] = "CartPole-v1"
    """Gymnasium env id, or (from Python) a zero-argument factory returning an Env."""
    seed: int = 0
    """Seed of weights, envs and sampling; equal seeds give equal in-process runs."""
    stop_return: float | None = None
    """Stop once the mean return of the last 100 episodes reaches this."""
    max_env_steps: int = 1_000_000
    """Stop after this many env steps."""
    logdir: str | None = None
    """Directory for metrics.jsonl, TensorBoard events and checkpoints (default runs/<name>)."""
    checkpoint_every: int = 0
    """Also checkpoint every N iterations (0: only at the end)."""
    resume: str | None = None
    """Continue the run saved in this logdir or checkpoint directory."""
    address: str | None = None
    """Ray cluster to join (else $RAY_ADDRESS, else an embedded local cluster)."""
    device: Literal["auto", "cpu", "cuda"] = "auto"
    """Learner device; auto picks CUDA when available."""
    num_torch_threads: int = 1
    """Torch intra-op threads of the learner (small nets run fastest on one)."""
    json: bool = False
    """Print the final result as one JSON object on the last stdout line."""
    progress: bool = True
    """Show live progress on the terminal (only when stderr is a TTY)."""

    def __post_init__(self) -> None:
        for name in ("max_env_steps", "num_torch_threads"):
            if getattr(self, name) <= 0:
                raise ValueError(f"`{name}` ({getattr(self, name)}) must be > 0.")
        if self.checkpoint_every < 0:
            raise ValueError(f"`checkpoint_every` ({self.checkpoint_every}) must be >= 0.")
