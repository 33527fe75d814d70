"""Learning tests: a tuned example reaches its return within its env-step budget.

In-process (no Ray), seed 0: these check that PPO learns, not how fast (bench/ does that).
"""

import pytest

from distrl import RunConfig, train_ppo
from distrl.tuned import tuned

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("name", ["cartpole", "pendulum"])
def test_tuned_example_reaches_its_return_within_budget(name, tmp_path):
    t = tuned(name)
    result = train_ppo(t.for_runners(0), RunConfig(
        env=t.env, seed=0, stop_return=t.stop_return, max_env_steps=t.env_step_budget,
        logdir=str(tmp_path), progress=False,
    ))
    assert result["stopped_by"] == "stop_return", (
        f"{name}: mean-100 return {result['env/episode_return_mean']:.1f} < {t.stop_return} "
        f"after {result['env/steps_total']} env steps"
    )
    assert result["env/steps_total"] <= t.env_step_budget
