"""--vector-mode in runs: threads resume as sync trains; a sub-env's error."""

import traceback

import pytest
import torch

from distrl import RunConfig, train_ppo
from distrl.core.checkpoint import Checkpoint
from distrl.envs.errors import EnvError
from tests.fakes import BUG_LINE, USER_FILE, with_user_envs
from tests.unit.test_vector_mode import CFG


@pytest.fixture(autouse=True)
def user_envs(monkeypatch):
    with_user_envs(monkeypatch)


def test_a_threaded_run_and_its_resume_train_as_a_sync_run_does(tmp_path):
    def weights(name, mode, steps, resume=False):
        run = RunConfig(env="CartPole-v1", vector_mode=mode, max_env_steps=steps, seed=3,
                        logdir=str(tmp_path / name), progress=False,
                        resume=str(tmp_path / name) if resume else None)
        return Checkpoint(train_ppo(CFG, run)["checkpoint"]).policy_weights()

    sync = weights("sync", "sync", 320)
    weights("threads", "threads", 128)  # saved mid-episode, its envs in the checkpoint
    resumed = weights("threads", "threads", 320, resume=True)
    assert sync.keys() == resumed.keys()
    for k in sync:
        torch.testing.assert_close(resumed[k], sync[k], rtol=0, atol=0)


@pytest.mark.parametrize("mode", ["async", "threads"])
def test_an_error_in_an_async_or_threaded_sub_env_is_one_line_pointing_at_the_users_line(
        tmp_path, capfd, mode):
    run = RunConfig(env="distrl_user_envs:Broken", max_episode_steps=10, max_env_steps=64,
                    vector_mode=mode, logdir=str(tmp_path), progress=False)
    with pytest.raises(EnvError) as raised:
        train_ppo(CFG, run)
    message = str(raised.value)
    assert message.startswith("env 'distrl_user_envs:Broken' raised ZeroDivisionError: "
                              f"division by zero at {USER_FILE}:{BUG_LINE} (in divide); ")
    assert "\n" not in message
    assert "Traceback" not in capfd.readouterr().err  # gymnasium's log of it is not shown
    cause = raised.value.__cause__  # the traceback, for --debug: as text from a subprocess
    shown = str(cause) if mode == "async" else traceback.format_tb(cause.__traceback__)[-1]
    assert "in divide" in shown
