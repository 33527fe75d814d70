"""A user's env failing in a run, eval on other spaces, episode limits in runs."""

import traceback

import gymnasium as gym
import pytest

from distrl import PPOConfig, RunConfig, train_ppo
from distrl.cli import main
from distrl.core.evaluation import run_episodes
from distrl.envs import make as envs
from distrl.envs.errors import EnvError
from tests.fakes import BUG_LINE, USER_FILE, with_user_envs
from tests.unit.test_env_errors import SMALL, cli_error

CFG = PPOConfig(train_batch_size=64, minibatch_size=32, num_epochs=1, num_env_runners=0,
                num_envs_per_env_runner=2)


@pytest.fixture(autouse=True)
def user_envs(monkeypatch):
    with_user_envs(monkeypatch)


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


def test_an_env_without_a_limit_gets_the_default_one_said_once(tmp_path, capsys, monkeypatch):
    """Training and evaluation truncate its episodes (an endless one held `distrl eval`
    forever) and say so in one line; an env with a limit of its own hears nothing."""
    monkeypatch.setattr(envs, "DEFAULT_MAX_EPISODE_STEPS", 9)
    said = ("distrl: env 'distrl_user_envs:Endless' declares no step limit: its episodes are "
            "truncated after 9 steps (--max-episode-steps N, RunConfig.max_episode_steps, to "
            "change).")
    result = train_ppo(CFG, RunConfig(env="distrl_user_envs:Endless", max_env_steps=128,
                                      evaluation_interval=1, evaluation_duration=2,
                                      logdir=str(tmp_path / "a"), progress=False))
    assert result["env/episode_len_mean"] == 9 and result["eval/episode_len_mean"] == 9
    assert [line for line in capsys.readouterr().err.splitlines() if line] == [said]
    assert run_episodes(tmp_path / "a", 2).lengths == [9, 9]  # the limit the run saved
    assert capsys.readouterr().err == ""
    gym.register("LimitedCountdown-v0", entry_point="distrl_user_envs:Countdown",
                 max_episode_steps=3, kwargs={"length": 100})
    for name, env in [("b", "LimitedCountdown-v0"), ("c", "CartPole-v1"),
                      ("d", lambda: gym.make("CartPole-v1"))]:
        out = train_ppo(CFG, RunConfig(env=env, max_env_steps=64, logdir=str(tmp_path / name),
                                       progress=False))
        assert capsys.readouterr().err == "" and out["iteration"] == 1
    # Its limit is the env's own, not saved: evaluated on an endless env, eval applies one.
    assert run_episodes(tmp_path / "b", 2).lengths == [3, 3]
    assert run_episodes(tmp_path / "b", 2, env="distrl_user_envs:Endless").lengths == [9, 9]
    assert capsys.readouterr().err.strip() == said
