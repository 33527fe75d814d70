"""The shared Learner's step: a non-finite loss or gradient is refused, not applied."""

import pytest
import torch
from torch import nn

from distrl.core.learner import Learner, NonFiniteError


def test_a_nan_or_inf_step_raises_and_leaves_weights_and_optimizer_untouched():
    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    learner = Learner(model, lr=0.1, grad_clip=None)
    x = torch.randn(8, 3)
    learner.step(model(x).pow(2).mean(), 8)  # one good step: the optimizer has state
    before = {k: v.clone() for k, v in model.state_dict().items()}
    steps = learner.opt.state[model.weight]["step"].clone()
    for bad in (float("nan"), float("inf")):
        with pytest.raises(NonFiniteError, match=f"the loss is {bad}"):
            learner.step(model(x).pow(2).mean() * bad, 8)
        for k, v in model.state_dict().items():
            torch.testing.assert_close(v, before[k], rtol=0, atol=0)
        assert learner.opt.state[model.weight]["step"] == steps
    out = learner.step(model(x).pow(2).mean(), 8)  # and training goes on
    assert torch.isfinite(out["grad_norm"])
