import numpy as np
import pytest
import torch

from distrl.models.config import ModelConfig
from distrl.ppo.env_runner import EnvRunner
from tests.fakes import counting


def constant_value(runner: EnvRunner, c: float) -> None:
    last = runner.model.vf[-1]
    with torch.no_grad():
        last.weight.zero_()
        last.bias.fill_(c)


def test_exact_sample_count_and_reset_steps_skipped():
    runner = EnvRunner(counting(end=3), 2, ModelConfig(), 0.9, 1.0, seed=0)
    r = runner.sample(10)
    assert r.size == 20
    # Episodes last 3 steps: valid obs are 0, 1, 2; the terminal obs 3 is a reset step.
    assert set(r.obs[:, 0].tolist()) == {0.0, 1.0, 2.0}
    # 10 valid steps per env at 4 steps per episode cycle: 3 finished episodes per env.
    np.testing.assert_array_equal(r.episode_returns, [3.0] * 6)
    np.testing.assert_array_equal(r.episode_lengths, [3] * 6)
    assert r.env_steps > r.size  # reset steps cost env steps but yield no sample


def test_termination_versus_truncation_targets():
    c, gamma = 5.0, 0.9
    term = EnvRunner(counting(end=2), 1, ModelConfig(), gamma, 1.0, seed=0)
    trunc = EnvRunner(counting(end=100, limit=2), 1, ModelConfig(), gamma, 1.0, seed=0)
    for runner in (term, trunc):
        constant_value(runner, c)
    # One 2-step episode, then one more valid step: the fragment ends mid-episode.
    rt, rr = term.sample(3), trunc.sample(3)
    # Terminated: G1 = 1, G0 = 1 + 0.9; mid-episode bootstrap G2 = 1 + 0.9 c.
    np.testing.assert_allclose(rt.value_targets, [1 + gamma, 1.0, 1 + gamma * c], rtol=1e-5)
    # Truncated: the final obs is bootstrapped, G1 = 1 + 0.9 c.
    g1 = 1 + gamma * c
    np.testing.assert_allclose(rr.value_targets, [1 + gamma * g1, g1, 1 + gamma * c], rtol=1e-5)
    np.testing.assert_allclose(rr.advantages, rr.value_targets - c, rtol=1e-5)


def test_episode_stats_span_sample_calls():
    runner = EnvRunner(counting(end=5), 1, ModelConfig(), 0.9, 1.0, seed=0)
    first, second = runner.sample(3), runner.sample(3)
    assert first.episode_returns.size == 0
    np.testing.assert_array_equal(second.episode_returns, [5.0])


def test_nan_from_env_is_a_clear_error():
    runner = EnvRunner(counting(end=10, nan_at=2), 2, ModelConfig(), 0.9, 1.0, seed=0)
    with pytest.raises(ValueError, match="non-finite observation"):
        runner.sample(4)


def test_same_seed_same_samples_and_state_round_trip():
    a = EnvRunner("CartPole-v1", 4, ModelConfig(), 0.99, 0.95, seed=3)
    b = EnvRunner("CartPole-v1", 4, ModelConfig(), 0.99, 0.95, seed=3)
    b.model.load_state_dict(a.model.state_dict())
    np.testing.assert_array_equal(a.sample(20).obs, b.sample(20).obs)
    state = a.get_state()
    x = a.sample(20)
    b.set_state(state)
    np.testing.assert_array_equal(x.actions, b.sample(20).actions)


def test_weights_are_loaded_once_per_version():
    runner = EnvRunner("CartPole-v1", 2, ModelConfig(), 0.99, 0.95, seed=0)
    w = {k: torch.zeros_like(v).numpy() for k, v in runner.model.state_dict().items()}
    r = runner.sample(4, w, version=7)
    assert r.weights_version == 7
    np.testing.assert_allclose(r.dist_inputs, 0.0)  # zero weights: zero logits
    w2 = {k: v + 1.0 for k, v in w.items()}
    runner.sample(4, w2, version=7)  # same version: not reloaded
    np.testing.assert_allclose(runner.sample(4).dist_inputs, 0.0)


@pytest.mark.parametrize("use_lstm", [False, True])
def test_use_model_acts_with_the_given_model(use_lstm):
    """DD-PPO samples with the very module it trains: values and actions come from it."""
    cfg = ModelConfig(use_lstm=use_lstm, lstm_cell_size=8)
    runner = EnvRunner(counting(end=5), 2, cfg, 0.9, 1.0, seed=0)
    trained = EnvRunner(counting(end=5), 2, cfg, 0.9, 1.0, seed=1).model
    runner.use_model(trained)
    constant_value(runner, 7.0)  # edits `trained`, through runner.model
    r = runner.sample(4)
    np.testing.assert_allclose(r.values, 7.0, rtol=1e-6)


def test_a_runner_given_another_runners_state_goes_on_as_that_runner():
    """Seeded apart, so only the state carries the envs in progress, the action
    generator and the reward-scaling carry (each env's running discounted return)."""
    a = EnvRunner("CartPole-v1", 3, ModelConfig(), 0.99, 0.95, seed=3, normalize_rewards=True)
    b = EnvRunner("CartPole-v1", 3, ModelConfig(), 0.99, 0.95, seed=4, normalize_rewards=True)
    b.model.load_state_dict(a.model.state_dict())
    a.sample(7)
    b.sample(2)
    b.set_state(a.get_state())
    x, y = a.sample(20), b.sample(20)
    np.testing.assert_array_equal(x.obs, y.obs)
    np.testing.assert_array_equal(x.actions, y.actions)
    for stats in ("mean", "m2"):
        np.testing.assert_array_equal(getattr(x.stats["returns"], stats),
                                      getattr(y.stats["returns"], stats))
