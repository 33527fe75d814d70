"""PPO with observation normalization and reward scaling learns Hopper-v5."""

import pytest

from distrl.core.config import RunConfig
from distrl.ppo.train import train_ppo
from distrl.tuned import tuned

pytestmark = pytest.mark.slow


def test_ppo_hopper_reaches_1000_in_process(tmp_path):
    pytest.importorskip("mujoco")
    t = tuned("hopper")
    # Calibrated on seeds 0-4: seeds 1-4 reached 1,000 within 124k-192k env steps (71-109
    # s); seed 0 had 911 after 300k. Seed 2 is the median of those that reached it.
    result = train_ppo(t.for_runners(0), RunConfig(
        env=t.env, seed=2, stop_return=t.stop_return, max_env_steps=t.env_step_budget,
        logdir=str(tmp_path), progress=False))
    assert result["stopped_by"] == "stop_return", (
        f"mean-100 return {result['env/episode_return_mean']:.1f} < {t.stop_return} after "
        f"{result['env/steps_total']} env steps")
    assert t.config.model.observation_filter == "MeanStdFilter" and t.config.normalize_rewards
