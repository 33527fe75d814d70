"""Bad env input refused before a run: an --env-config key named with the keys the env
takes, --max-episode-steps refused for games; and every sampler truncating episodes."""

import numpy as np
import pytest
import torch

from distrl import RunConfig
from distrl.apex.roles import ApexActor
from distrl.cli import main
from distrl.models.config import ModelConfig
from distrl.ppo.env_runner import EnvRunner
from tests.fakes import with_user_envs

SMALL = ["--train-batch-size", "64", "--minibatch-size", "32", "--num-epochs", "1",
         "--num-env-runners", "0", "--num-envs-per-env-runner", "2", "--max-env-steps", "64"]


@pytest.fixture(autouse=True)
def user_envs(monkeypatch):
    with_user_envs(monkeypatch)


def cli_error(*args) -> str:
    """The one line `distrl` exits with."""
    with pytest.raises(SystemExit) as raised:
        main(list(args))
    return str(raised.value.code)


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


def test_a_game_run_refuses_max_episode_steps():
    from distrl import LeagueConfig, train_league

    with pytest.raises(ValueError, match="`max_episode_steps` applies to gymnasium envs"):
        train_league(LeagueConfig(), RunConfig(env="openspiel:kuhn_poker",
                                               max_episode_steps=5, progress=False))
