"""A user's env failing, and episodes that would never end, in process: one line that
points at the user's file:line (the whole traceback with --debug or DISTRL_DEBUG=1),
an --env-config key named with the keys the env takes, eval on an env of other spaces
named with both, and --max-episode-steps truncating class envs in training and eval."""

import traceback

import gymnasium as gym
import numpy as np
import pytest
import torch

from distrl import PPOConfig, RunConfig, train_ppo
from distrl.apex.roles import ApexActor
from distrl.cli import main
from distrl.core.env_errors import EnvError
from distrl.core.evaluation import run_episodes
from distrl.models.config import ModelConfig
from distrl.ppo.env_runner import EnvRunner
from tests.fakes import BUG_LINE, USER_FILE, with_user_envs

SMALL = ["--train-batch-size", "64", "--minibatch-size", "32", "--num-epochs", "1",
         "--num-env-runners", "0", "--num-envs-per-env-runner", "2", "--max-env-steps", "64"]
CFG = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                num_envs_per_env_runner=2)


@pytest.fixture(autouse=True)
def user_envs(monkeypatch):
    with_user_envs(monkeypatch)


def cli_error(*args) -> str:
    """The one line `distrl` exits with."""
    with pytest.raises(SystemExit) as raised:
        main(list(args))
    return str(raised.value.code)


@pytest.mark.parametrize("fail_in", ["init", "reset", "step"])
def test_an_error_in_the_users_env_is_one_line_with_its_file_and_line(tmp_path, capsys,
                                                                      fail_in):
    message = cli_error("train", "ppo", "--env", "distrl_user_envs:Broken", "--env-config",
                        f'{{"fail_in": "{fail_in}"}}', "--max-episode-steps", "10", *SMALL,
                        "--logdir", str(tmp_path))
    assert message.startswith("distrl: error: env 'distrl_user_envs:Broken' raised "
                              "ZeroDivisionError: division by zero at "
                              f"{USER_FILE}:{BUG_LINE} (in divide); ")
    assert "\n" not in message and "--debug" in message
    assert "Traceback" not in capsys.readouterr().err


def test_a_factory_from_python_points_at_the_users_line(tmp_path):
    from distrl_user_envs import Broken

    def factory():
        return Broken(fail_in="step")

    with pytest.raises(EnvError, match=rf"raised ZeroDivisionError: division by zero at "
                                       rf"{USER_FILE}:{BUG_LINE} \(in divide\)") as raised:
        train_ppo(CFG, RunConfig(env=factory, max_episode_steps=10, max_env_steps=64,
                                 logdir=str(tmp_path), progress=False))
    assert isinstance(raised.value.__cause__, ZeroDivisionError)  # Python shows it whole


@pytest.mark.parametrize("how", ["flag", "environment"])
def test_debug_shows_the_whole_traceback(tmp_path, monkeypatch, how):
    args = ["train", "ppo", "--env", "distrl_user_envs:Broken", "--max-episode-steps", "10",
            *SMALL, "--logdir", str(tmp_path)]
    if how == "flag":
        args.append("--debug")
    else:
        monkeypatch.setenv("DISTRL_DEBUG", "1")
    with pytest.raises(EnvError) as raised:
        main(args)
    text = "".join(traceback.format_exception(raised.value))
    assert f'distrl_user_envs.py", line {BUG_LINE}, in divide' in text
    assert "ZeroDivisionError: division by zero" in text


@pytest.mark.parametrize(("env", "takes"), [
    ("distrl_user_envs:Countdown-v0", "length, render_mode"),
    ("distrl_user_envs:Broken", "after, fail_in, length, render_mode"),
    ("distrl_user_envs:countdown", "length, render_mode"),
    ("CartPole-v1", "render_mode, sutton_barto_reward"),
])
def test_an_env_config_key_the_env_does_not_take_names_the_keys_it_takes(tmp_path, env,
                                                                         takes):
    message = cli_error("train", "ppo", "--env", env, "--env-config", '{"lenght": 7}',
                        *SMALL, "--logdir", str(tmp_path))
    assert message == (f"distrl: error: env {env!r} does not take the env_config key "
                       f"'lenght' (given: ['lenght']; it takes {takes}); remove it from "
                       "--env-config or fix its name.")


