"""AlphaZero's Ray self-play workers: they play with the weights they are sent, a dead
or hung worker's share is played by its replacement, a run trains through them, and a
run whose workers cannot start shuts down the Ray it started."""

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("pettingzoo")
pytest.importorskip("pyspiel")

from distrl.alphazero.config import AlphaZeroConfig
from distrl.alphazero.remote import RaySelfPlayers
from distrl.alphazero.self_play import SelfPlayer
from distrl.alphazero.train import train_alphazero
from distrl.core.config import RunConfig
from distrl.games.games import make_multiagent_env
from tests.fakes import claim
from tests.integration.conftest import kill

pytestmark = pytest.mark.ray

ENV = "pettingzoo:connect_four_v3"
# One simulation, no noise, no sampled moves: every move is the network's top prior.
GREEDY = AlphaZeroConfig(num_games=2, num_simulations=1, dirichlet_fraction=0.0,
                         temperature_moves=0)


def connect_four_in_driver_only(driver: int):
    """Connect four in the driver (pid ``driver``); elsewhere (a worker) it cannot start."""
    if os.getpid() != driver:
        raise RuntimeError("this env cannot start here (test)")
    return make_multiagent_env(ENV)


class HangsInOneWorker:
    """Connect four whose observe_states blocks for 10 minutes in one worker process (the
    first to claim ``token_dir``; never the driver): a frozen worker only a timeout sees."""

    def __init__(self, token_dir: str, driver: int):
        self.env = make_multiagent_env(ENV)
        self.hang = os.getpid() != driver and claim(token_dir)

    def __getattr__(self, name):
        return getattr(self.env, name)

    def observe_states(self, states):
        if self.hang:
            time.sleep(600)
        return self.env.observe_states(states)


def favouring(column: int) -> dict[str, np.ndarray]:
    """Weights of a network whose policy is all but certain of ``column``."""
    player = SelfPlayer(ENV, {}, GREEDY, seed=0)
    weights = {k: np.zeros_like(v.numpy()) for k, v in player.model.state_dict().items()}
    bias = next(k for k in weights if weights[k].shape == (7,))  # the policy head's bias
    weights[bias][column] = 20.0
    return weights


def first_moves(games: list[tuple]) -> set[int]:
    return {int(policy[0].argmax()) for _, policy, _, _ in games}


def test_workers_play_with_the_weights_they_are_sent(ray_local):
    """A game lasts at most 42 moves (a full board): 42 rounds end every game a call
    starts; a game in progress when the weights change ends with its old first move
    within 42 rounds, so later calls play 84 and look for the new first move."""
    players = RaySelfPlayers(lambda i, restart: dict(env=ENV, env_config={}, config=GREEDY,
                                                     seed=i), 2, 1, RunConfig())
    try:
        games = players.play(favouring(3), rounds=42)
        assert len(games) >= 4 and first_moves(games) == {3}
        assert 5 in first_moves(players.play(favouring(5), rounds=84))
        kill(players.sup.actors[1])
        assert 2 in first_moves(players.play(favouring(2), rounds=84))
        assert players.metrics() == {"faults/restarts/self_play": 1}
    finally:
        players.close()


def test_a_run_trains_through_ray_workers(ray_local, tmp_path):
    config = AlphaZeroConfig(num_games=2, num_simulations=4, moves_per_iteration=32,
                             learning_starts=32, train_batch_size=32, eval_interval=0,
                             num_workers=2)
    out = train_alphazero(config, RunConfig(env=ENV, max_env_steps=192, logdir=str(tmp_path),
                                            progress=False))
    # 32 moves an iteration: two workers, eight rounds of two games each; 48 moves of
    # each game in all, so every game started first has ended (42 moves at most).
    assert out["iteration"] == 6 and out["env/steps_total"] == 192
    assert out["env/episodes_total"] >= 4 and out["replay/size"] > 0
    assert "learner/policy_loss" in out and out["faults/restarts/self_play"] == 0


# alone: a timing bound (the actor timeout)
@pytest.mark.alone
def test_a_hung_worker_is_replaced_and_the_iteration_completes(ray_local, tmp_path):
    """One worker freezes in its first call; after actor_timeout_s it is replaced, the
    replacement plays its share, and both iterations complete."""
    config = AlphaZeroConfig(num_games=2, num_simulations=4, moves_per_iteration=16,
                             learning_starts=16, train_batch_size=16, eval_interval=0,
                             num_workers=2)
    out = train_alphazero(config, RunConfig(
        env="tests.integration.test_alphazero_ray:HangsInOneWorker",
        env_config={"token_dir": str(tmp_path), "driver": os.getpid()}, max_env_steps=32,
        actor_timeout_s=10.0, logdir=str(tmp_path / "run"), progress=False))
    assert out["iteration"] == 2 and out["env/steps_total"] == 32
    assert out["faults/restarts/self_play"] == 1


def test_a_failed_start_shuts_down_the_ray_it_started_and_only_that(tmp_path):
    """In a fresh process (no test's Ray): a worker that cannot start fails the run, which
    leaves no Ray of its own running, and leaves the caller's Ray up."""
    train = ("try:\n"
             "    train_alphazero(AlphaZeroConfig(num_games=2, num_simulations=1, "
             "num_workers=1, eval_interval=0), RunConfig(env='tests.integration."
             "test_alphazero_ray:connect_four_in_driver_only', env_config={'driver': "
             "os.getpid()}, max_env_steps=8, logdir=%r, progress=False))\n"
             "except RuntimeError as err:\n"
             "    assert 'self_play 0 failed to start' in str(err), err\n"
             "else:\n"
             "    raise AssertionError('the worker started')\n")
    code = ("import os\nimport ray\n"
            "from distrl import AlphaZeroConfig, RunConfig, train_alphazero\n"
            + train % str(tmp_path / "a")
            + "assert not ray.is_initialized(), 'the failed run left its Ray up'\n"
            + "ray.init(address='local', num_cpus=1, include_dashboard=False)\n"
            + train % str(tmp_path / "b")
            + "assert ray.is_initialized(), 'the failed run shut down the caller\\'s Ray'\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300, cwd=Path(__file__).parents[2])
    assert out.returncode == 0, out.stderr[-3000:]
