"""compile_loss: a compiled minibatch loss trains as the eager one does (to float rounding),
and is used only where it applies (feed-forward, no extra loss terms)."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.core.learner import Learner
from distrl.core.types import PPOBatch
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.ppo import loss
from distrl.ppo.config import PPOHyperparams

OBS, ACT = gym.spaces.Box(-1.0, 1.0, (6,), np.float32), gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def batch(rows=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    def randn(*shape):
        return torch.randn(rows, *shape, generator=g)

    return PPOBatch(obs=randn(6), actions=randn(2), logp=randn() - 2.0,
                    dist_inputs=randn(4) * 0.1, values=randn(), advantages=randn(),
                    value_targets=randn())


def update(model, compile_loss, terms=(), minibatch="minibatch"):
    cfg = PPOHyperparams(minibatch_size=16, num_epochs=2, use_kl_loss=False, vf_loss_coeff=0.5,
                         advantage_normalization=minibatch, compile_loss=compile_loss,
                         model=ModelConfig(hiddens=(16, 16)))
    learner = Learner(model, 1e-2, cfg.grad_clip)
    return loss.ppo_update(learner, batch(), cfg, 0.0, 0.01,
                           torch.Generator().manual_seed(1), terms=terms)


@pytest.fixture
def compiled_calls(monkeypatch):
    calls = []
    real = loss._compiled_minibatch_loss()

    def counted(*args):
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(loss, "_compiled_minibatch_loss", lambda: counted)
    return calls


@pytest.mark.slow
def test_a_compiled_update_trains_as_the_eager_one(compiled_calls):
    torch.manual_seed(0)
    eager = ActorCritic(OBS, ACT, ModelConfig(hiddens=(16, 16)))
    compiled, start = copy.deepcopy(eager), copy.deepcopy(eager)
    a, b = update(eager, False), update(compiled, True)
    assert len(compiled_calls) == 2 * 4  # every minibatch of both epochs
    for (name, p), q, p0 in zip(eager.named_parameters(), compiled.parameters(),
                                start.parameters(), strict=True):
        assert not torch.equal(p, p0), name  # trained, so the comparison says something
        torch.testing.assert_close(q, p, rtol=1e-4, atol=1e-5)
    for k in ("policy_loss", "vf_loss", "entropy", "grad_norm"):
        assert a[k] == pytest.approx(b[k], rel=1e-4, abs=1e-6), k


def test_an_update_with_loss_terms_stays_eager(compiled_calls):
    def term(dist_inputs, values, mb):
        bonus = dist_inputs.pow(2).mean()
        return 0.1 * bonus, {"bonus": bonus.detach()}

    metrics = update(ActorCritic(OBS, ACT, ModelConfig(hiddens=(16, 16))), True, terms=(term,))
    assert "bonus" in metrics and compiled_calls == []
