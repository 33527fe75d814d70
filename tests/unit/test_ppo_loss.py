import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl.core.learner import Learner
from distrl.core.types import PPOBatch
from distrl.models.actor_critic import ActorCritic
from distrl.models.config import ModelConfig
from distrl.models.distributions import Categorical
from distrl.ppo.config import PPOHyperparams
from distrl.ppo.loss import explained_variance, ppo_loss, ppo_update, update_kl_coeff


def two_sample_batch(advantages):
    return PPOBatch(
        obs=torch.zeros(2, 4),
        actions=torch.tensor([0, 1]),
        logp=torch.log(torch.tensor([0.5, 0.5])),
        dist_inputs=torch.zeros(2, 2),  # old policy: uniform
        values=torch.zeros(2),
        advantages=torch.tensor(advantages),
        value_targets=torch.tensor([2.0, 0.0]),
    )


def test_ppo_loss_against_hand_computed_numbers():
    cfg = PPOHyperparams(clip_param=0.1, vf_clip_param=5.0, vf_loss_coeff=0.5)
    new_logits = torch.log(torch.tensor([[0.6, 0.4], [0.6, 0.4]]))
    values = torch.tensor([1.0, 3.0])
    loss, parts = ppo_loss(new_logits, values, two_sample_batch([1.0, -2.0]), cfg, Categorical,
                           kl_coeff=0.2, entropy_coeff=0.01)
    # ratios 1.2 (A=+1) and 0.8 (A=-2), clipped to [0.9, 1.1]:
    # min(1.2, 1.1) = 1.1 and min(-1.6, -1.8) = -1.8
    assert parts["policy_loss"].item() == pytest.approx(-(1.1 - 1.8) / 2, rel=1e-5)
    # squared errors 1 and 9, the second clipped to 5
    assert parts["vf_loss"].item() == pytest.approx(3.0, rel=1e-5)
    entropy = -(0.6 * math.log(0.6) + 0.4 * math.log(0.4))
    assert parts["entropy"].item() == pytest.approx(entropy, rel=1e-5)
    kl = 0.5 * math.log(0.5 / 0.6) + 0.5 * math.log(0.5 / 0.4)
    assert parts["kl"].item() == pytest.approx(kl, rel=1e-4)
    expected = 0.35 + 0.5 * 3.0 - 0.01 * entropy + 0.2 * kl
    assert loss.item() == pytest.approx(expected, rel=1e-5)
    assert parts["clip_fraction"].item() == 1.0  # |1.2 - 1| and |0.8 - 1| exceed 0.1
    no_value, parts = ppo_loss(new_logits, values, two_sample_batch([1.0, -2.0]), cfg,
                               Categorical, kl_coeff=0.2, entropy_coeff=0.01, value_loss=False)
    assert "vf_loss" not in parts
    assert no_value.item() == pytest.approx(expected - 0.5 * 3.0, rel=1e-5)


def test_explained_variance_against_hand_computed_numbers():
    targets = torch.tensor([1.0, 2.0, 3.0])
    assert explained_variance(targets, targets) == 1.0
    assert explained_variance(torch.zeros(3), targets) == pytest.approx(0.0)
    # residuals (0, 0, 1): sample variance 1/3, the targets' 1
    assert explained_variance(torch.tensor([1.0, 2.0, 2.0]), targets) == pytest.approx(2 / 3)
    assert math.isnan(explained_variance(torch.zeros(2), torch.ones(2)))


