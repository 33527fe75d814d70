"""gSDE (ModelConfig.sde_sample_freq): held noise, its Gaussian, the features it maps."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.core.sampling import StepContext
from distrl.models.config import ModelConfig
from distrl.models.distributions import DiagGaussian, SDENoise, sde_log_std
from distrl.models.recurrent import LSTMActor, actor_critic

OBS = gym.spaces.Box(-1.0, 1.0, (3,))
ACT = gym.spaces.Box(-2.0, 2.0, (2,))


def test_sde_log_std_is_half_log_of_the_features_squared_times_the_variances():
    latent = torch.tensor([[1.0, -2.0], [0.0, 0.5]])
    log_std = torch.tensor([[0.0, float(np.log(2.0))], [float(np.log(3.0)), -1.0]])
    # action 0 of row 0: 1 * 1 + 4 * 9 = 37; action 1: 1 * 4 + 4 * e^-2
    e2 = float(np.exp(-2.0))
    want = 0.5 * torch.log(torch.tensor([[37.0, 4.0 + 4.0 * e2], [0.25 * 9.0, 0.25 * e2]])
                           + 1e-6)
    torch.testing.assert_close(sde_log_std(latent, log_std), want)


def test_held_noise_draws_follow_the_gaussian_the_log_std_describes():
    latent = torch.tensor([[1.0, -2.0, 0.5]]).repeat(40_000, 1)
    log_std = torch.tensor([[0.0, -1.0], [0.5, 0.0], [-0.5, 1.0]])
    mean = torch.tensor([0.3, -0.7])
    inputs = torch.cat([mean.expand(len(latent), 2), sde_log_std(latent, log_std)], -1)
    actions = SDENoise(1).sample(inputs, latent, log_std, torch.Generator().manual_seed(0))
    std = sde_log_std(latent[:1], log_std).exp()[0]
    torch.testing.assert_close(actions.mean(0), mean, atol=0.05, rtol=0)
    torch.testing.assert_close(actions.std(0), std, rtol=0.02, atol=0)


def test_the_noise_map_is_held_for_freq_calls_then_redrawn():
    noise, gen = SDENoise(3), torch.Generator().manual_seed(1)
    latent, log_std = torch.randn(4, 5), torch.zeros(5, 2)
    inputs = torch.zeros(4, 4)
    draws = [noise.sample(inputs, latent, log_std, gen) for _ in range(7)]
    for i in (1, 2):
        torch.testing.assert_close(draws[i], draws[0])  # same features, same map
    assert not torch.allclose(draws[3], draws[2])
    torch.testing.assert_close(draws[4], draws[3])
    assert not torch.allclose(draws[6], draws[5])
    # Each env has its own map: equal features still get different noise.
    same = noise.sample(torch.zeros(2, 4), torch.ones(2, 5), log_std, gen)
    assert not torch.allclose(same[0], same[1])


def test_the_model_explores_with_its_features_and_log_std_matrix():
    model = actor_critic(OBS, ACT, ModelConfig(hiddens=(8, 6), sde_sample_freq=2,
                                               log_std_init=-1.0))
    assert model.log_std.shape == (6, 2)
    obs = torch.randn(5, 3)
    gen = torch.Generator().manual_seed(0)
    actions, extras = model.act(obs, gen)
    latent = model.sde_latent
    assert latent.shape == (5, 6) and not latent.requires_grad
    again, _ = model.act(obs, gen)  # within the held period: the same actions
    torch.testing.assert_close(again, actions)
    mean = DiagGaussian.greedy(extras["dist_inputs"])
    torch.testing.assert_close(extras["dist_inputs"][:, 2:], sde_log_std(latent, model.log_std))
    # The noise is exactly a linear map of the features: (a - mean) lies in latent's span.
    z = model.sde_noise.z * model.log_std.exp()
    torch.testing.assert_close(actions - mean, torch.einsum("nf,nfa->na", latent, z))


def test_the_exploration_log_std_does_not_train_the_features():
    model = actor_critic(OBS, ACT, ModelConfig(hiddens=(8,), sde_sample_freq=4))
    dist_inputs, _ = model(torch.randn(5, 3))
    dist_inputs[:, 2:].sum().backward()
    assert model.log_std.grad is not None and model.log_std.grad.abs().sum() > 0
    assert all(p.grad is None or not p.grad.any() for p in model.pi.parameters())


def test_a_recurrent_policy_maps_its_lstm_outputs():
    cfg = ModelConfig(hiddens=(16,), use_lstm=True, lstm_cell_size=8, sde_sample_freq=4)
    model = actor_critic(OBS, ACT, cfg)
    assert model.log_std.shape == (8, 2)
    ctx = StepContext(first=np.ones(5, bool), prev_actions=np.zeros((5, 2), np.float32),
                      prev_rewards=np.zeros(5, np.float32))
    actions, extras = LSTMActor(model, 5).act(torch.randn(5, 3), torch.Generator(), ctx)
    assert actions.shape == (5, 2) and model.sde_latent.shape == (1, 5, 8)
    torch.testing.assert_close(extras["dist_inputs"][:, 2:],
                               sde_log_std(model.sde_latent[0], model.log_std))


def test_sde_is_refused_for_discrete_actions_and_a_head_log_std():
    with pytest.raises(ValueError, match=r"sde_sample_freq.*Box actions"):
        actor_critic(OBS, gym.spaces.Discrete(3), ModelConfig(sde_sample_freq=4))
    with pytest.raises(ValueError, match="free_log_std"):
        ModelConfig(sde_sample_freq=4, free_log_std=False)
    with pytest.raises(ValueError, match=">= 0"):
        ModelConfig(sde_sample_freq=-1)
