"""bench/ppo_lstm.py's trial setup: the full-state control runs the memory task's own
tuned entry, threshold and budget on the env with its velocities; the others on the
memory task."""

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.append(str(BENCH))  # the benches import their neighbours by name

import ppo_lstm  # noqa: E402

from distrl.tuned import tuned  # noqa: E402


@pytest.mark.parametrize("task, full_env", [("stateless_cartpole", "CartPole-v1"),
                                            ("pendulum_novel", "Pendulum-v1")])
def test_full_state_control_changes_the_env_alone(task, full_env):
    entry = tuned(task)
    config, env, _, target, budget = ppo_lstm.task_setup(task, 0, None, True, True)
    assert env == full_env
    assert (config, target, budget) == (entry.for_runners(0), entry.stop_return,
                                        entry.env_step_budget)
    memory = ppo_lstm.task_setup(task, 0, None, True)
    assert memory[1] == entry.env and memory[1] != full_env
    assert memory[0] == config


def test_feedforward_control_drops_the_lstm_on_the_memory_task():
    config, env, *_ = ppo_lstm.task_setup("stateless_cartpole", 0, None, False)
    assert env == tuned("stateless_cartpole").env
    assert not config.model.use_lstm


def test_full_state_trial_is_skipped_where_there_is_no_twin():
    out = ppo_lstm.one("distrl_full_state", 0, 1, "repeat_after", 4, 0)
    assert out["skipped"] == "no full-state twin" and out["train_s"] is None