def test_ppo_loss_gradient_vanishes_only_where_the_clip_binds():
    # Old policy uniform, action 0 everywhere, clip 0.2: ratio = p_new / 0.5. For a
    # Categorical, d logp(a=0) / d logits = [1 - p, -(1 - p)], so an unclipped sample's
    # gradient of -mean(A * ratio) is -A * ratio * [1 - p, -(1 - p)] / B.
    p_new = torch.tensor([0.8, 0.2, 0.55, 0.8, 0.2])
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0])
    # ratio 1.6, A > 0: clipped at 1.2, no gradient
    # ratio 0.4, A < 0: clipped at 0.8, no gradient
    # ratio 1.1, inside the range: -1 * 1.1 * 0.45 / 5 = -0.099
    # ratio 1.6 but A < 0: the unclipped term is the min: +1 * 1.6 * 0.2 / 5 = 0.064
    # ratio 0.4 but A > 0: the unclipped term is the min: -1 * 0.4 * 0.8 / 5 = -0.064
    expected_first = torch.tensor([0.0, 0.0, -0.099, 0.064, -0.064])
    b = len(adv)
    logits = torch.stack([p_new.log(), (1 - p_new).log()], dim=-1).requires_grad_()
    batch = PPOBatch(torch.zeros(b, 4), torch.zeros(b, dtype=torch.long),
                     torch.full((b,), math.log(0.5)), torch.zeros(b, 2), torch.zeros(b), adv,
                     torch.zeros(b))
    cfg = PPOHyperparams(clip_param=0.2, use_kl_loss=False)
    loss, parts = ppo_loss(logits, torch.zeros(b), batch, cfg, Categorical, 0.0, 0.0)
    loss.backward()  # value error 0, no entropy or KL term: all gradient is the policy's
    torch.testing.assert_close(logits.grad, torch.stack([expected_first, -expected_first], -1))
    # surrogates min(A * r, A * clip(r)): 1.2, -0.8, 1.1, -1.6, 0.4; mean 0.06
    assert parts["policy_loss"].item() == pytest.approx(-0.06, rel=1e-5)
    assert parts["clip_fraction"].item() == pytest.approx(0.8)  # all but ratio 1.1


def test_kl_coefficient_adapts_like_rllib():
    assert update_kl_coeff(0.2, kl=0.05, kl_target=0.01) == pytest.approx(0.3)
    assert update_kl_coeff(0.2, kl=0.001, kl_target=0.01) == pytest.approx(0.1)
    assert update_kl_coeff(0.2, kl=0.01, kl_target=0.01) == 0.2
    assert update_kl_coeff(0.2, kl=0.02, kl_target=0.01) == 0.2  # exactly 2x: unchanged


def test_ppo_update_calls_hook_per_minibatch_and_reports_true_kl():
    torch.manual_seed(0)
    model = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), ModelConfig())
    n = 10
    with torch.no_grad():
        old, values = model(torch.randn(n, 4))
    batch = PPOBatch(torch.randn(n, 4), torch.randint(0, 2, (n,)), torch.zeros(n), old, values,
                     torch.randn(n), torch.randn(n))
    batch.logp = Categorical.log_prob(batch.dist_inputs, batch.actions)
    cfg = PPOHyperparams(minibatch_size=4, num_epochs=3, lr=1e-2)
    seen = []
    learner = Learner(model, 1e-2, grad_hook=lambda p, m: seen.append(m))
    metrics = ppo_update(learner, batch, cfg, 0.2, 0.0)
    with torch.no_grad():
        new, _ = model(batch.obs)
    assert metrics["kl"] == pytest.approx(Categorical.kl(batch.dist_inputs, new).mean().item())
    assert metrics["kl"] > 0
    assert seen == [4, 3, 3] * 3  # ceil(10 / 4) = 3 near-equal minibatches per epoch
    seen.clear()
    ppo_update(learner, batch, cfg, 0.2, 0.0, num_minibatches=5)
    assert seen == [2] * 15


def test_gaussian_log_prob_entropy_kl_match_torch_distributions():
    from torch.distributions import Normal, kl_divergence

    from distrl.models.distributions import DiagGaussian

    mean, log_std = torch.randn(5, 3), torch.randn(5, 3) * 0.3
    mean2, log_std2 = torch.randn(5, 3), torch.randn(5, 3) * 0.3
    a = torch.randn(5, 3)
    x, y = torch.cat([mean, log_std], -1), torch.cat([mean2, log_std2], -1)
    p, q = Normal(mean, log_std.exp()), Normal(mean2, log_std2.exp())
    torch.testing.assert_close(DiagGaussian.log_prob(x, a), p.log_prob(a).sum(-1))
    torch.testing.assert_close(DiagGaussian.entropy(x), p.entropy().sum(-1))
    torch.testing.assert_close(DiagGaussian.kl(x, y), kl_divergence(p, q).sum(-1))


def test_categorical_sampling_frequencies():
    g = torch.Generator().manual_seed(0)
    logits = torch.log(torch.tensor([[0.2, 0.3, 0.5]])).expand(20000, 3)
    counts = np.bincount(Categorical.sample(logits, g).numpy(), minlength=3) / 20000
    np.testing.assert_allclose(counts, [0.2, 0.3, 0.5], atol=0.015)