def test_eval_on_an_env_with_other_spaces_names_both(tmp_path):
    train_ppo(CFG, RunConfig(env="CartPole-v1", max_env_steps=64, logdir=str(tmp_path),
                             progress=False))
    message = cli_error("eval", str(tmp_path), "--env", "distrl_user_envs:Countdown-v0",
                        "--episodes", "1")
    assert "\n" not in message
    assert message.startswith("distrl: error: the run's policy was trained on observation "
                              "space Box(")
    assert "(4,), float32) and action space Discrete(2); env 'distrl_user_envs:Countdown-v0'" \
           " has observation space Box(0.0, 1.0, (1,), float32)" in message


def test_a_class_env_is_truncated_at_max_episode_steps_in_training_and_eval(tmp_path):
    run = RunConfig(env="distrl_user_envs:Endless", max_episode_steps=7, max_env_steps=128,
                    evaluation_interval=1, evaluation_duration=2, logdir=str(tmp_path),
                    progress=False)
    result = train_ppo(CFG, run)
    assert result["env/episode_len_mean"] == 7 and result["env/episode_return_mean"] == 7
    assert result["eval/episode_len_mean"] == 7
    assert run_episodes(tmp_path, 3).lengths == [7, 7, 7]  # the run's limit
    assert run_episodes(tmp_path, 2, max_episode_steps=4).lengths == [4, 4]


@pytest.mark.parametrize("role", ["ppo", "apex"])
def test_every_algorithms_sampler_truncates_episodes(role):
    """PPO, DD-PPO and APPO sample with EnvRunner, Ape-X with ApexActor."""
    model = ModelConfig(hiddens=(8,))
    if role == "ppo":
        loop = EnvRunner("distrl_user_envs:endless", 2, model, 0.99, 0.95, seed=0,
                         max_episode_steps=5).loop
    else:
        loop = ApexActor("distrl_user_envs:Endless", 2, model, True, [0.1, 0.2], 0.99, 3, 0,
                         False, max_episode_steps=5).loop
    traj = loop.collect(_Constant(), 10, None)
    assert not np.any(traj.terminated)
    # Steps 5 and 11 end an episode (the step between is NEXT_STEP's reset step).
    assert [int(t.all()) for t in traj.truncated] == [0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1]


class _Constant:
    def act(self, obs, generator, context):
        return torch.zeros(len(obs), dtype=torch.int64), {}


def test_an_env_without_a_limit_is_warned_about_once(tmp_path, capsys):
    train_ppo(CFG, RunConfig(env="distrl_user_envs:Endless", max_env_steps=128,
                             logdir=str(tmp_path / "a"), progress=False))
    warnings = [line for line in capsys.readouterr().err.splitlines() if "warning" in line]
    assert warnings == ["distrl: warning: env 'distrl_user_envs:Endless' has no step limit of "
                        "its own: if its episodes may not end, pass --max-episode-steps N "
                        "(RunConfig.max_episode_steps)."]
    for env, limit in [("distrl_user_envs:Endless", 9), ("CartPole-v1", None),
                       (lambda: gym.make("CartPole-v1"), None)]:
        train_ppo(CFG, RunConfig(env=env, max_episode_steps=limit, max_env_steps=64,
                                 logdir=str(tmp_path / "b"), progress=False))
        assert "warning" not in capsys.readouterr().err


def test_a_game_run_refuses_max_episode_steps():
    from distrl import LeagueConfig, train_league

    with pytest.raises(ValueError, match="`max_episode_steps` applies to gymnasium envs"):
        train_league(LeagueConfig(), RunConfig(env="openspiel:kuhn_poker",
                                               max_episode_steps=5, progress=False))
