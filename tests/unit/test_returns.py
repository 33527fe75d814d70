import numpy as np
import pytest

from distrl.core.returns import gae


def naive_gae(rewards, values, terminated, truncated, gamma, lam):
    """Forward sums over each episode segment: A_t = sum_l (gamma lam)^l delta_{t+l}."""
    T, N = rewards.shape
    adv = np.zeros((T, N))
    for i in range(N):
        for t in range(T):
            total, discount = 0.0, 1.0
            for k in range(t, T):
                g = gamma[k, i] if np.ndim(gamma) else gamma  # a discount per step
                boot = 0.0 if terminated[k, i] else values[k + 1, i]
                delta = rewards[k, i] + g * boot - values[k, i]
                total += discount * delta
                if terminated[k, i] or truncated[k, i]:
                    break
                discount *= g * lam
            adv[t, i] = total
    return adv


def test_gae_hand_computed_single_env():
    # gamma 0.5, lambda 1: A_t = discounted return (bootstrapped) - V_t.
    r = np.array([[1.0], [1.0], [1.0]], dtype=np.float32)
    v = np.array([[0.5], [0.25], [1.0], [2.0]], dtype=np.float32)
    no = np.zeros((3, 1), dtype=bool)
    adv, targets = gae(r, v, no, no, gamma=0.5, lambda_=1.0)
    # Return from t=2: 1 + 0.5*2 = 2; t=1: 1 + 0.5*2 = 2; t=0: 1 + 0.5*2 = 2.
    np.testing.assert_allclose(targets[:, 0], [2.0, 2.0, 2.0], rtol=1e-6)
    np.testing.assert_allclose(adv[:, 0], [1.5, 1.75, 1.0], rtol=1e-6)


def test_termination_does_not_bootstrap_but_truncation_does():
    r = np.ones((1, 2), dtype=np.float32)
    v = np.array([[0.0, 0.0], [10.0, 10.0]], dtype=np.float32)  # V(final obs) = 10
    term = np.array([[True, False]])
    trunc = np.array([[False, True]])
    adv, _ = gae(r, v, term, trunc, gamma=0.9, lambda_=0.95)
    np.testing.assert_allclose(adv[0], [1.0, 1.0 + 0.9 * 10.0], rtol=1e-6)


@pytest.mark.parametrize("gamma,lam", [(0.99, 0.95), (0.9, 1.0), (0.5, 0.0), ("steps", 0.8)])
def test_gae_matches_naive_loop_with_episode_ends(gamma, lam):
    rng = np.random.default_rng(0)
    T, N = 40, 5
    if gamma == "steps":  # a discount per step (league state critics: 1 between nodes)
        gamma = np.where(np.arange(T)[:, None] % 2 == 1, 0.9, 1.0) * np.ones((T, N))
    r = rng.normal(size=(T, N)).astype(np.float32)
    v = rng.normal(size=(T + 1, N)).astype(np.float32)
    term = rng.random((T, N)) < 0.08
    trunc = (rng.random((T, N)) < 0.08) & ~term
    adv, targets = gae(r, v, term, trunc, gamma, lam)
    expected = naive_gae(r, v, term, trunc, gamma, lam)
    np.testing.assert_allclose(adv, expected, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(targets, expected + v[:-1], rtol=1e-4, atol=1e-4)
