"""ModelConfig.action_scaling: the policy acts in [-1, 1], mapped onto the Box's bounds,
and is refused where there are no bounds to map onto."""

import gymnasium as gym
import numpy as np
import pytest

from distrl.core.sampling import env_action_fn
from distrl.models.config import ModelConfig
from distrl.models.recurrent import actor_critic

SPACE = gym.spaces.Box(np.array([-0.4, 0.0], np.float32), np.array([0.4, 2.0], np.float32))


def test_scaled_actions_are_clipped_to_one_and_mapped_onto_the_bounds():
    to_env = env_action_fn(SPACE, scaled=True)
    actions = np.array([[-1.0, 0.0], [2.0, 1.0], [0.5, -0.5], [-3.0, 0.25]], np.float32)
    want = np.array([[-0.4, 1.0], [0.4, 2.0], [0.2, 0.5], [-0.4, 1.25]], np.float32)
    np.testing.assert_allclose(to_env(actions), want, rtol=0, atol=1e-6)
    # Unscaled: the same numbers are env units, clipped to the bounds.
    np.testing.assert_allclose(env_action_fn(SPACE)(actions),
                               [[-0.4, 0.0], [0.4, 1.0], [0.4, 0.0], [-0.4, 0.25]], atol=1e-6)


@pytest.mark.parametrize("space", [gym.spaces.Discrete(3),
                                   gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)])
def test_action_scaling_is_refused_without_bounds_to_map_onto(space):
    obs = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    with pytest.raises(ValueError, match="action_scaling maps"):
        actor_critic(obs, space, ModelConfig(action_scaling=True))