def test_masked_logits_renormalise_over_legal_actions_and_are_never_sampled():
    from distrl.models.distributions import mask_logits

    logits = torch.log(torch.tensor([[0.2, 0.3, 0.5]])).expand(5000, 3)
    mask = torch.tensor([True, False, True]).expand(5000, 3)
    masked = mask_logits(logits, mask)
    legal = torch.tensor([0.2 / 0.7, 0.0, 0.5 / 0.7])
    torch.testing.assert_close(torch.softmax(masked[0], -1), legal)
    entropy = -(legal[[0, 2]] * legal[[0, 2]].log()).sum()
    assert Categorical.entropy(masked[:1]).item() == pytest.approx(entropy.item(), rel=1e-5)
    assert Categorical.kl(masked[:1], masked[:1]).item() == 0.0  # finite, not nan
    drawn = Categorical.sample(masked, torch.Generator().manual_seed(0))
    assert (drawn != 1).all() and Categorical.greedy(masked).eq(2).all()
    assert mask_logits(logits, None) is logits


def test_ppo_update_learns_over_legal_actions_only():
    # Three actions, the last always illegal: the loss must see a 2-action distribution,
    # so the reported entropy stays below log 2 (log 3 without the mask) and every
    # quantity stays finite even though the old logits hold MASKED_LOGIT.
    from distrl.models.distributions import mask_logits

    torch.manual_seed(0)
    model = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(3), ModelConfig())
    n = 16
    mask = torch.tensor([True, True, False]).expand(n, 3).clone()
    obs = torch.randn(n, 4)
    with torch.no_grad():
        old, values = model(obs)
    old = mask_logits(old, mask)
    actions = torch.randint(0, 2, (n,))
    batch = PPOBatch(obs, actions, Categorical.log_prob(old, actions), old, values,
                     torch.randn(n), torch.randn(n), mask)
    cfg = PPOHyperparams(minibatch_size=8, num_epochs=2, lr=1e-2)
    metrics = ppo_update(Learner(model, 1e-2), batch, cfg, 0.2, 0.01)
    assert all(math.isfinite(v) for v in metrics.values())
    assert metrics["entropy"] <= math.log(2) + 1e-6 and metrics["kl"] >= 0


@pytest.mark.parametrize("mode", ["batch", "minibatch"])
def test_minibatch_advantage_normalization_is_affine_invariant(mode):
    # Per-minibatch standardization makes the update blind to a minibatch's advantage
    # scale and offset (SB3's behaviour); with "batch" the scale matters here, because
    # ppo_update takes the batch's advantages as given (from_rollout standardized them).
    def updated(adv):
        torch.manual_seed(0)
        model = ActorCritic(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), ModelConfig())
        g = torch.Generator().manual_seed(1)
        obs = torch.randn(8, 4, generator=g)
        with torch.no_grad():
            old, values = model(obs)
        actions = torch.randint(0, 2, (8,), generator=g)
        batch = PPOBatch(obs, actions, Categorical.log_prob(old, actions), old, values, adv,
                         torch.zeros(8))
        cfg = PPOHyperparams(minibatch_size=8, num_epochs=1, lr=1e-2, shuffle=False,
                             use_kl_loss=False, vf_loss_coeff=0.0,
                             advantage_normalization=mode)
        ppo_update(Learner(model, 1e-2, grad_clip=None), batch, cfg, 0.0, 0.0)
        return torch.cat([p.flatten() for p in model.parameters()])

    adv = torch.randn(8, generator=torch.Generator().manual_seed(2))
    same = torch.allclose(updated(adv), updated(10 * adv + 3), atol=1e-6)
    assert same == (mode == "minibatch")


def test_magnet_term_is_kl_from_policy_to_magnet():
    from distrl.league.terms import LeagueRows, magnet_term

    cfg = PPOHyperparams(use_kl_loss=False)
    new_logits = torch.log(torch.tensor([[0.6, 0.4], [0.6, 0.4]]))
    batch = two_sample_batch([1.0, -2.0])
    base, _ = ppo_loss(new_logits, torch.zeros(2), batch, cfg, Categorical, 0.0, 0.0)
    batch.extra = LeagueRows(magnet=torch.log(torch.tensor([[0.9, 0.1], [0.5, 0.5]])))
    loss, parts = ppo_loss(new_logits, torch.zeros(2), batch, cfg, Categorical, 0.0, 0.0,
                           terms=[magnet_term(Categorical, 0.3)])
    # KL(policy || magnet), the reverse of the trust-region KL: sum_a p log(p / m)
    kl = [0.6 * math.log(0.6 / m0) + 0.4 * math.log(0.4 / (1 - m0)) for m0 in (0.9, 0.5)]
    assert parts["magnet_kl"].item() == pytest.approx(sum(kl) / 2, rel=1e-5)
    assert (loss - base).item() == pytest.approx(0.3 * sum(kl) / 2, rel=1e-5)


