"""A seat's samples (games.seats.Seat.advantages): GAE over the seat's own steps, the
reward before its first action counted for that action, a truncated seat bootstrapped
from its last value."""

import gymnasium as gym
import numpy as np
import pytest

from distrl.games.seats import Seat


def naive_gae(values, rewards, last, gamma, lam):
    """A_t = sum_l (gamma lam)^l delta_(t+l), delta_t = r_t + gamma V_(t+1) - V_t, with
    V_T = ``last``; returns (advantages, value targets)."""
    v = [*values, last]
    deltas = [r + gamma * v[t + 1] - v[t] for t, r in enumerate(rewards)]
    adv = np.array([sum((gamma * lam) ** (k - t) * deltas[k] for k in range(t, len(deltas)))
                    for t in range(len(deltas))])
    return adv, adv + np.asarray(values)


@pytest.mark.parametrize("terminated", [True, False], ids=["terminated", "truncated"])
def test_a_seats_advantages_are_gae_over_its_own_steps(terminated):
    seat = Seat("A", gym.spaces.Discrete(3))
    seat.values, seat.rewards = [0.5, -0.2, 0.3], [0.0, 0.5, 1.0]
    seat.early, seat.terminated = 0.25, terminated
    adv, targets = seat.advantages(0.9, 0.5)
    # The early reward joins the first step's; a truncated seat's next observation never
    # came, so its last step bootstraps from its own last value (0.3), a terminated one's
    # from nothing.
    want_adv, want_targets = naive_gae([0.5, -0.2, 0.3], [0.25, 0.5, 1.0],
                                       0.0 if terminated else 0.3, 0.9, 0.5)
    np.testing.assert_allclose(adv, want_adv, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(targets, want_targets, rtol=1e-5, atol=1e-6)
