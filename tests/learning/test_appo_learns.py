"""APPO learns CartPole from the command line: in process (a sampler thread beside the
learner) with the tuned entry, and on Ray runners with the defaults."""

import pytest

from distrl.tuned import tuned
from tests.cli import distrl_json

# Actors and learner run asynchronously: how many env steps it takes depends on timing.
pytestmark = [pytest.mark.slow, pytest.mark.alone]


def train(tmp_path, *flags: str) -> dict:
    return distrl_json("train", "appo", "--env", "CartPole-v1", "--stop-return", "475", "--json",
                       "--no-progress", "--logdir", str(tmp_path / "run"), *flags)


def test_tuned_appo_reaches_475_in_process(tmp_path):
    t = tuned("cartpole", "appo")
    result = train(tmp_path, "--tuned", "cartpole", "--num-env-runners", "0",
                   "--max-env-steps", str(t.env_step_budget))
    assert result["stopped_by"] == "stop_return", result["env/episode_return_mean"]
    assert result["learner/policy_lag"] >= 1  # the sampler ran ahead of the learner


def test_default_appo_learns_cartpole_on_two_ray_runners(tmp_path):
    # Defaults, untuned (one importance weight, clipped around the learner), seed 0, 2
    # runners, alone: 7 runs reached 475 at 188k-511k env steps (median 302k; the
    # runners' timing varies the updates' lag). 400k failed 2 of 7: the budget is 800k.
    result = train(tmp_path, "--max-env-steps", "800000")
    assert result["stopped_by"] == "stop_return", result["env/episode_return_mean"]