def test_trainer_moves_its_magnet_to_the_policy_every_update_steps():
    from distrl.league.config import LeagueConfig, Magnet
    from distrl.league.trainer import LeagueTrainer
    from tests.fakes import random_rollout

    def params(module):
        return torch.cat([p.detach().flatten() for p in module.parameters()])

    torch.manual_seed(0)
    spaces = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    cfg = LeagueConfig(minibatch_size=32, num_epochs=2, lr=1e-2, use_kl_loss=False)
    trainer = LeagueTrainer(*spaces, cfg, magnet=Magnet(coeff=0.5, update_steps=64))
    initial = params(trainer.model)
    metrics = trainer.update(random_rollout(32, 0))  # 32 steps: the magnet stays put
    assert metrics["magnet_kl"] > 0 and torch.equal(params(trainer.magnet), initial)
    after_first = params(trainer.model)
    trainer.update(random_rollout(32, 1))  # 64 steps: moved before this update
    assert torch.equal(params(trainer.magnet), after_first) and trainer.magnet_at == 64
    # A checkpoint restores the magnet and when it last moved.
    restored = LeagueTrainer(*spaces, cfg, magnet=Magnet(coeff=0.5, update_steps=64))
    restored.set_state(trainer.get_state())
    assert torch.equal(params(restored.magnet), after_first) and restored.magnet_at == 64
    assert LeagueTrainer(*spaces, cfg).magnet is None  # off by default
    with pytest.raises(ValueError, match="must be >= 0"):
        Magnet(coeff=-1.0)


def test_magnet_phases_lengthen_by_update_growth_and_resume():
    from distrl.league.config import LeagueConfig, Magnet
    from distrl.league.trainer import LeagueTrainer
    from tests.fakes import random_rollout

    torch.manual_seed(0)
    spaces = gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2)
    cfg = LeagueConfig(minibatch_size=32, num_epochs=1, lr=1e-2, use_kl_loss=False)
    magnet = Magnet(coeff=0.5, update_steps=64, update_growth=2.0)
    assert [magnet.phase_steps(k) for k in range(3)] == [64, 128, 256]
    trainer = LeagueTrainer(*spaces, cfg, magnet=magnet)
    moved = []
    for i in range(8):  # 32 steps per update: phases of 64 then 128 steps
        trainer.update(random_rollout(32, i))
        moved.append(trainer.magnet_at)
        if i == 3:  # a checkpoint mid-phase keeps the schedule
            restored = LeagueTrainer(*spaces, cfg, magnet=magnet)
            restored.set_state(trainer.get_state())
            assert (restored.magnet_at, restored.magnet_updates) == (64, 1)
    assert moved == [0, 64, 64, 64, 64, 192, 192, 192]
    with pytest.raises(ValueError, match="update_growth"):
        Magnet(update_growth=0.5)


def test_advantages_stay_in_reward_units_without_normalization():
    from tests.fakes import random_rollout

    rollout = random_rollout(64, 0)
    rollout.advantages = rollout.advantages * 5.0 + 3.0
    raw = PPOHyperparams(advantage_normalization="none").advantage_stats()
    batch = PPOBatch.from_rollout(rollout, "cpu", raw)
    np.testing.assert_allclose(batch.advantages.numpy(), rollout.advantages, rtol=1e-6)
    standard = PPOBatch.from_rollout(rollout, "cpu", PPOHyperparams().advantage_stats())
    assert abs(float(standard.advantages.mean())) < 1e-5
    assert float(standard.advantages.std()) == pytest.approx(1.0, rel=0.02)


def test_the_value_loss_is_unclipped_by_default():
    """docs/ppo.md: vf_clip_param is off by default (RLlib's 10 on the squared error
    would silence the value gradient wherever the error exceeds 3.2)."""
    values = torch.tensor([12.0, -10.0], requires_grad=True)  # targets 2 and 0
    loss, parts = ppo_loss(torch.zeros(2, 2), values, two_sample_batch([1.0, -2.0]),
                           PPOHyperparams(), Categorical, 0.0, 0.0)
    assert parts["vf_loss"].item() == pytest.approx((10.0**2 + 10.0**2) / 2)
    loss.backward()
    assert values.grad.tolist() == pytest.approx([0.5 * 10.0, 0.5 * -10.0])

