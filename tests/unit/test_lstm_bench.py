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

FULL = [("stateless_cartpole", "CartPole-v1", "cartpole"),
        ("pendulum_novel", "Pendulum-v1", "pendulum")]


@pytest.mark.parametrize("task, full_env, _", FULL)
def test_full_state_control_changes_the_env_alone(task, full_env, _):
    entry = tuned(task)
    config, env, _, target, budget = ppo_lstm.task_setup(task, 0, None, True, "same")
    assert env == full_env
    assert (config, target, budget) == (entry.for_runners(0), entry.stop_return,
                                        entry.env_step_budget)
    memory = ppo_lstm.task_setup(task, 0, None, True)
    assert memory[1] == entry.env and memory[1] != full_env
    assert memory[0] == config


@pytest.mark.parametrize("task, full_env, own", FULL)
def test_full_state_tuned_runs_that_envs_own_entry_to_the_tasks_bar(task, full_env, own):
    config, env, _, target, budget = ppo_lstm.task_setup(task, 0, None, True, "tuned")
    assert (env, config) == (full_env, tuned(own).for_runners(0))
    assert not config.model.use_lstm  # feed-forward, as that entry is tuned
    assert (target, budget) == (tuned(task).stop_return, tuned(task).env_step_budget)


def test_feedforward_control_drops_the_lstm_on_the_memory_task():
    config, env, *_ = ppo_lstm.task_setup("stateless_cartpole", 0, None, False)
    assert env == tuned("stateless_cartpole").env
    lstm = tuned("stateless_cartpole").config.model
    # The same layers without the memory: SB3's layout has none before its LSTM.
    assert not config.model.use_lstm and not config.model.lstm_head_hiddens
    assert config.model.hiddens == lstm.hiddens + lstm.lstm_head_hiddens == (64,)


@pytest.mark.parametrize("system", ["distrl_full_state", "distrl_full_state_tuned"])
def test_full_state_trial_is_skipped_where_there_is_no_twin(system):
    out = ppo_lstm.one(system, 0, 1, "repeat_after", 4, 0)
    assert out["skipped"] == "no full-state twin" and out["train_s"] is None
