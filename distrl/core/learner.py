"""Learner: a model, its optimizer and one gradient step, the part every algorithm's
update shares. Losses stay with their algorithm (ppo/loss.py's loop of epochs and
minibatches calls ``step`` once per minibatch); DD-PPO adds its all-reduce through
``grad_hook``; the Ape-X learner and the league's policy learners use it as it is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

GradHook = Callable[[list[nn.Parameter], int], None]
"""Runs after backward, before clipping: (parameters, samples in the minibatch)."""
LearnerState = dict[str, Any]  # {"model": state_dict, "optimizer": state_dict | None}


class NonFiniteError(RuntimeError):
    """A loss or gradient norm was nan or inf; the step was not taken. The run's loop
    adds the algorithm and iteration to the message."""


class Learner:
    """Adam (fused: one kernel for all parameters; on small nets the per-tensor loop
    dominates) with optional global-norm clipping."""

    def __init__(self, model: nn.Module, lr: float, grad_clip: float | None = None,
                 grad_hook: GradHook | None = None, eps: float = 1e-5):
        self.model = model
        self.params = list(model.parameters())
        self.opt = torch.optim.Adam(self.params, lr=lr, eps=eps, fused=True)
        self.grad_clip = grad_clip
        self.grad_hook = grad_hook

    def set_lr(self, lr: float) -> None:
        for group in self.opt.param_groups:
            group["lr"] = lr

    def step(self, loss: torch.Tensor, n: int) -> dict[str, torch.Tensor]:
        """One gradient step on ``loss`` of a minibatch of ``n`` samples; returns the
        gradient norm before clipping. NonFiniteError, with the weights and optimizer
        untouched, when the loss or the gradient norm is nan or inf: one step on them
        would make every weight nan, and the run would go on reporting nothing useful."""
        # A hook may keep the grads in its own buffer (views): then zero them in place.
        self.opt.zero_grad(set_to_none=self.grad_hook is None)
        loss.backward()
        if self.grad_hook is not None:
            self.grad_hook(self.params, n)
        clip = self.grad_clip if self.grad_clip is not None else math.inf
        norm = nn.utils.clip_grad_norm_(self.params, clip, foreach=True)
        if not bool(torch.isfinite(loss.detach()) & torch.isfinite(norm)):  # one sync
            raise NonFiniteError(f"the loss is {float(loss.detach()):g} and the gradient norm "
                                 f"{float(norm):g} (of {n} samples); no step was taken. "
                                 "Lower lr, check the env's rewards and observations, or "
                                 "set grad_clip.")
        self.opt.step()
        return {"grad_norm": norm}

    def weights(self) -> dict[str, np.ndarray]:
        """The model's tensors as numpy arrays, what env runners load."""
        return {k: v.detach().cpu().numpy() for k, v in self.model.state_dict().items()}

    def get_state(self) -> LearnerState:
        """Model and optimizer state as CPU copies (loadable with weights_only=True)."""
        return {"model": {k: _cpu(v) for k, v in self.model.state_dict().items()},
                "optimizer": _map_tensors(self.opt.state_dict(), _cpu)}

    def set_state(self, state: LearnerState) -> None:
        """The saved weights and Adam moments; the hyperparameters stay this learner's,
        so that a resume with a new lr or eps trains with it."""
        self.model.load_state_dict(state["model"])
        if state.get("optimizer") is not None:
            mine = [{k: v for k, v in g.items() if k != "params"} for g in self.opt.param_groups]
            self.opt.load_state_dict(state["optimizer"])
            for group, hyper in zip(self.opt.param_groups, mine, strict=True):
                group.update(hyper)


def _cpu(x: Any) -> Any:
    return x.detach().to("cpu", copy=True) if torch.is_tensor(x) else x


def _map_tensors(tree: Any, fn: Callable[[Any], Any]) -> Any:
    if isinstance(tree, dict):
        return {k: _map_tensors(v, fn) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return type(tree)(_map_tensors(v, fn) for v in tree)
    return fn(tree)
