"""`distrl export RUN --format torchscript|onnx`: a saved policy as one file that runs
without distrl (torch.jit.load, or any ONNX runtime).

The file maps a batch of raw observations ``obs [N, *obs_shape]`` (the observation
filter is inside) to the greedy action ``[N]`` (Discrete: the argmax, shifted by the
space's start) or ``[N, d]`` (Box: the Gaussian's mean clipped to the space, or with
action_scaling clipped to [-1, 1] and mapped onto it): what ``load_policy(RUN).act(obs)``
returns. A game run's policy also takes the legal moves,
``action_mask [N, n]`` (1 = legal), as a second input.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import gymnasium as gym
import numpy as np
import torch
import tyro
from torch import nn

from distrl.core.checkpoint import find_checkpoint
from distrl.core.sampling import scales_actions
from distrl.models.distributions import mask_logits
from distrl.models.q_network import QNetwork
from distrl.policy import Policy, TableNet, load_policy

SUFFIX = {"torchscript": ".pt", "onnx": ".onnx"}
ONNX_EXTRA = "pip install 'distrl[export]'"


@dataclass(frozen=True)
class Export:
    """Write a saved policy as one file that runs without distrl."""

    run: tyro.conf.Positional[str]
    """A run's logdir or its checkpoint/ directory."""
    format: Literal["torchscript", "onnx"] = "torchscript"
    """torchscript (torch.jit.load) or onnx (onnxruntime; needs distrl[export])."""
    out: str | None = None
    """The file to write (default: policy.pt or policy.onnx in the run's logdir)."""
    policy: str | None = None
    """Game runs (league, AlphaZero): the policy to export (default main_0)."""


class GreedyActions(nn.Module):
    """A feed-forward policy's greedy env actions from raw observations."""

    def __init__(self, policy: Policy):
        super().__init__()
        self.net, space = policy.model, policy.action_space
        self.q = isinstance(self.net, QNetwork)
        self.box = isinstance(space, gym.spaces.Box)
        if self.box:
            # The mean clipped to the bounds, or with action_scaling to [-1, 1] and then
            # mapped onto them (sampling.env_action_fn).
            low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
            scaled = scales_actions(self.net)
            ones = torch.ones_like(low)
            self.register_buffer("low", -ones if scaled else low)
            self.register_buffer("high", ones if scaled else high)
            self.register_buffer("act_mid", (high + low) / 2 if scaled else 0 * ones)
            self.register_buffer("act_scale", (high - low) / 2 if scaled else ones)
        self.start = 0 if self.box else int(space.start)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.action(self.scores(obs))

    def scores(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values, logits, or the Gaussian's [mean, log_std]."""
        return self.net(obs) if self.q else self.net(obs)[0]

    def action(self, scores: torch.Tensor) -> torch.Tensor:
        if self.box:
            mean = self.net.dist.greedy(scores)
            clipped = torch.minimum(torch.maximum(mean, self.low), self.high)
            return self.act_mid + self.act_scale * clipped
        return scores.argmax(-1) + self.start


class MaskedGreedyActions(GreedyActions):
    """The greedy legal action: ``action_mask [N, n]`` (nonzero = legal) is an input."""

    def forward(self, obs: torch.Tensor, action_mask: torch.Tensor) -> torch.Tensor:
        return self.action(mask_logits(self.scores(obs), action_mask != 0))


def export_policy(run: str | Path, format: str = "torchscript", out: str | Path | None = None,
                  policy: str | None = None) -> Path:
    """Write the run's policy as a TorchScript or ONNX file (module doc); returns its path."""
    if format not in SUFFIX:
        raise ValueError(f"unknown export format {format!r}; use one of {sorted(SUFFIX)}.")
    loaded = load_policy(run, policy)
    if loaded.recurrent:
        raise ValueError("a recurrent (LSTM) policy is not exported: its action depends on "
                         "a memory carried between steps; act with distrl.load_policy.")
    if isinstance(loaded.model, TableNet):
        raise ValueError(f"policy {loaded.policy_id!r} is a table over the game's information "
                         "states, not a network: export a network policy (main_0), or act "
                         "with distrl.load_policy.")
    game = loaded.policy_id is not None
    module = (MaskedGreedyActions if game else GreedyActions)(loaded).eval()
    example = _example_inputs(loaded, game)
    path = Path(out) if out is not None else (
        find_checkpoint(run).parent / f"policy{'-' + policy if policy else ''}{SUFFIX[format]}")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        (_torchscript if format == "torchscript" else _onnx)(module, example, tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def _example_inputs(policy: Policy, game: bool) -> tuple[torch.Tensor, ...]:
    """Two observations from the space (two: no size-1 batch gets specialized)."""
    space = policy.observation_space
    space.seed(0)
    obs = torch.as_tensor(np.stack([space.sample() for _ in range(2)]))
    if not game:
        return (obs,)
    return obs, torch.ones(2, int(policy.action_space.n), dtype=torch.bool)


def _torchscript(module: nn.Module, example: tuple[torch.Tensor, ...], path: Path) -> None:
    with torch.no_grad(), warnings.catch_warnings():
        # TorchScript files still load in every torch; its deprecation is not the user's.
        warnings.simplefilter("ignore", DeprecationWarning)
        traced = torch.jit.trace(module, example)
    torch.jit.save(traced, str(path))


def _onnx(module: nn.Module, example: tuple[torch.Tensor, ...], path: Path) -> None:
    for name in ("onnx", "onnxscript"):
        try:
            __import__(name)
        except ImportError:
            raise ValueError(f"--format onnx needs {name}: {ONNX_EXTRA}") from None
    names = ["obs", "action_mask"][:len(example)]
    batch = torch.export.Dim("batch")
    # The exporter's notes (torchvision ops it skips, deprecations inside torch) are not
    # the user's to act on.
    with torch.no_grad(), warnings.catch_warnings(), _quiet("torch.onnx"):
        warnings.simplefilter("ignore")
        torch.onnx.export(module, example, str(path), input_names=names,
                          output_names=["action"], dynamo=True, verbose=False,
                          dynamic_shapes=tuple({0: batch} for _ in example),
                          external_data=False)


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def main(argv: list[str] | None = None) -> None:
    """`distrl export`: ``argv`` are the arguments after the command's name."""
    args = tyro.cli(Export, args=sys.argv[1:] if argv is None else argv, prog="distrl export")
    try:
        path = export_policy(args.run, args.format, args.out, args.policy)
    except (ValueError, FileNotFoundError) as err:
        raise SystemExit(f"distrl: error: {err}") from None
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
