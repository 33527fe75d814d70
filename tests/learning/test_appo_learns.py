"""APPO learns CartPole from the command line: in process (a sampler thread beside the
learner) with the tuned entry, and on Ray runners with the defaults."""

import json
import subprocess
import sys

import pytest

from distrl.tuned import tuned

# Actors and learner run asynchronously: how many env steps it takes depends on timing.
pytestmark = [pytest.mark.learning, pytest.mark.alone]


def train(tmp_path, *flags: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "distrl", "train", "appo", "--env", "CartPole-v1",
         "--stop-return", "475", "--json", "--no-progress", "--logdir", str(tmp_path / "run"),
         *flags], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_tuned_appo_reaches_475_in_process(tmp_path):
    t = tuned("cartpole", "appo")
    result = train(tmp_path, "--tuned", "cartpole", "--num-env-runners", "0",
                   "--max-env-steps", str(t.env_step_budget))
    assert result["stopped_by"] == "stop_return", result["env/episode_return_mean"]
    assert result["learner/policy_lag"] >= 1  # the sampler ran ahead of the learner


def test_default_appo_learns_cartpole_on_two_ray_runners(tmp_path):
    # Defaults, untuned: seed 0 reached 475 at 194k env steps with 2 runners.
    result = train(tmp_path, "--max-env-steps", "400000")
    assert result["stopped_by"] == "stop_return", result["env/episode_return_mean"]
