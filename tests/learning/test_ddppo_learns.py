"""DD-PPO learns CartPole with 2 Ray workers within the tuned example's env-step budget."""

import pytest

from distrl.core.config import RunConfig
from distrl.ddppo.train import train_ddppo
from distrl.tuned import tuned

# Stragglers are preempted by the clock: how many env steps it takes depends on timing.
pytestmark = [pytest.mark.slow, pytest.mark.alone]


def test_ddppo_cartpole_reaches_475_with_two_workers(ray_local, tmp_path):
    t = tuned("cartpole", "ddppo")
    # Seeds 0-4 reached it within 72k-135k env steps on the reference machine.
    result = train_ddppo(t.config, RunConfig(
        env=t.env, seed=0, stop_return=t.stop_return, max_env_steps=t.env_step_budget,
        logdir=str(tmp_path), progress=False,
    ))
    assert t.config.num_workers == 2 and result["ddppo/world_size"] == 2
    assert result["stopped_by"] == "stop_return", (
        f"mean-100 return {result['env/episode_return_mean']:.1f} < {t.stop_return} "
        f"after {result['env/steps_total']} env steps"
    )
    assert result["env/steps_total"] <= t.env_step_budget
