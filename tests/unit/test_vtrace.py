"""V-trace against the paper's sum (eq. 1), GAE on-policy, and a hand-computed case."""

import numpy as np
import pytest

from distrl.core.returns import gae, vtrace


def naive_vtrace(r, v, term, trunc, log_ratio, gamma, lam, clip_rho, clip_c, clip_pg):
    """v_s = V(x_s) + sum_t gamma^(t-s) (prod_{i<t} c_i) delta_t over the episode's rest
    in the fragment; the advantage from v_{s+1} (V of the final obs after a truncation,
    0 after a termination, V(x_T) at the fragment's end)."""
    T, N = r.shape
    ratio = np.exp(log_ratio)
    targets, adv = np.zeros((T, N)), np.zeros((T, N))
    for i in range(N):
        for s in range(T):
            total, weight = 0.0, 1.0
            for t in range(s, T):
                boot = 0.0 if term[t, i] else v[t + 1, i]
                delta = min(clip_rho, ratio[t, i]) * (r[t, i] + gamma * boot - v[t, i])
                total += weight * delta
                if term[t, i] or trunc[t, i]:
                    break
                weight *= gamma * lam * min(clip_c, ratio[t, i])
            targets[s, i] = v[s, i] + total
    for i in range(N):
        for s in range(T):
            if term[s, i]:
                nxt = 0.0
            elif trunc[s, i] or s == T - 1:
                nxt = v[s + 1, i]
            else:
                nxt = targets[s + 1, i]
            adv[s, i] = min(clip_pg, ratio[s, i]) * (r[s, i] + gamma * nxt - v[s, i])
    return targets, adv


def fragment(seed, T=30, N=4):
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(T, N)).astype(np.float32)
    v = rng.normal(size=(T + 1, N)).astype(np.float32)
    term = rng.random((T, N)) < 0.08
    trunc = (rng.random((T, N)) < 0.08) & ~term
    log_ratio = rng.normal(scale=0.7, size=(T, N)).astype(np.float32)
    return r, v, term, trunc, log_ratio


@pytest.mark.parametrize(("lam", "clip_rho", "clip_c", "clip_pg"),
                         [(1.0, 1.0, 1.0, 1.0), (0.95, 2.0, 0.5, 1.5), (0.0, 1.0, 1.0, 1.0)])
def test_vtrace_matches_the_papers_sum_with_episode_ends(lam, clip_rho, clip_c, clip_pg):
    r, v, term, trunc, log_ratio = fragment(0)
    targets, adv = vtrace(r, v, term, trunc, log_ratio, 0.97, lam, clip_rho, clip_c, clip_pg)
    want_t, want_a = naive_vtrace(r, v, term, trunc, log_ratio, 0.97, lam,
                                  clip_rho, clip_c, clip_pg)
    np.testing.assert_allclose(targets, want_t, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(adv, want_a, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("lam", [1.0, 0.9])
def test_on_policy_targets_are_gaes(lam):
    r, v, term, trunc, _ = fragment(1)
    targets, adv = vtrace(r, v, term, trunc, np.zeros_like(r), 0.99, lam)
    gae_adv, gae_targets = gae(r, v, term, trunc, 0.99, lam)
    np.testing.assert_allclose(targets, gae_targets, rtol=1e-4, atol=1e-4)
    if lam == 1.0:  # one step on a Monte Carlo target is the whole return
        np.testing.assert_allclose(adv, gae_adv, rtol=1e-4, atol=1e-4)


def test_hand_computed_with_clipping():
    # T=2, gamma 0.5, lambda 1; ratios 2 (clipped to rho 1, c 1) then 0.5.
    r = np.array([[1.0], [2.0]], dtype=np.float32)
    v = np.array([[0.0], [1.0], [4.0]], dtype=np.float32)
    no = np.zeros((2, 1), dtype=bool)
    log_ratio = np.log(np.array([[2.0], [0.5]], dtype=np.float32))
    targets, adv = vtrace(r, v, no, no, log_ratio, 0.5)
    # delta_1 = 0.5 (2 + 0.5*4 - 1) = 1.5; v_1 = 1 + 1.5 = 2.5
    # delta_0 = 1 (1 + 0.5*1 - 0) = 1.5; v_0 = 0 + 1.5 + 0.5*1*1.5 = 2.25
    np.testing.assert_allclose(targets[:, 0], [2.25, 2.5], rtol=1e-6)
    # adv_0 = 1 (1 + 0.5*2.5 - 0) = 2.25; adv_1 = 0.5 (2 + 0.5*4 - 1) = 1.5
    np.testing.assert_allclose(adv[:, 0], [2.25, 1.5], rtol=1e-6)
